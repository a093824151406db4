-- +goose Up
-- When the transaction that wrote each event began (now() is the transaction's start).
-- GET /events pages the whole stream in this order and stops short of the oldest
-- transaction still open, so that an event committed late is never passed over by a
-- reader who has already read past its id (ids are minted before commit, by several
-- processes). Rows from before this migration share its time and keep their id order.
ALTER TABLE events ADD COLUMN tx_started_at TIMESTAMPTZ NOT NULL DEFAULT now();
CREATE INDEX events_org_app_commit ON events (org_id, app, tx_started_at, id);

-- +goose Down
DROP INDEX events_org_app_commit;
ALTER TABLE events DROP COLUMN tx_started_at;
