-- +goose Up
-- Approver keys: the public keys people (passkeys) and approving credentials sign their
-- decisions with (SPEC 3.5a). A credential's key is revoked with it.
CREATE TABLE approver_keys (
    id            TEXT PRIMARY KEY,
    org_id        TEXT NOT NULL REFERENCES organizations (id),
    scheme        TEXT NOT NULL CHECK (scheme IN ('ed25519', 'secp256k1', 'p256')),
    public_key    TEXT NOT NULL,
    kind          TEXT NOT NULL CHECK (kind IN ('passkey', 'key')),
    credential_id TEXT,
    user_id       TEXT,
    created_at    DATETIME NOT NULL,
    revoked_at    DATETIME
);
CREATE INDEX approver_keys_org ON approver_keys (org_id, id);
CREATE INDEX approver_keys_credential ON approver_keys (credential_id);
ALTER TABLE api_keys ADD COLUMN approver_key_id TEXT;

-- +goose Down
ALTER TABLE api_keys DROP COLUMN approver_key_id;
DROP TABLE approver_keys;
