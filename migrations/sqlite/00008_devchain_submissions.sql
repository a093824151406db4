-- +goose Up
-- How many times the simulated chain was handed each transaction: a retried broadcast
-- of the same signed transaction lands on the same row, and the fault tests read this
-- count to tell a retry from a second transaction.
ALTER TABLE devchain_transactions ADD COLUMN submissions INTEGER NOT NULL DEFAULT 1;

-- +goose Down
ALTER TABLE devchain_transactions DROP COLUMN submissions;
