-- +goose Up
-- A wallet's pending signing requests, oldest first, read from the index alone: with
-- (wallet_id, status) only, once the planner's statistics had seen a wallet whose requests
-- were nearly all signed, it judged the index no narrower than the table and read every
-- signing request in id order to find the pending few (a signer's every pass grew with the
-- wallet's history). With id in it, the index both narrows and orders.
DROP INDEX signing_requests_wallet;
CREATE INDEX signing_requests_wallet ON signing_requests (wallet_id, status, id);

-- +goose Down
DROP INDEX signing_requests_wallet;
CREATE INDEX signing_requests_wallet ON signing_requests (wallet_id, status);
