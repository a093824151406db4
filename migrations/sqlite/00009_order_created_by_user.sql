-- +goose Up
-- An order's created_by is the credential that created it (key_…, oac_…, or usr_… for a
-- signed-in person), the same value on the order, its events and webhooks; the person
-- behind that credential, whom maker-checker compares, is kept beside it. Orders written
-- before this migration kept only the person where there was one: that value is known to
-- be a person, and stays in both columns.
ALTER TABLE orders ADD COLUMN created_by_user TEXT NOT NULL DEFAULT '';
UPDATE orders SET created_by_user = created_by WHERE substr(created_by, 1, 4) = 'usr_';

-- +goose Down
ALTER TABLE orders DROP COLUMN created_by_user;
