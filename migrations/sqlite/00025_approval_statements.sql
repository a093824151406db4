-- +goose Up
-- An approval item carries the statement of what is approved (SPEC 3.5a), canonical JSON,
-- written when the item is created; items created before have none.
ALTER TABLE approval_items ADD COLUMN statement TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE approval_items DROP COLUMN statement;
