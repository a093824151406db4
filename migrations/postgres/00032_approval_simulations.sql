-- +goose Up
-- An approval item carries what the chain's node said the order's legs would move when the
-- item was made (chain.Simulation, JSON), beside the statement; '' where the chain cannot
-- simulate, and for items made before.
ALTER TABLE approval_items ADD COLUMN simulation TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE approval_items DROP COLUMN simulation;
