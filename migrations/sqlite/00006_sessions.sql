-- +goose Up
-- Console sessions of people (owner and members). The cookie's token is kept only as a
-- hash; a row lives until it expires or its person signs out.
CREATE TABLE sessions (
    token_hash  TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL REFERENCES users (id),
    org_id      TEXT NOT NULL,
    created_at  DATETIME NOT NULL,
    expires_at  DATETIME NOT NULL,
    revoked_at  DATETIME
);
CREATE INDEX sessions_user ON sessions (user_id);
CREATE INDEX sessions_expiry ON sessions (expires_at);

-- +goose Down
DROP TABLE sessions;
