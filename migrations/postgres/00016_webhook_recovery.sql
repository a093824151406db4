-- +goose Up
-- A webhook's own delivery rate (messages per second, NULL: no limit of its own).
ALTER TABLE webhook_configs ADD COLUMN rate_limit INTEGER;

-- Attempts answered 429 or 503 with Retry-After: waited out as the receiver asked, and
-- not counted as failures (the retry schedule and the run of failures skip them).
ALTER TABLE webhook_deliveries ADD COLUMN throttled INTEGER NOT NULL DEFAULT 0;

-- A recovery re-queues a webhook's messages of a time window whose last delivery failed
-- or was skipped while the webhook was disabled. Its background job reads the webhook's
-- first deliveries in (created_at, id) order, a page at a time; each page's re-queued
-- deliveries and the place it reached commit together, so a retried page counts nothing
-- twice.
CREATE TABLE webhook_recoveries (
    id              TEXT PRIMARY KEY,
    org_id          TEXT NOT NULL REFERENCES organizations (id),
    config_id       TEXT NOT NULL REFERENCES webhook_configs (id) ON DELETE CASCADE,
    since           TIMESTAMPTZ NOT NULL,
    until           TIMESTAMPTZ NOT NULL,
    status          TEXT NOT NULL,
    scanned         INTEGER NOT NULL,
    requeued        INTEGER NOT NULL,
    last_at         TIMESTAMPTZ,
    last_id         TEXT NOT NULL,
    error           TEXT NOT NULL,
    created_by      TEXT NOT NULL,
    correlation_id  TEXT NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL,
    completed_at    TIMESTAMPTZ
);
CREATE INDEX webhook_recoveries_config ON webhook_recoveries (config_id, id);

-- The recovery's walk: a webhook's messages by the time of their event.
CREATE INDEX webhook_deliveries_config_created ON webhook_deliveries (config_id, created_at, id) WHERE redelivery = 0;

-- +goose Down
DROP INDEX webhook_deliveries_config_created;
DROP TABLE webhook_recoveries;
ALTER TABLE webhook_deliveries DROP COLUMN throttled;
ALTER TABLE webhook_configs DROP COLUMN rate_limit;
