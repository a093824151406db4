-- +goose Up
-- A verification of an organisation's audit chain, run in the background a page at a time:
-- the head it must reach (read when it started), how far it got (the last entry checked and
-- its hash, from where the next page goes on), and what it found.
CREATE TABLE audit_verifications (
    id              TEXT PRIMARY KEY,
    org_id          TEXT NOT NULL REFERENCES organizations (id),
    status          TEXT NOT NULL CHECK (status IN ('running', 'intact', 'broken', 'failed')),
    head_seq        BIGINT NOT NULL,
    head_hash       TEXT NOT NULL,
    checked_seq     BIGINT NOT NULL DEFAULT 0,
    checked_hash    TEXT NOT NULL DEFAULT '',
    entries         BIGINT NOT NULL DEFAULT 0,
    broken          TEXT NOT NULL DEFAULT '',
    error           TEXT NOT NULL DEFAULT '',
    created_by      TEXT NOT NULL,
    created_by_user TEXT NOT NULL DEFAULT '',
    created_at      DATETIME NOT NULL,
    updated_at      DATETIME NOT NULL,
    completed_at    DATETIME
);

-- +goose Down
DROP TABLE audit_verifications;
