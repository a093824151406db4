-- +goose Up
-- The hourly maintenance deletes webhook deliveries a while after they completed
-- (WEBHOOK_RETENTION), oldest first, a batch at a time: this index finds each batch
-- without reading the rest of the table. Pending deliveries have no completed_at and are
-- left out of it. Every other table maintenance keeps bounded has its index already.
CREATE INDEX webhook_deliveries_completed ON webhook_deliveries (completed_at) WHERE completed_at IS NOT NULL;

-- +goose Down
DROP INDEX webhook_deliveries_completed;
