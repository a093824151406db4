-- +goose Up
-- A signing request carries the evidence a signer checks (SPEC 3.5a): the order's intent
-- (its statement) and the approvals decided on it, as the request was created.
ALTER TABLE signing_requests ADD COLUMN intent TEXT NOT NULL DEFAULT '';
ALTER TABLE signing_requests ADD COLUMN approvals TEXT NOT NULL DEFAULT '[]';

-- +goose Down
ALTER TABLE signing_requests DROP COLUMN approvals;
ALTER TABLE signing_requests DROP COLUMN intent;
