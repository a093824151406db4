-- +goose Up
-- The wallet of each event's order, beside the app and organisation that route it: a live
-- connection opened with a key restricted to some wallets receives only their events, and
-- a signing device's connection the signing requests of the wallets it signs for.
ALTER TABLE events ADD COLUMN wallet_id TEXT NOT NULL DEFAULT '';
UPDATE events SET wallet_id = (SELECT orders.wallet_id FROM orders WHERE orders.id = events.order_id);

-- +goose Down
ALTER TABLE events DROP COLUMN wallet_id;
