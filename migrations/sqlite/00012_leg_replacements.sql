-- +goose Up
-- Every transaction broadcast for a leg, oldest first (JSON array of hashes): a leg stuck
-- below the fee market is replaced at the same nonce, and the order follows whichever of
-- them confirms.
ALTER TABLE order_legs ADD COLUMN tx_hashes TEXT NOT NULL DEFAULT '';
-- A leg has one signing request per attempt: its transaction (0), then each replacement
-- of it (1, 2, …), which names the stuck transaction it replaces. SQLite cannot change a
-- table's constraints in place, so the table is rebuilt.
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
INSERT INTO signing_requests_next (id, org_id, app, domain, order_id, position, leg, wallet_id, chain, unsigned_tx,
    scheme, digest, nonce, status, signature, created_at, expires_at, signed_at)
SELECT id, org_id, app, domain, order_id, position, leg, wallet_id, chain, unsigned_tx,
    scheme, digest, nonce, status, signature, created_at, expires_at, signed_at FROM signing_requests;
DROP TABLE signing_requests;
ALTER TABLE signing_requests_next RENAME TO signing_requests;
CREATE INDEX signing_requests_org ON signing_requests (org_id, app, status, id);
CREATE INDEX signing_requests_wallet ON signing_requests (wallet_id, status);

-- +goose Down
CREATE TABLE signing_requests_prev (
    id           TEXT PRIMARY KEY,
    org_id       TEXT NOT NULL,
    app          TEXT NOT NULL,
    domain       TEXT NOT NULL,
    order_id     TEXT NOT NULL REFERENCES orders (id),
    position     INTEGER NOT NULL,
    leg          TEXT NOT NULL,
    wallet_id    TEXT NOT NULL REFERENCES wallets (id),
    chain        TEXT NOT NULL,
    unsigned_tx  TEXT NOT NULL,
    digest       TEXT NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('pending', 'signed', 'expired')),
    signature    TEXT,
    created_at   DATETIME NOT NULL,
    expires_at   DATETIME NOT NULL,
    signed_at    DATETIME,
    scheme       TEXT NOT NULL DEFAULT 'ed25519',
    nonce        BIGINT,
    UNIQUE (order_id, position)
);
INSERT INTO signing_requests_prev (id, org_id, app, domain, order_id, position, leg, wallet_id, chain, unsigned_tx,
    digest, status, signature, created_at, expires_at, signed_at, scheme, nonce)
SELECT id, org_id, app, domain, order_id, position, leg, wallet_id, chain, unsigned_tx,
    digest, status, signature, created_at, expires_at, signed_at, scheme, nonce FROM signing_requests WHERE attempt = 0;
DROP TABLE signing_requests;
ALTER TABLE signing_requests_prev RENAME TO signing_requests;
CREATE INDEX signing_requests_org ON signing_requests (org_id, app, status, id);
CREATE INDEX signing_requests_wallet ON signing_requests (wallet_id, status);
ALTER TABLE order_legs DROP COLUMN tx_hashes;
