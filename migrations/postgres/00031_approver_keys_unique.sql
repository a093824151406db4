-- +goose Up
-- One public key is one approver key of an organisation: under two ids (two credentials,
-- or a person copying another's key) one signature would count twice.
CREATE UNIQUE INDEX approver_keys_public_key ON approver_keys (org_id, public_key);

-- +goose Down
DROP INDEX approver_keys_public_key;
