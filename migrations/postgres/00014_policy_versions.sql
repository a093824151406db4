-- +goose Up
-- Every published policy of an app, numbered from 1; policies holds the one in force. The
-- policy in force when this migration runs becomes its app's first recorded version.
CREATE TABLE policy_versions (
    org_id        TEXT NOT NULL REFERENCES organizations (id),
    app           TEXT NOT NULL,
    version       INTEGER NOT NULL,
    document      TEXT NOT NULL,
    -- The credential that wrote the rules and the person behind it ('' when none).
    author        TEXT NOT NULL,
    author_person TEXT NOT NULL DEFAULT '',
    -- The draft it was published from (NULL for a PUT), the people who approved it (JSON
    -- list of {by, at}) and the version it restores, for a rollback.
    draft_id      TEXT,
    approvals     TEXT NOT NULL DEFAULT '[]',
    restores      INTEGER,
    published_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (org_id, app, version)
);
INSERT INTO policy_versions (org_id, app, version, document, author, published_at)
SELECT org_id, app, version, document, updated_by, updated_at FROM policies;

-- A proposed policy: edited freely, in force only once published.
CREATE TABLE policy_drafts (
    id            TEXT PRIMARY KEY,
    org_id        TEXT NOT NULL REFERENCES organizations (id),
    app           TEXT NOT NULL,
    document      TEXT NOT NULL,
    -- The version in force when the draft was started: its diff is against it.
    base_version  INTEGER NOT NULL,
    restores      INTEGER,
    author        TEXT NOT NULL,
    author_person TEXT NOT NULL DEFAULT '',
    status        TEXT NOT NULL CHECK (status IN ('open', 'published', 'discarded')),
    approvals     TEXT NOT NULL DEFAULT '[]',
    published_version INTEGER,
    created_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL
);
CREATE INDEX policy_drafts_app ON policy_drafts (org_id, app, id);

-- The policy version an order was evaluated under, fixed at submit; whether the policy let
-- it through; and the asset and destination its volume windows count it under.
ALTER TABLE orders ADD COLUMN policy_version INTEGER;
ALTER TABLE orders ADD COLUMN policy_allowed BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE orders ADD COLUMN policy_asset TEXT NOT NULL DEFAULT '';
ALTER TABLE orders ADD COLUMN policy_destination TEXT NOT NULL DEFAULT '';
UPDATE orders SET policy_allowed = TRUE WHERE policy_decision IS NOT NULL AND status <> 'rejected';
-- The keys of the orders evaluated before, as the evaluation writes them (asset upper-case,
-- a trade's the one it sells; a payment's destination lower-case), so that a window counts
-- them from the start.
UPDATE orders SET
    policy_asset = UPPER(COALESCE(details::jsonb->>'asset', details::jsonb->>'sellAsset', '')),
    policy_destination = CASE WHEN domain = 'payment' THEN LOWER(COALESCE(details::jsonb->'destination'->>'address', '')) ELSE '' END
WHERE policy_decision IS NOT NULL;
CREATE INDEX orders_policy_window ON orders (org_id, submitted_at);

-- One row per organisation, updated by every policy evaluation before it counts volume:
-- evaluations of one organisation run one at a time, so two orders at a window's edge
-- cannot both pass.
CREATE TABLE policy_window_guards (
    org_id     TEXT PRIMARY KEY,
    touched_at TIMESTAMPTZ NOT NULL
);

-- A dry run of a draft against the organisation's history: the orders of the app submitted
-- in [since, until] evaluated as if the draft had been in force. A background workflow
-- advances it page by page from last_order_id, so that it resumes
-- where it stopped; report is the running tally (JSON).
CREATE TABLE policy_dry_runs (
    id          TEXT PRIMARY KEY,
    org_id      TEXT NOT NULL REFERENCES organizations (id),
    app         TEXT NOT NULL,
    draft_id    TEXT NOT NULL,
    -- The draft's rules when the run started: an edit of the draft does not change it.
    document    TEXT NOT NULL,
    days        INTEGER NOT NULL,
    examples    INTEGER NOT NULL,
    since       TIMESTAMPTZ NOT NULL,
    until       TIMESTAMPTZ NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
    last_order_id TEXT NOT NULL DEFAULT '',
    evaluated   INTEGER NOT NULL DEFAULT 0,
    total       INTEGER NOT NULL,
    report      TEXT NOT NULL,
    error       TEXT NOT NULL DEFAULT '',
    created_by  TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL,
    completed_at TIMESTAMPTZ
);
CREATE INDEX policy_dry_runs_app ON policy_dry_runs (org_id, app, id);

-- +goose Down
DROP TABLE policy_dry_runs;
DROP TABLE policy_window_guards;
DROP INDEX orders_policy_window;
ALTER TABLE orders DROP COLUMN policy_destination;
ALTER TABLE orders DROP COLUMN policy_asset;
ALTER TABLE orders DROP COLUMN policy_allowed;
ALTER TABLE orders DROP COLUMN policy_version;
DROP TABLE policy_drafts;
DROP TABLE policy_versions;
