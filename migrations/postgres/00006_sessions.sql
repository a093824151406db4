-- +goose Up
-- Console sessions of people (owner and members). The cookie's token is kept only as a
-- hash; a row lives until it expires or its person signs out.
CREATE TABLE sessions (
    token_hash  TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL REFERENCES users (id),
    org_id      TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL,
    revoked_at  TIMESTAMPTZ
);
CREATE INDEX sessions_user ON sessions (user_id);
CREATE INDEX sessions_expiry ON sessions (expires_at);

-- A changed password ends every session signed in before the change, including one whose
-- sign-in was still checking the old password.
ALTER TABLE users ADD COLUMN password_changed_at TIMESTAMPTZ;

-- The person who created a key or OAuth client, if a person did: what the credential does
-- counts as that person's for maker-checker.
ALTER TABLE api_keys ADD COLUMN created_by TEXT NOT NULL DEFAULT '';
ALTER TABLE oauth_clients ADD COLUMN created_by TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE oauth_clients DROP COLUMN created_by;
ALTER TABLE api_keys DROP COLUMN created_by;
ALTER TABLE users DROP COLUMN password_changed_at;
DROP TABLE sessions;
