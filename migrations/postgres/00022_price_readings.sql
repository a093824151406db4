-- +goose Up
-- A price is a reading of its source (a feed's round, or the operator's fixed price): where
-- it came from, the feed's round, when the worker read it, and when it stops valuing
-- orders (twice the feed's heartbeat after updated_at; never, for a fixed price or a row
-- written before sources existed).
ALTER TABLE prices ADD COLUMN source TEXT NOT NULL DEFAULT '';
ALTER TABLE prices ADD COLUMN round TEXT NOT NULL DEFAULT '';
ALTER TABLE prices ADD COLUMN read_at TIMESTAMPTZ;
ALTER TABLE prices ADD COLUMN stale_after TIMESTAMPTZ;

-- +goose Down
ALTER TABLE prices DROP COLUMN stale_after;
ALTER TABLE prices DROP COLUMN read_at;
ALTER TABLE prices DROP COLUMN round;
ALTER TABLE prices DROP COLUMN source;
