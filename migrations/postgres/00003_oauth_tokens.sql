-- +goose Up
-- Access tokens issued to OAuth clients (client credentials). Only their hash is kept; any
-- API replica can check one, and revoking the client revokes its tokens.
CREATE TABLE oauth_tokens (
    token_hash  TEXT PRIMARY KEY,
    client_id   TEXT NOT NULL REFERENCES oauth_clients (id),
    org_id      TEXT NOT NULL,
    app         TEXT NOT NULL,
    actions     TEXT NOT NULL,
    scope       TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX oauth_tokens_expiry ON oauth_tokens (expires_at);

-- +goose Down
DROP TABLE oauth_tokens;
