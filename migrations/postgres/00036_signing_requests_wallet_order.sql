-- +goose Up
-- A wallet's pending signing requests, oldest first, read from the index alone, as on
-- SQLite (where the index without id let the planner read the whole table): the index
-- both narrows and orders.
DROP INDEX signing_requests_wallet;
CREATE INDEX signing_requests_wallet ON signing_requests (wallet_id, status, id);

-- +goose Down
DROP INDEX signing_requests_wallet;
CREATE INDEX signing_requests_wallet ON signing_requests (wallet_id, status);
