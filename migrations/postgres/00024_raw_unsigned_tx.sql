-- +goose Up
-- A signing request carries its transaction's unsigned bytes (hex), which a signer decodes
-- itself instead of trusting the readable fields; and a signer may refuse it.
ALTER TABLE signing_requests ADD COLUMN raw_unsigned_tx TEXT NOT NULL DEFAULT '';
ALTER TABLE signing_requests DROP CONSTRAINT signing_requests_status_check;
ALTER TABLE signing_requests ADD CONSTRAINT signing_requests_status_check
    CHECK (status IN ('pending', 'signed', 'expired', 'refused'));

-- +goose Down
UPDATE signing_requests SET status = 'expired' WHERE status = 'refused';
ALTER TABLE signing_requests DROP CONSTRAINT signing_requests_status_check;
ALTER TABLE signing_requests ADD CONSTRAINT signing_requests_status_check
    CHECK (status IN ('pending', 'signed', 'expired'));
ALTER TABLE signing_requests DROP COLUMN raw_unsigned_tx;
