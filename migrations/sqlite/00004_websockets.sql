-- +goose Up
-- WebSocket configs (SPEC 4, 6): which events of an app a live connection receives.
-- events is the comma-separated list of subscription entries, stored lowercase.
CREATE TABLE websocket_configs (
    id          TEXT PRIMARY KEY,
    org_id      TEXT NOT NULL REFERENCES organizations (id),
    app         TEXT NOT NULL,
    events      TEXT NOT NULL,
    enabled     BOOLEAN NOT NULL,
    created_at  DATETIME NOT NULL,
    deleted_at  DATETIME
);
CREATE INDEX websocket_configs_org_app ON websocket_configs (org_id, app, id);

-- The delivery log: events that reached at least one live connection of a config. Every
-- API replica writes here, so each config shows one log whichever replica answers; the
-- newest five per config are kept.
CREATE TABLE websocket_deliveries (
    config_id  TEXT NOT NULL REFERENCES websocket_configs (id) ON DELETE CASCADE,
    event_id   TEXT NOT NULL,
    event      TEXT NOT NULL,
    sent_at    DATETIME NOT NULL,
    PRIMARY KEY (config_id, event_id)
);
CREATE INDEX websocket_deliveries_recent ON websocket_deliveries (config_id, sent_at);

-- Live connections per config and API replica, refreshed by each replica while it runs,
-- so that liveConnections counts every replica's clients.
CREATE TABLE websocket_presence (
    replica_id   TEXT NOT NULL,
    config_id    TEXT NOT NULL,
    connections  INTEGER NOT NULL,
    updated_at   DATETIME NOT NULL,
    PRIMARY KEY (replica_id, config_id)
);

-- A replica whose bus connection dropped re-reads the events committed meanwhile by time.
CREATE INDEX events_occurred_at ON events (occurred_at);

-- +goose Down
DROP INDEX events_occurred_at;
DROP TABLE websocket_presence;
DROP TABLE websocket_deliveries;
DROP TABLE websocket_configs;
