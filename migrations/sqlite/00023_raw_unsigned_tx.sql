-- +goose Up
-- A signing request carries its transaction's unsigned bytes (hex), which a signer decodes
-- itself instead of trusting the readable fields; and a signer may refuse it. SQLite cannot
-- change a table's constraints in place, so the table is rebuilt.
CREATE TABLE signing_requests_next (
    id               TEXT PRIMARY KEY,
    org_id           TEXT NOT NULL,
    app              TEXT NOT NULL,
    domain           TEXT NOT NULL,
    order_id         TEXT NOT NULL REFERENCES orders (id),
    position         INTEGER NOT NULL,
    attempt          INTEGER NOT NULL DEFAULT 0,
    leg              TEXT NOT NULL,
    wallet_id        TEXT NOT NULL REFERENCES wallets (id),
    chain            TEXT NOT NULL,
    unsigned_tx      TEXT NOT NULL,
    raw_unsigned_tx  TEXT NOT NULL DEFAULT '',
    scheme           TEXT NOT NULL DEFAULT 'ed25519',
    digest           TEXT NOT NULL,
    nonce            BIGINT,
    replaces_tx_hash TEXT,
    status           TEXT NOT NULL CHECK (status IN ('pending', 'signed', 'expired', 'refused')),
    signature        TEXT,
    created_at       DATETIME NOT NULL,
    expires_at       DATETIME NOT NULL,
    signed_at        DATETIME,
    UNIQUE (order_id, position, attempt)
);
INSERT INTO signing_requests_next (id, org_id, app, domain, order_id, position, attempt, leg, wallet_id, chain, unsigned_tx,
    scheme, digest, nonce, replaces_tx_hash, status, signature, created_at, expires_at, signed_at)
SELECT id, org_id, app, domain, order_id, position, attempt, leg, wallet_id, chain, unsigned_tx,
    scheme, digest, nonce, replaces_tx_hash, status, signature, created_at, expires_at, signed_at FROM signing_requests;
DROP TABLE signing_requests;
ALTER TABLE signing_requests_next RENAME TO signing_requests;
CREATE INDEX signing_requests_org ON signing_requests (org_id, app, status, id);
CREATE INDEX signing_requests_wallet ON signing_requests (wallet_id, status);

-- +goose Down
CREATE TABLE signing_requests_prev (
    id               TEXT PRIMARY KEY,
    org_id           TEXT NOT NULL,
    app              TEXT NOT NULL,
    domain           TEXT NOT NULL,
    order_id         TEXT NOT NULL REFERENCES orders (id),
    position         INTEGER NOT NULL,
    attempt          INTEGER NOT NULL DEFAULT 0,
    leg              TEXT NOT NULL,
    wallet_id        TEXT NOT NULL REFERENCES wallets (id),
    chain            TEXT NOT NULL,
    unsigned_tx      TEXT NOT NULL,
    scheme           TEXT NOT NULL DEFAULT 'ed25519',
    digest           TEXT NOT NULL,
    nonce            BIGINT,
    replaces_tx_hash TEXT,
    status           TEXT NOT NULL CHECK (status IN ('pending', 'signed', 'expired')),
    signature        TEXT,
    created_at       DATETIME NOT NULL,
    expires_at       DATETIME NOT NULL,
    signed_at        DATETIME,
    UNIQUE (order_id, position, attempt)
);
INSERT INTO signing_requests_prev (id, org_id, app, domain, order_id, position, attempt, leg, wallet_id, chain, unsigned_tx,
    scheme, digest, nonce, replaces_tx_hash, status, signature, created_at, expires_at, signed_at)
SELECT id, org_id, app, domain, order_id, position, attempt, leg, wallet_id, chain, unsigned_tx,
    scheme, digest, nonce, replaces_tx_hash, CASE status WHEN 'refused' THEN 'expired' ELSE status END, signature, created_at, expires_at, signed_at FROM signing_requests;
DROP TABLE signing_requests;
ALTER TABLE signing_requests_prev RENAME TO signing_requests;
CREATE INDEX signing_requests_org ON signing_requests (org_id, app, status, id);
CREATE INDEX signing_requests_wallet ON signing_requests (wallet_id, status);
