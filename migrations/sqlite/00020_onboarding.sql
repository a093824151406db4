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
CREATE INDEX sign_in_links_expiry ON sign_in_links (expires_at);

-- A wallet the organisation registered with proof that it holds the key: the challenge
-- it signed (5 minutes, single use). An archived wallet takes no new orders; its history
-- stays.
CREATE TABLE wallet_challenges (
    id          TEXT PRIMARY KEY,
    org_id      TEXT NOT NULL REFERENCES organizations (id),
    chain       TEXT NOT NULL,
    address     TEXT NOT NULL,
    message     TEXT NOT NULL,
    created_by  TEXT NOT NULL,
    created_at  DATETIME NOT NULL,
    expires_at  DATETIME NOT NULL,
    used_at     DATETIME
);
CREATE INDEX wallet_challenges_expiry ON wallet_challenges (expires_at);
ALTER TABLE wallets ADD COLUMN archived_at DATETIME;
ALTER TABLE wallets ADD COLUMN created_by TEXT NOT NULL DEFAULT '';
ALTER TABLE wallets ADD COLUMN created_by_user TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE wallets DROP COLUMN created_by_user;
ALTER TABLE wallets DROP COLUMN created_by;
ALTER TABLE wallets DROP COLUMN archived_at;
DROP TABLE wallet_challenges;
DROP TABLE sign_in_links;
ALTER TABLE organizations DROP COLUMN disabled_at;
