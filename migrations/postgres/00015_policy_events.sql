-- +goose Up
-- Events about an app rather than an order (Policy.Published) have no order.
ALTER TABLE events ALTER COLUMN order_id DROP NOT NULL;

-- +goose Down
DELETE FROM events WHERE order_id IS NULL;
ALTER TABLE events ALTER COLUMN order_id SET NOT NULL;
