-- +goose Up
-- A payout schedule: a payment body that a Temporal Schedule of the same id turns into one
-- order per run. every (an ISO 8601 duration) or cron says when; paused stops the runs;
-- wallet_id is the payment's wallet (a wallet-restricted key reaches the schedules of its
-- wallets only); a deleted schedule keeps its row, so that its runs and orders keep naming it.
CREATE TABLE payout_schedules (
    id              TEXT PRIMARY KEY,
    org_id          TEXT NOT NULL REFERENCES organizations (id),
    app             TEXT NOT NULL,
    wallet_id       TEXT NOT NULL,
    payment         TEXT NOT NULL,
    every           TEXT NOT NULL DEFAULT '',
    cron            TEXT NOT NULL DEFAULT '',
    timezone        TEXT NOT NULL DEFAULT '',
    start_at        DATETIME,
    end_at          DATETIME,
    paused          BOOLEAN NOT NULL DEFAULT FALSE,
    actor_kind      TEXT NOT NULL,
    created_by      TEXT NOT NULL,
    created_by_user TEXT NOT NULL DEFAULT '',
    created_at      DATETIME NOT NULL,
    updated_at      DATETIME NOT NULL,
    deleted_at      DATETIME
);
-- The list of an app's schedules, newest first by id.
CREATE INDEX payout_schedules_by_app ON payout_schedules (org_id, app, id);

-- One row per run of a schedule, keyed by the run's nominal time (RFC 3339, UTC): the
-- order it made (its id fixed before the order is, so that a repeated run finds it), or
-- why it made none.
CREATE TABLE payout_runs (
    schedule_id  TEXT NOT NULL REFERENCES payout_schedules (id),
    nominal_time TEXT NOT NULL,
    order_id     TEXT NOT NULL,
    error        TEXT NOT NULL DEFAULT '',
    created_at   DATETIME NOT NULL,
    updated_at   DATETIME NOT NULL,
    PRIMARY KEY (schedule_id, nominal_time)
);

-- The schedule whose run made the order; '' for an order made by a request.
ALTER TABLE orders ADD COLUMN schedule_id TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE orders DROP COLUMN schedule_id;
DROP TABLE payout_runs;
DROP TABLE payout_schedules;
