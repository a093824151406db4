-- +goose Up
-- Each organisation's audit records form one hash chain (package auditchain): seq counts
-- them from 1 without gaps, and each record carries its hash and the hash of the record
-- before it. The store places a record in its chain as it is written (store.AppendAudit);
-- the records written before the chain existed are placed once, after the migrations
-- (Store.Migrate), in (created_at, id) order. Until placed, a record's columns are NULL.
ALTER TABLE audit_logs ADD COLUMN seq INTEGER;
ALTER TABLE audit_logs ADD COLUMN prev_hash TEXT;
ALTER TABLE audit_logs ADD COLUMN hash TEXT;
CREATE UNIQUE INDEX audit_logs_org_seq ON audit_logs (org_id, seq);
-- An export's time window is found by the first record written at or after each end.
CREATE INDEX audit_logs_org_created ON audit_logs (org_id, created_at, seq);
-- The records still to chain; empty once they are.
CREATE INDEX audit_logs_unchained ON audit_logs (org_id) WHERE seq IS NULL;

-- The head of each organisation's chain: its last seq and hash, moved on by whoever
-- holds the organisation's chain lock (store.AppendAudit).
CREATE TABLE audit_chain_heads (
    org_id  TEXT PRIMARY KEY,
    seq     INTEGER NOT NULL,
    hash    TEXT NOT NULL
);

-- +goose Down
DROP TABLE audit_chain_heads;
DROP INDEX audit_logs_unchained;
DROP INDEX audit_logs_org_created;
DROP INDEX audit_logs_org_seq;
ALTER TABLE audit_logs DROP COLUMN hash;
ALTER TABLE audit_logs DROP COLUMN prev_hash;
ALTER TABLE audit_logs DROP COLUMN seq;
