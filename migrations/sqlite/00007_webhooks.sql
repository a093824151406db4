-- +goose Up
-- Webhook configs (SPEC 6): an app's endpoint, the events it wants (comma-separated
-- subscription entries, lowercase), and its signing secret sealed with the operator's key
-- (the service signs with it, so it cannot keep a hash). While a secret is rotated the old
-- one signs too, until previous_secret_until.
CREATE TABLE webhook_configs (
    id                     TEXT PRIMARY KEY,
    org_id                 TEXT NOT NULL REFERENCES organizations (id),
    app                    TEXT NOT NULL,
    url                    TEXT NOT NULL,
    events                 TEXT NOT NULL,
    description            TEXT NOT NULL,
    enabled                BOOLEAN NOT NULL,
    disabled_reason        TEXT,
    secret                 TEXT NOT NULL,
    previous_secret        TEXT,
    previous_secret_until  DATETIME,
    failing_since          DATETIME,
    created_at             DATETIME NOT NULL,
    updated_at             DATETIME NOT NULL
);
CREATE INDEX webhook_configs_org_app ON webhook_configs (org_id, app, id);

-- One row per message and config: written in the transaction that commits the event, so
-- that none is lost. A redelivery is a new row of the same message (redelivery 1, 2, …).
-- A worker leases a due row (lease_until) before it sends it; a worker that dies mid-send
-- leaves it to be sent again once the lease ends.
CREATE TABLE webhook_deliveries (
    id               TEXT PRIMARY KEY,
    message_id       TEXT NOT NULL,
    config_id        TEXT NOT NULL REFERENCES webhook_configs (id) ON DELETE CASCADE,
    event_id         TEXT NOT NULL,
    event            TEXT NOT NULL,
    order_id         TEXT NOT NULL,
    correlation_id   TEXT NOT NULL,
    payload          TEXT NOT NULL,
    redelivery       INTEGER NOT NULL,
    status           TEXT NOT NULL,
    attempts         INTEGER NOT NULL,
    next_attempt_at  DATETIME,
    lease_until      DATETIME,
    leased_by        TEXT,
    created_at       DATETIME NOT NULL,
    completed_at     DATETIME,
    UNIQUE (config_id, event_id, redelivery)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_attempt_at);
CREATE INDEX webhook_deliveries_config ON webhook_deliveries (config_id, id);

-- Every attempt of a delivery, as it was made.
CREATE TABLE webhook_attempts (
    delivery_id  TEXT NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    n            INTEGER NOT NULL,
    at           DATETIME NOT NULL,
    status_code  INTEGER,
    latency_ms   DOUBLE PRECISION NOT NULL,
    error        TEXT,
    response     TEXT,
    PRIMARY KEY (delivery_id, n)
);

-- +goose Down
DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_configs;
