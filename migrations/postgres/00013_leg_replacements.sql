-- +goose Up
-- Every transaction broadcast for a leg, oldest first (JSON array of hashes): a leg stuck
-- below the fee market is replaced at the same nonce, and the order follows whichever of
-- them confirms.
ALTER TABLE order_legs ADD COLUMN tx_hashes TEXT NOT NULL DEFAULT '';
-- A leg has one signing request per attempt: its transaction (0), then each replacement
-- of it (1, 2, …), which names the stuck transaction it replaces.
ALTER TABLE signing_requests ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0;
ALTER TABLE signing_requests ADD COLUMN replaces_tx_hash TEXT;
ALTER TABLE signing_requests DROP CONSTRAINT signing_requests_order_id_position_key;
ALTER TABLE signing_requests ADD CONSTRAINT signing_requests_order_id_position_attempt_key UNIQUE (order_id, position, attempt);

-- +goose Down
DELETE FROM signing_requests WHERE attempt > 0;
ALTER TABLE signing_requests DROP CONSTRAINT signing_requests_order_id_position_attempt_key;
ALTER TABLE signing_requests ADD CONSTRAINT signing_requests_order_id_position_key UNIQUE (order_id, position);
ALTER TABLE signing_requests DROP COLUMN replaces_tx_hash;
ALTER TABLE signing_requests DROP COLUMN attempt;
ALTER TABLE order_legs DROP COLUMN tx_hashes;
