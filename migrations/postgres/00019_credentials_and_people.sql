-- +goose Up
-- One meaning of "created by" and "decided by" everywhere: the credential that acted
-- (key_…, oac_…, or usr_… for a signed-in person), with the person behind it beside it.

-- An approval decision: the approver the quorum counts (a person, or a credential no person
-- made) keys it, so one person decides an item once, whatever credentials they hold. Rows
-- recorded before kept the approver alone: it stands for the credential too.
ALTER TABLE approval_decisions RENAME COLUMN decided_by TO approver;
ALTER TABLE approval_decisions ADD COLUMN decided_by TEXT NOT NULL DEFAULT '';
ALTER TABLE approval_decisions ADD COLUMN decided_by_user TEXT NOT NULL DEFAULT '';
UPDATE approval_decisions SET decided_by = approver,
    decided_by_user = CASE WHEN substr(approver, 1, 4) = 'usr_' THEN approver ELSE '' END;

-- Keys and OAuth clients kept the person who made them as created_by; it moves to
-- created_by_user, and created_by names the credential (for rows made before, the person
-- is the best known: a person made them through the console).
ALTER TABLE api_keys ADD COLUMN created_by_user TEXT NOT NULL DEFAULT '';
UPDATE api_keys SET created_by_user = created_by;
ALTER TABLE oauth_clients ADD COLUMN created_by_user TEXT NOT NULL DEFAULT '';
UPDATE oauth_clients SET created_by_user = created_by;

ALTER TABLE websocket_configs ADD COLUMN created_by TEXT NOT NULL DEFAULT '';
ALTER TABLE websocket_configs ADD COLUMN created_by_user TEXT NOT NULL DEFAULT '';
ALTER TABLE webhook_configs ADD COLUMN created_by TEXT NOT NULL DEFAULT '';
ALTER TABLE webhook_configs ADD COLUMN created_by_user TEXT NOT NULL DEFAULT '';
-- A draft's author is who saved it last; who started it is kept apart.
ALTER TABLE policy_drafts ADD COLUMN created_by TEXT NOT NULL DEFAULT '';
ALTER TABLE policy_drafts ADD COLUMN created_by_user TEXT NOT NULL DEFAULT '';
UPDATE policy_drafts SET created_by = author, created_by_user = author_person;
ALTER TABLE policy_dry_runs ADD COLUMN created_by_user TEXT NOT NULL DEFAULT '';
UPDATE policy_dry_runs SET created_by_user = created_by WHERE substr(created_by, 1, 4) = 'usr_';
ALTER TABLE webhook_recoveries ADD COLUMN created_by_user TEXT NOT NULL DEFAULT '';
UPDATE webhook_recoveries SET created_by_user = created_by WHERE substr(created_by, 1, 4) = 'usr_';

-- +goose Down
ALTER TABLE webhook_recoveries DROP COLUMN created_by_user;
ALTER TABLE policy_dry_runs DROP COLUMN created_by_user;
ALTER TABLE policy_drafts DROP COLUMN created_by_user;
ALTER TABLE policy_drafts DROP COLUMN created_by;
ALTER TABLE webhook_configs DROP COLUMN created_by_user;
ALTER TABLE webhook_configs DROP COLUMN created_by;
ALTER TABLE websocket_configs DROP COLUMN created_by_user;
ALTER TABLE websocket_configs DROP COLUMN created_by;
UPDATE oauth_clients SET created_by = created_by_user;
ALTER TABLE oauth_clients DROP COLUMN created_by_user;
UPDATE api_keys SET created_by = created_by_user;
ALTER TABLE api_keys DROP COLUMN created_by_user;
ALTER TABLE approval_decisions DROP COLUMN decided_by_user;
ALTER TABLE approval_decisions DROP COLUMN decided_by;
ALTER TABLE approval_decisions RENAME COLUMN approver TO decided_by;
