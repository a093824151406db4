-- +goose Up
-- An approving OAuth client may carry an approver key, as an approving tk key does.
ALTER TABLE oauth_clients ADD COLUMN approver_key_id TEXT;

-- +goose Down
ALTER TABLE oauth_clients DROP COLUMN approver_key_id;
