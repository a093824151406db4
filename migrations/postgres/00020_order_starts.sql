-- +goose Up
-- A submitted order whose workflow is still to be started. The submit writes it in the
-- transaction that marks the order submitted, so that an accepted submission is never lost
-- when Temporal is slow or unreachable: the submit tries the start at once, the workflow's
-- first step deletes the row, and a worker starts what is left once it is due, retrying
-- until Temporal takes it.
CREATE TABLE order_starts (
    order_id       TEXT PRIMARY KEY REFERENCES orders (id),
    submission_id  TEXT NOT NULL DEFAULT '',
    correlation_id TEXT NOT NULL,
    due_at         TIMESTAMPTZ NOT NULL,
    attempts       INTEGER NOT NULL DEFAULT 0,
    last_error     TEXT NOT NULL DEFAULT ''
);
CREATE INDEX order_starts_due ON order_starts (due_at);

-- The submission (from its Idempotency-Key) that moved the order out of draft: a retry of
-- it is told its outcome, any other submit 409, without asking Temporal.
ALTER TABLE orders ADD COLUMN submission_id TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE orders DROP COLUMN submission_id;
DROP TABLE order_starts;
