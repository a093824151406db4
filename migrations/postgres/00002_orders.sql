-- +goose Up
CREATE TABLE orders (
    id                 TEXT PRIMARY KEY,
    org_id             TEXT NOT NULL REFERENCES organizations (id),
    app                TEXT NOT NULL,
    domain             TEXT NOT NULL CHECK (domain IN ('payment', 'trade', 'earn', 'borrow')),
    status             TEXT NOT NULL,
    wallet_id          TEXT NOT NULL REFERENCES wallets (id),
    chain              TEXT NOT NULL,
    -- The domain's own fields (asset, amount, destination, …) as canonical JSON.
    details            TEXT NOT NULL,
    payload_hash       TEXT NOT NULL,
    amount_usd         NUMERIC NOT NULL,
    approval_required  BOOLEAN NOT NULL DEFAULT FALSE,
    approval_quorum    INTEGER NOT NULL DEFAULT 0,
    approval_item_id   TEXT,
    -- The policy decision taken at submit (JSON), so that a retried step repeats it.
    policy_decision    TEXT,
    failure_code       TEXT,
    failure_message    TEXT,
    rejection_reason   TEXT,
    rejection_detail   TEXT,
    created_by         TEXT NOT NULL,
    correlation_id     TEXT NOT NULL,
    workflow_id        TEXT NOT NULL,
    -- The last event sequence number used; events of an order are numbered without gaps.
    event_sequence     INTEGER NOT NULL DEFAULT 0,
    created_at         TIMESTAMPTZ NOT NULL,
    updated_at         TIMESTAMPTZ NOT NULL,
    submitted_at       TIMESTAMPTZ,
    completed_at       TIMESTAMPTZ
);
CREATE INDEX orders_org_app ON orders (org_id, app, id);
CREATE INDEX orders_org_app_status ON orders (org_id, app, status, id);
CREATE INDEX orders_wallet_submitted ON orders (wallet_id, submitted_at);

CREATE TABLE order_legs (
    order_id            TEXT NOT NULL REFERENCES orders (id),
    position            INTEGER NOT NULL,
    leg                 TEXT NOT NULL,
    status              TEXT NOT NULL,
    signing_request_id  TEXT,
    tx_hash             TEXT,
    PRIMARY KEY (order_id, position)
);

-- Append-only: every status an order has been in, and why.
CREATE TABLE order_status_history (
    id              TEXT PRIMARY KEY,
    order_id        TEXT NOT NULL REFERENCES orders (id),
    status          TEXT NOT NULL,
    reason          TEXT NOT NULL DEFAULT '',
    correlation_id  TEXT NOT NULL,
    at              TIMESTAMPTZ NOT NULL
);
CREATE INDEX order_status_history_order ON order_status_history (order_id, id);

-- One row per lifecycle step applied to an order: a retried step finds its row and
-- changes nothing, so no status moves twice and no event is emitted twice.
CREATE TABLE order_steps (
    order_id    TEXT NOT NULL REFERENCES orders (id),
    step        TEXT NOT NULL,
    applied_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (order_id, step)
);

-- The outbox: written in the same transaction as the state change it reports.
CREATE TABLE events (
    id              TEXT PRIMARY KEY,
    org_id          TEXT NOT NULL,
    app             TEXT NOT NULL,
    domain          TEXT NOT NULL,
    order_id        TEXT NOT NULL REFERENCES orders (id),
    sequence        INTEGER NOT NULL,
    event           TEXT NOT NULL,
    leg             TEXT NOT NULL DEFAULT '',
    -- The lifecycle step that emitted it; a retried step finds its event and emits nothing.
    step            TEXT NOT NULL,
    data            TEXT NOT NULL,
    correlation_id  TEXT NOT NULL,
    occurred_at     TIMESTAMPTZ NOT NULL,
    UNIQUE (order_id, sequence),
    UNIQUE (order_id, step)
);
CREATE INDEX events_org_app ON events (org_id, app, id);

-- An order waiting for approvers; it binds to the order's payload hash.
CREATE TABLE approval_items (
    id                  TEXT PRIMARY KEY,
    org_id              TEXT NOT NULL,
    app                 TEXT NOT NULL,
    domain              TEXT NOT NULL,
    order_id            TEXT NOT NULL UNIQUE REFERENCES orders (id),
    status              TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'expired')),
    required_approvals  INTEGER NOT NULL,
    reason              TEXT NOT NULL,
    payload_hash        TEXT NOT NULL,
    summary             TEXT NOT NULL,
    created_by          TEXT NOT NULL,
    created_at          TIMESTAMPTZ NOT NULL,
    expires_at          TIMESTAMPTZ NOT NULL,
    decided_at          TIMESTAMPTZ
);
CREATE INDEX approval_items_org ON approval_items (org_id, app, status, id);

CREATE TABLE approval_decisions (
    item_id         TEXT NOT NULL REFERENCES approval_items (id),
    decided_by      TEXT NOT NULL,
    decision        TEXT NOT NULL CHECK (decision IN ('APPROVE', 'REJECT')),
    comment         TEXT NOT NULL DEFAULT '',
    correlation_id  TEXT NOT NULL,
    decided_at      TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (item_id, decided_by)
);

-- One per order leg: what must be signed, and the signature once it came.
CREATE TABLE signing_requests (
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
    created_at   TIMESTAMPTZ NOT NULL,
    expires_at   TIMESTAMPTZ NOT NULL,
    signed_at    TIMESTAMPTZ,
    UNIQUE (order_id, position)
);
CREATE INDEX signing_requests_org ON signing_requests (org_id, app, status, id);
CREATE INDEX signing_requests_wallet ON signing_requests (wallet_id, status);

-- The simulated chain's transactions. The same signed payload broadcast twice is one
-- transaction (unique digest); its effect on balances is applied once, when it confirms.
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
    confirms_at   TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE devchain_transactions;
DROP TABLE signing_requests;
DROP TABLE approval_decisions;
DROP TABLE approval_items;
DROP TABLE events;
DROP TABLE order_steps;
DROP TABLE order_status_history;
DROP TABLE order_legs;
DROP TABLE orders;
