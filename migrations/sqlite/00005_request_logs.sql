-- +goose Up
-- Recent API requests per app, for /developer/logs: no bodies, no query strings, no
-- tokens. Kept for seven days.
CREATE TABLE request_logs (
    id              TEXT PRIMARY KEY,
    org_id          TEXT NOT NULL,
    app             TEXT NOT NULL,
    method          TEXT NOT NULL,
    path            TEXT NOT NULL,
    status          INTEGER NOT NULL,
    latency_ms      DOUBLE PRECISION NOT NULL,
    key_id          TEXT NOT NULL,
    correlation_id  TEXT NOT NULL,
    at              DATETIME NOT NULL
);
CREATE INDEX request_logs_org_app ON request_logs (org_id, app, id);
CREATE INDEX request_logs_at ON request_logs (at);

-- +goose Down
DROP TABLE request_logs;
