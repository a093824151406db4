-- +goose Up
-- The simulated chain is gone: every chain is served by a real adapter (a node, or the
-- dev bundle's own EVM chains and Solana runtime), and its ledger goes with it.
DROP TABLE devchain_transactions;
DROP TABLE devchain_accounts;

-- +goose Down
CREATE TABLE devchain_accounts (
    chain    TEXT NOT NULL,
    address  TEXT NOT NULL,
    asset    TEXT NOT NULL,
    amount   NUMERIC NOT NULL CHECK (amount >= 0),
    PRIMARY KEY (chain, address, asset)
);
CREATE TABLE devchain_transactions (
    hash          TEXT PRIMARY KEY,
    chain         TEXT NOT NULL,
    digest        TEXT NOT NULL UNIQUE,
    kind          TEXT NOT NULL,
    from_address  TEXT NOT NULL,
    to_address    TEXT NOT NULL DEFAULT '',
    asset         TEXT NOT NULL DEFAULT '',
    amount        NUMERIC NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('pending', 'confirmed', 'failed')),
    failure       TEXT NOT NULL DEFAULT '',
    broadcast_at  TIMESTAMPTZ NOT NULL,
    confirms_at   TIMESTAMPTZ NOT NULL,
    submissions   INTEGER NOT NULL DEFAULT 1
);
