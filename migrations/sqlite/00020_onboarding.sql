-- +goose Up
-- An organisation the operator disabled: every credential of it is refused from then on,
-- and nothing of it is deleted.
ALTER TABLE organizations ADD COLUMN disabled_at DATETIME;

-- A one-time sign-in link: the operator's (a new owner, a reset) or the owner's (a new
-- member). Kept as the hash of its token; single use, until expires_at. A person made by a
-- link has no password (password_hash '') until they open it.
CREATE TABLE sign_in_links (
    token_hash  TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL REFERENCES users (id),
    org_id      TEXT NOT NULL REFERENCES organizations (id),
    created_by  TEXT NOT NULL,
    created_at  DATETIME NOT NULL,
    expires_at  DATETIME NOT NULL,
    used_at     DATETIME
);
CREATE INDEX sign_in_links_user ON sign_in_links (user_id);

-- +goose Down
DROP TABLE sign_in_links;
ALTER TABLE organizations DROP COLUMN disabled_at;
