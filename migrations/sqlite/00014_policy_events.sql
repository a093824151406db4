-- +goose Up
-- Events about an app rather than an order (Policy.Published) have no order. SQLite cannot
-- change a column's constraints in place, so the table is rebuilt.
CREATE TABLE events_next (
    id              TEXT PRIMARY KEY,
    org_id          TEXT NOT NULL,
    app             TEXT NOT NULL,
    domain          TEXT NOT NULL,
    order_id        TEXT REFERENCES orders (id),
    sequence        INTEGER NOT NULL,
    event           TEXT NOT NULL,
    leg             TEXT NOT NULL DEFAULT '',
    step            TEXT NOT NULL,
    data            TEXT NOT NULL,
    correlation_id  TEXT NOT NULL,
    occurred_at     DATETIME NOT NULL,
    wallet_id       TEXT NOT NULL DEFAULT '',
    UNIQUE (order_id, sequence),
    UNIQUE (order_id, step)
);
INSERT INTO events_next (id, org_id, app, domain, order_id, sequence, event, leg, step, data, correlation_id, occurred_at, wallet_id)
SELECT id, org_id, app, domain, order_id, sequence, event, leg, step, data, correlation_id, occurred_at, wallet_id FROM events;
DROP TABLE events;
ALTER TABLE events_next RENAME TO events;
CREATE INDEX events_org_app ON events (org_id, app, id);
CREATE INDEX events_occurred_at ON events (occurred_at);

-- +goose Down
CREATE TABLE events_prev (
    id              TEXT PRIMARY KEY,
    org_id          TEXT NOT NULL,
    app             TEXT NOT NULL,
    domain          TEXT NOT NULL,
    order_id        TEXT NOT NULL REFERENCES orders (id),
    sequence        INTEGER NOT NULL,
    event           TEXT NOT NULL,
    leg             TEXT NOT NULL DEFAULT '',
    step            TEXT NOT NULL,
    data            TEXT NOT NULL,
    correlation_id  TEXT NOT NULL,
    occurred_at     DATETIME NOT NULL,
    wallet_id       TEXT NOT NULL DEFAULT '',
    UNIQUE (order_id, sequence),
    UNIQUE (order_id, step)
);
INSERT INTO events_prev SELECT id, org_id, app, domain, order_id, sequence, event, leg, step, data, correlation_id, occurred_at, wallet_id
FROM events WHERE order_id IS NOT NULL;
DROP TABLE events;
ALTER TABLE events_prev RENAME TO events;
CREATE INDEX events_org_app ON events (org_id, app, id);
CREATE INDEX events_occurred_at ON events (occurred_at);
