-- +goose Up
-- An order's details name their domain, so that they are read back as its type.
UPDATE orders SET details = '{"domain":"' || domain || '",' || substr(details, 2)
WHERE details NOT LIKE '{"domain":%';

-- +goose Down
UPDATE orders SET details = '{' || substr(details, length('{"domain":"' || domain || '",') + 1)
WHERE details LIKE '{"domain":%';
