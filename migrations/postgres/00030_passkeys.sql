-- +goose Up
-- Passkeys (SPEC 3.5a): a registration under way keeps its WebAuthn challenge until the
-- browser answers; a passkey's decision keeps the rest of its assertion.
CREATE TABLE passkey_registrations (
    user_id    TEXT PRIMARY KEY,
    session    TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
ALTER TABLE approval_decisions ADD COLUMN authenticator_data TEXT NOT NULL DEFAULT '';
ALTER TABLE approval_decisions ADD COLUMN client_data_json TEXT NOT NULL DEFAULT '';
CREATE INDEX approver_keys_user ON approver_keys (user_id);

-- +goose Down
DROP INDEX approver_keys_user;
ALTER TABLE approval_decisions DROP COLUMN client_data_json;
ALTER TABLE approval_decisions DROP COLUMN authenticator_data;
DROP TABLE passkey_registrations;
