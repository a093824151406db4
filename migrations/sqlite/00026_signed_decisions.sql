-- +goose Up
-- A decision signed by its approver keeps the key and the signature (SPEC 3.3): a signer
-- checks them against the item's statement without trusting the service.
ALTER TABLE approval_decisions ADD COLUMN key_id TEXT NOT NULL DEFAULT '';
ALTER TABLE approval_decisions ADD COLUMN signature TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE approval_decisions DROP COLUMN signature;
ALTER TABLE approval_decisions DROP COLUMN key_id;
