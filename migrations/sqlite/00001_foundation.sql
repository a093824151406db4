-- +goose Up
-- Amounts are exact decimal strings (TEXT); the store validates them before writing.
CREATE TABLE organizations (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    created_at  DATETIME NOT NULL
);

CREATE TABLE users (
    id             TEXT PRIMARY KEY,
    org_id         TEXT NOT NULL REFERENCES organizations (id),
    email          TEXT NOT NULL UNIQUE,
    password_hash  TEXT NOT NULL,
    role           TEXT NOT NULL CHECK (role IN ('owner', 'member')),
    created_at     DATETIME NOT NULL
);

CREATE TABLE member_permissions (
    user_id  TEXT NOT NULL REFERENCES users (id),
    app      TEXT NOT NULL,
    actions  TEXT NOT NULL,
    PRIMARY KEY (user_id, app)
);

CREATE TABLE api_keys (
    id            TEXT PRIMARY KEY,
    org_id        TEXT NOT NULL REFERENCES organizations (id),
    app           TEXT NOT NULL,
    kind          TEXT NOT NULL CHECK (kind IN ('sk', 'tk', 'pk')),
    actions       TEXT NOT NULL,
    resource_ids  TEXT NOT NULL DEFAULT '',
    label         TEXT NOT NULL DEFAULT '',
    secret_hash   TEXT NOT NULL UNIQUE,
    secret_hint   TEXT NOT NULL,
    created_at    DATETIME NOT NULL,
    last_used_at  DATETIME,
    revoked_at    DATETIME
);
CREATE INDEX api_keys_org_app ON api_keys (org_id, app);

CREATE TABLE oauth_clients (
    id           TEXT PRIMARY KEY,
    org_id       TEXT NOT NULL REFERENCES organizations (id),
    app          TEXT NOT NULL,
    secret_hash  TEXT NOT NULL,
    scopes       TEXT NOT NULL,
    label        TEXT NOT NULL DEFAULT '',
    created_at   DATETIME NOT NULL,
    revoked_at   DATETIME
);
CREATE INDEX oauth_clients_org_app ON oauth_clients (org_id, app);

CREATE TABLE wallets (
    id          TEXT PRIMARY KEY,
    org_id      TEXT NOT NULL REFERENCES organizations (id),
    chain       TEXT NOT NULL,
    address     TEXT NOT NULL,
    public_key  TEXT NOT NULL,
    auto_sign   INTEGER NOT NULL DEFAULT 0,
    label       TEXT NOT NULL DEFAULT '',
    created_at  DATETIME NOT NULL,
    synced_at   DATETIME,
    UNIQUE (chain, address)
);
CREATE INDEX wallets_org ON wallets (org_id, id);

CREATE TABLE balances (
    wallet_id  TEXT NOT NULL REFERENCES wallets (id),
    asset      TEXT NOT NULL,
    amount     TEXT NOT NULL,
    synced_at  DATETIME NOT NULL,
    PRIMARY KEY (wallet_id, asset)
);

CREATE TABLE prices (
    asset       TEXT PRIMARY KEY,
    usd_price   TEXT NOT NULL,
    updated_at  DATETIME NOT NULL
);

CREATE TABLE policies (
    org_id      TEXT NOT NULL REFERENCES organizations (id),
    app         TEXT NOT NULL,
    document    TEXT NOT NULL,
    version     INTEGER NOT NULL,
    updated_by  TEXT NOT NULL,
    updated_at  DATETIME NOT NULL,
    PRIMARY KEY (org_id, app)
);

CREATE TABLE idempotency_records (
    org_id            TEXT NOT NULL,
    key               TEXT NOT NULL,
    method            TEXT NOT NULL,
    path              TEXT NOT NULL,
    fingerprint       TEXT NOT NULL,
    state             TEXT NOT NULL CHECK (state IN ('in_flight', 'done')),
    status_code       INTEGER NOT NULL DEFAULT 0,
    response_headers  TEXT NOT NULL DEFAULT '',
    response_body     BLOB,
    created_at        DATETIME NOT NULL,
    expires_at        DATETIME NOT NULL,
    PRIMARY KEY (org_id, key)
);
CREATE INDEX idempotency_records_expiry ON idempotency_records (expires_at);

CREATE TABLE audit_logs (
    id              TEXT PRIMARY KEY,
    org_id          TEXT NOT NULL,
    app             TEXT NOT NULL,
    actor_type      TEXT NOT NULL,
    actor_id        TEXT NOT NULL,
    action          TEXT NOT NULL,
    resource_type   TEXT NOT NULL,
    resource_id     TEXT NOT NULL,
    correlation_id  TEXT NOT NULL,
    details         TEXT NOT NULL DEFAULT '{}',
    created_at      DATETIME NOT NULL
);
CREATE INDEX audit_logs_org_time ON audit_logs (org_id, id);

-- The simulated chain's own ledger; a real chain adapter keeps nothing here.
CREATE TABLE devchain_accounts (
    chain    TEXT NOT NULL,
    address  TEXT NOT NULL,
    asset    TEXT NOT NULL,
    amount   TEXT NOT NULL,
    PRIMARY KEY (chain, address, asset)
);

-- +goose Down
DROP TABLE devchain_accounts;
DROP TABLE audit_logs;
DROP TABLE idempotency_records;
DROP TABLE policies;
DROP TABLE prices;
DROP TABLE balances;
DROP TABLE wallets;
DROP TABLE oauth_clients;
DROP TABLE api_keys;
DROP TABLE member_permissions;
DROP TABLE users;
DROP TABLE organizations;
