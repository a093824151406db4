-- +goose Up
-- Each wallet signs in one scheme: secp256k1 on EVM chains, ed25519 on the simulated chain.
ALTER TABLE wallets ADD COLUMN scheme TEXT NOT NULL DEFAULT 'ed25519';
-- A signing request records the scheme its digest is signed in and, on a chain with
-- account nonces, the nonce of the transaction it describes.
ALTER TABLE signing_requests ADD COLUMN scheme TEXT NOT NULL DEFAULT 'ed25519';
ALTER TABLE signing_requests ADD COLUMN nonce BIGINT;
-- The next nonce of each sending address, assigned inside the step that records a signing
-- request, so that concurrent orders from one wallet get ordered nonces, and a retry none.
CREATE TABLE account_nonces (
    chain TEXT NOT NULL,
    address TEXT NOT NULL,
    next_nonce BIGINT NOT NULL,
    PRIMARY KEY (chain, address)
);
-- Nonces given back by signing requests that expired unsigned while a later nonce was
-- already out: the next signing request of that address takes the lowest one first.
CREATE TABLE released_nonces (
    chain TEXT NOT NULL,
    address TEXT NOT NULL,
    nonce BIGINT NOT NULL,
    PRIMARY KEY (chain, address, nonce)
);

-- +goose Down
DROP TABLE released_nonces;
DROP TABLE account_nonces;
ALTER TABLE signing_requests DROP COLUMN nonce;
ALTER TABLE signing_requests DROP COLUMN scheme;
ALTER TABLE wallets DROP COLUMN scheme;
