package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/policy"
	"github.com/opentreasury/treasury/migrations"
)

// PolicyVersion is one published policy of an app.
type PolicyVersion struct {
	OrgID   string `gorm:"primaryKey"`
	App     string `gorm:"primaryKey"`
	Version int    `gorm:"primaryKey"`
	// Document is the rules as published.
	Document string
	// Author is the credential that wrote the rules, AuthorPerson the person behind it.
	Author       string
	AuthorPerson string
	// DraftID is the draft it was published from; nil for a PUT.
	DraftID *string
	// Approvals is the JSON list of the people's approvals that published it.
	Approvals string
	// Restores is the earlier version a rollback published again.
	Restores    *int
	PublishedAt time.Time
}

func (PolicyVersion) TableName() string { return "policy_versions" }

// Policy draft statuses.
const (
	DraftOpen      = "open"
	DraftPublished = "published"
	DraftDiscarded = "discarded"
)

// PolicyDraft is a proposed policy of an app: it has no effect until published.
type PolicyDraft struct {
	ID       string
	OrgID    string
	App      string
	Document string
	// BaseVersion is the version in force when the draft was started.
	BaseVersion int
	// Restores is the version a rollback draft publishes again.
	Restores *int
	// Author is who saved it last (the credential, AuthorPerson the person behind it);
	// Creator who started it.
	Author       string
	AuthorPerson string
	Creator      `gorm:"embedded"`
	Status       string
	// Approvals is the JSON list of approvals ({by, at}) given so far.
	Approvals        string
	PublishedVersion *int
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

func (PolicyDraft) TableName() string { return "policy_drafts" }

// PublishPolicy puts rules in force as the app's next version, recorded in its history:
// p carries the document, who and when; v the rest of the version's record. It sets the
// version number on both, in one transaction so that concurrent publishers each get their
// own number.
func (s *Store) PublishPolicy(ctx context.Context, p *Policy, v *PolicyVersion) error {
	p.Version = 1
	p.UpdatedAt = p.UpdatedAt.UTC()
	return s.Tx(ctx, func(tx *Store) error {
		err := tx.with(ctx).Clauses(clause.OnConflict{
			Columns: []clause.Column{{Name: "org_id"}, {Name: "app"}},
			DoUpdates: clause.Assignments(map[string]any{
				"document": p.Document, "updated_by": p.UpdatedBy, "updated_at": p.UpdatedAt,
				"version": gorm.Expr("policies.version + 1"),
			}),
		}).Create(p).Error
		if err != nil {
			return err
		}
		var cur Policy
		if err := tx.with(ctx).Select("version").Where("org_id = ? AND app = ?", p.OrgID, p.App).Take(&cur).Error; err != nil {
			return err
		}
		p.Version = cur.Version
		v.OrgID, v.App, v.Version, v.Document, v.Author, v.PublishedAt = p.OrgID, p.App, p.Version, p.Document, p.UpdatedBy, p.UpdatedAt
		if v.Approvals == "" {
			v.Approvals = "[]"
		}
		return tx.with(ctx).Create(v).Error
	})
}

// LockPolicy holds an app's policy in force for the rest of the transaction, so that what
// the transaction reads of it (its version, its changeApprovals) still holds when it
// publishes: publishers of one app take turns. An app without a policy gets a version-0
// row with no rules, which reads as no policy, so that there is a row to hold.
func (s *Store) LockPolicy(ctx context.Context, orgID, app string, at time.Time) error {
	err := s.with(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&Policy{OrgID: orgID, App: app, Document: "{}",
		UpdatedAt: at.UTC()}).Error
	if err != nil {
		return err
	}
	var p Policy
	return s.forUpdate(ctx).Select("version").Where("org_id = ? AND app = ?", orgID, app).Take(&p).Error
}

// PolicyVersions lists an app's published versions, newest first, below a version number
// (0: from the newest).
func (s *Store) PolicyVersions(ctx context.Context, orgID, app string, below, limit int) ([]PolicyVersion, error) {
	q := s.with(ctx).Where("org_id = ? AND app = ?", orgID, app)
	if below > 0 {
		q = q.Where("version < ?", below)
	}
	var out []PolicyVersion
	err := q.Order("version DESC").Limit(limit).Find(&out).Error
	return out, err
}

// PolicyVersionOf returns one published version of an app's policy.
func (s *Store) PolicyVersionOf(ctx context.Context, orgID, app string, version int) (*PolicyVersion, error) {
	var v PolicyVersion
	if err := s.with(ctx).Where("org_id = ? AND app = ? AND version = ?", orgID, app, version).Take(&v).Error; err != nil {
		return nil, notFound(err)
	}
	return &v, nil
}

// CreatePolicyDraft stores a new draft.
func (s *Store) CreatePolicyDraft(ctx context.Context, d *PolicyDraft) error {
	d.CreatedAt, d.UpdatedAt = d.CreatedAt.UTC(), d.UpdatedAt.UTC()
	if d.Approvals == "" {
		d.Approvals = "[]"
	}
	return s.with(ctx).Create(d).Error
}

// PolicyDraftOf returns one draft of an organisation's app.
func (s *Store) PolicyDraftOf(ctx context.Context, orgID, app, id string) (*PolicyDraft, error) {
	var d PolicyDraft
	if err := s.with(ctx).Where("org_id = ? AND app = ? AND id = ?", orgID, app, id).Take(&d).Error; err != nil {
		return nil, notFound(err)
	}
	return &d, nil
}

// LockPolicyDraft reads a draft and locks it for the rest of the transaction: its edits
// and approvals are decided one at a time.
func (s *Store) LockPolicyDraft(ctx context.Context, orgID, app, id string) (*PolicyDraft, error) {
	var d PolicyDraft
	if err := s.forUpdate(ctx).Where("org_id = ? AND app = ? AND id = ?", orgID, app, id).Take(&d).Error; err != nil {
		return nil, notFound(err)
	}
	return &d, nil
}

// SavePolicyDraft writes a draft back.
func (s *Store) SavePolicyDraft(ctx context.Context, d *PolicyDraft) error {
	d.UpdatedAt = d.UpdatedAt.UTC()
	return s.with(ctx).Save(d).Error
}

// ListPolicyDrafts lists an app's drafts, newest first, after a cursor id; status narrows
// them when not empty.
func (s *Store) ListPolicyDrafts(ctx context.Context, orgID, app, status, beforeID string, limit int) ([]PolicyDraft, error) {
	q := s.with(ctx).Where("org_id = ? AND app = ?", orgID, app)
	if status != "" {
		q = q.Where("status = ?", status)
	}
	return page[PolicyDraft](q, beforeID, newestFirst, limit)
}

// GuardPolicyWindows makes the organisation's policy evaluations in transactions take
// turns from here to commit: each counts volume only after the ones before it committed,
// so two orders at a window's edge cannot both pass. It must come after the order's own
// lock (ApplyOrderStep takes it first), so that no two transactions wait on each other.
func (s *Store) GuardPolicyWindows(ctx context.Context, orgID string, at time.Time) error {
	return s.with(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "org_id"}},
		DoUpdates: clause.AssignmentColumns([]string{"touched_at"}),
	}).Create(&policyWindowGuard{OrgID: orgID, TouchedAt: at.UTC()}).Error
}

type policyWindowGuard struct {
	OrgID     string `gorm:"primaryKey"`
	TouchedAt time.Time
}

func (policyWindowGuard) TableName() string { return "policy_window_guards" }

// VolumeQuery selects the orders a policy limit counts: the organisation's orders the
// policy let through since a time, that were not rejected and have not failed, narrowed by
// whichever of the keys are set.
type VolumeQuery struct {
	OrgID       string
	App         string
	WalletID    string
	Asset       string
	Destination string
	Since       time.Time
	// Until, when set, leaves out orders submitted after it: the volume as it stood then.
	Until          time.Time
	ExcludeOrderID string
}

// PolicyVolume sums the USD value of the orders q selects.
func (s *Store) PolicyVolume(ctx context.Context, q VolumeQuery) (decimal.Decimal, error) {
	db := s.with(ctx).Model(&Order{}).
		Where("org_id = ? AND submitted_at >= ? AND policy_allowed = ? AND status NOT IN ?", q.OrgID, q.Since.UTC(), true,
			[]orders.Status{orders.StatusRejected, orders.StatusFailed})
	for column, value := range map[string]string{"app": q.App, "wallet_id": q.WalletID, "policy_asset": q.Asset,
		"policy_destination": q.Destination} {
		if value != "" {
			db = db.Where(column+" = ?", value)
		}
	}
	if q.ExcludeOrderID != "" {
		db = db.Where("id <> ?", q.ExcludeOrderID)
	}
	if !q.Until.IsZero() {
		db = db.Where("submitted_at <= ?", q.Until.UTC())
	}
	total := decimal.Zero
	if s.dialect == migrations.Postgres {
		// NUMERIC sums exactly, in the database.
		err := db.Select("COALESCE(SUM(amount_usd), 0)").Row().Scan(&total)
		return total, err
	}
	// SQLite keeps amounts as text and would sum them as floats: they are summed here.
	var amounts []decimal.Decimal
	err := db.Pluck("amount_usd", &amounts).Error
	for _, a := range amounts {
		total = total.Add(a)
	}
	return total, err
}

// PolicyRules reads an app's rules: those of version when it is given, else those in force
// (an app without a policy has version 0 and no rules). It returns the version read.
func (s *Store) PolicyRules(ctx context.Context, orgID, app string, version *int) (policy.Rules, int, error) {
	doc, n := "", 0
	switch {
	case version != nil && *version == 0:
	case version != nil:
		v, err := s.PolicyVersionOf(ctx, orgID, app, *version)
		if err != nil {
			return policy.Rules{}, 0, err
		}
		doc, n = v.Document, v.Version
	default:
		p, err := s.Policy(ctx, orgID, app)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return policy.Rules{}, 0, err
		}
		if p != nil {
			doc, n = p.Document, p.Version
		}
	}
	if doc == "" {
		return policy.Rules{}, n, nil
	}
	rules, err := policy.Parse([]byte(doc))
	return rules, n, err
}

// PolicyUsage counts, for each volume limit of rules that applies to o, the volume of the
// organisation's orders that share its key: the wallet's of the UTC day of now for
// dailyVolumeUsd (counted whether or not the rule is set, for the dry run's answer), the
// key's of the last hours of each window. excludeOrderID leaves out the order evaluated.
// With past set, now is a past instant and only orders submitted by then count.
func (s *Store) PolicyUsage(ctx context.Context, orgID string, rules policy.Rules, o policy.Order, now time.Time, past bool, excludeOrderID string) (policy.Usage, error) {
	var u policy.Usage
	now = now.UTC()
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	var err error
	var until time.Time
	if past {
		until = now
	}
	if u.DailyVolumeUSD, err = s.PolicyVolume(ctx, VolumeQuery{OrgID: orgID, WalletID: o.WalletID, Since: day, Until: until, ExcludeOrderID: excludeOrderID}); err != nil {
		return u, err
	}
	u.Windows = make([]decimal.Decimal, len(rules.Windows))
	for i, w := range rules.Windows {
		key, ok := policy.WindowKey(w, o)
		if !ok {
			continue
		}
		q := VolumeQuery{OrgID: orgID, Since: now.Add(-time.Duration(w.Hours) * time.Hour), Until: until, ExcludeOrderID: excludeOrderID}
		switch w.Scope {
		case policy.ScopeWallet:
			q.WalletID = key
		case policy.ScopeApp:
			q.App = key
		case policy.ScopeAsset:
			q.Asset = key
		case policy.ScopeDestination:
			q.Destination = key
		}
		if u.Windows[i], err = s.PolicyVolume(ctx, q); err != nil {
			return u, err
		}
	}
	return u, nil
}

// Policy dry run statuses.
const (
	DryRunRunning   = "running"
	DryRunCompleted = "completed"
	DryRunFailed    = "failed"
)

// PolicyDryRun is a draft evaluated against an app's past orders, advanced page by page.
type PolicyDryRun struct {
	ID      string
	OrgID   string
	App     string
	DraftID string
	// Document is the draft's rules when the run started.
	Document string
	Days     int
	Examples int
	Since    time.Time
	Until    time.Time
	Status   string
	// LastOrderID is the last order evaluated; the next page starts after it.
	LastOrderID string
	Evaluated   int
	Total       int
	// Report is the running policy.HistoryReport, as JSON.
	Report      string
	Error       string
	Creator     `gorm:"embedded"`
	CreatedAt   time.Time
	UpdatedAt   time.Time
	CompletedAt *time.Time
}

func (PolicyDryRun) TableName() string { return "policy_dry_runs" }

// CreatePolicyDryRun stores a new dry run.
func (s *Store) CreatePolicyDryRun(ctx context.Context, d *PolicyDryRun) error {
	d.Since, d.Until, d.CreatedAt, d.UpdatedAt = d.Since.UTC(), d.Until.UTC(), d.CreatedAt.UTC(), d.UpdatedAt.UTC()
	return s.with(ctx).Create(d).Error
}

// PolicyDryRunOf returns one dry run; orgID "" finds it in any organisation (the worker).
func (s *Store) PolicyDryRunOf(ctx context.Context, orgID, id string) (*PolicyDryRun, error) {
	q := s.with(ctx).Where("id = ?", id)
	if orgID != "" {
		q = q.Where("org_id = ?", orgID)
	}
	var d PolicyDryRun
	if err := q.Take(&d).Error; err != nil {
		return nil, notFound(err)
	}
	return &d, nil
}

// ListPolicyDryRuns lists an app's dry runs, newest first, before an id; only those of one
// draft when draftID is set.
func (s *Store) ListPolicyDryRuns(ctx context.Context, orgID, app, draftID, beforeID string, limit int) ([]PolicyDryRun, error) {
	q := s.with(ctx).Where("org_id = ? AND app = ?", orgID, app)
	if draftID != "" {
		q = q.Where("draft_id = ?", draftID)
	}
	return page[PolicyDryRun](q, beforeID, newestFirst, limit)
}

// AdvancePolicyDryRun saves the dry run's next page, unless a page from the same place was
// saved already (a retried activity): it reports whether it saved. d.LastOrderID is the
// place the page started from; next the place it ends.
func (s *Store) AdvancePolicyDryRun(ctx context.Context, d *PolicyDryRun, next string) (bool, error) {
	res := s.with(ctx).Model(&PolicyDryRun{}).Where("id = ? AND last_order_id = ? AND status = ?", d.ID, d.LastOrderID, DryRunRunning).
		Updates(map[string]any{"last_order_id": next, "evaluated": d.Evaluated, "report": d.Report, "status": d.Status,
			"error": d.Error, "updated_at": d.UpdatedAt.UTC(), "completed_at": d.CompletedAt})
	return res.RowsAffected == 1, res.Error
}

// HistoryOrders pages through the app's orders submitted in [since, until] that the policy
// decided, by id after afterID.
func (s *Store) HistoryOrders(ctx context.Context, orgID, app string, since, until time.Time, afterID string, limit int) ([]Order, error) {
	var out []Order
	err := s.historyOrders(ctx, orgID, app, since, until).Where("id > ?", afterID).Order("id").Limit(limit).Find(&out).Error
	return out, err
}

// CountHistoryOrders counts what HistoryOrders pages through.
func (s *Store) CountHistoryOrders(ctx context.Context, orgID, app string, since, until time.Time) (int, error) {
	var n int64
	err := s.historyOrders(ctx, orgID, app, since, until).Count(&n).Error
	return int(n), err
}

func (s *Store) historyOrders(ctx context.Context, orgID, app string, since, until time.Time) *gorm.DB {
	return s.with(ctx).Model(&Order{}).Where("org_id = ? AND app = ? AND submitted_at >= ? AND submitted_at <= ? AND policy_decision IS NOT NULL",
		orgID, app, since.UTC(), until.UTC())
}

// WindowKeyUse is the volume one key has used in a window.
type WindowKeyUse struct {
	Key  string          `gorm:"column:window_key"`
	Used decimal.Decimal `gorm:"column:used"`
}

// windowColumns is the orders' column that holds each scope's key.
var windowColumns = map[string]string{policy.ScopeWallet: "wallet_id", policy.ScopeApp: "app",
	policy.ScopeAsset: "policy_asset", policy.ScopeDestination: "policy_destination"}

// WindowUse sums the volume each key has used in a window up to now, counting the orders
// PolicyVolume counts, the most used first; app narrows an app window to its own key.
func (s *Store) WindowUse(ctx context.Context, orgID, app string, w policy.Window, now time.Time, limit int) ([]WindowKeyUse, error) {
	column := windowColumns[w.Scope]
	db := s.with(ctx).Model(&Order{}).Select(column+" AS window_key, amount_usd AS used").
		Where("org_id = ? AND submitted_at >= ? AND policy_allowed = ? AND status NOT IN ? AND "+column+" <> ''",
			orgID, now.UTC().Add(-time.Duration(w.Hours)*time.Hour), true, []orders.Status{orders.StatusRejected, orders.StatusFailed})
	if w.Scope == policy.ScopeApp {
		db = db.Where("app = ?", app)
	}
	if s.dialect == migrations.Postgres {
		var out []WindowKeyUse
		err := db.Select(column + " AS window_key, SUM(amount_usd) AS used").Group(column).
			Order("used DESC, window_key").Limit(limit).Find(&out).Error
		return out, err
	}
	// SQLite keeps amounts as text and would sum them as floats: they are summed here.
	var rows []WindowKeyUse
	if err := db.Find(&rows).Error; err != nil {
		return nil, err
	}
	sums := map[string]decimal.Decimal{}
	for _, r := range rows {
		sums[r.Key] = sums[r.Key].Add(r.Used)
	}
	out := make([]WindowKeyUse, 0, len(sums))
	for k, used := range sums {
		out = append(out, WindowKeyUse{Key: k, Used: used})
	}
	slices.SortFunc(out, func(a, b WindowKeyUse) int {
		if c := b.Used.Cmp(a.Used); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out[:min(len(out), limit)], nil
}

// AppendPolicyEvent writes Policy.Published to the outbox: an event of the app about no
// order, delivered to its live channel and webhooks like the order events.
func (s *Store) AppendPolicyEvent(ctx context.Context, orgID string, body *events.PolicyEvent) error {
	body.ID, body.Event = ids.New(ids.Event), events.PolicyPublished
	body.OccurredAt = events.TimeOf(body.OccurredAt.UTC())
	return s.appendAppEvent(ctx, &Event{ID: body.ID, OrgID: orgID, App: body.App, Event: body.Event,
		Step: fmt.Sprintf("policy-%s-v%d", body.App, body.PolicyVersion), CorrelationID: body.CorrelationID,
		OccurredAt: body.OccurredAt.Time}, body)
}

// appendAppEvent writes an event of an app about no order (events.IsAppEvent) to the
// outbox, with its webhook deliveries, in the caller's transaction.
func (s *Store) appendAppEvent(ctx context.Context, ev *Event, body events.Body) error {
	data, err := events.Encode(body)
	if err != nil {
		return err
	}
	ev.Data = string(data)
	// order_id stays NULL: the column names an order when there is one.
	err = s.with(ctx).Table("events").Create(map[string]any{"id": ev.ID, "org_id": ev.OrgID, "app": ev.App, "domain": "",
		"order_id": nil, "sequence": 0, "event": ev.Event, "leg": "", "step": ev.Step, "data": ev.Data,
		"correlation_id": ev.CorrelationID, "occurred_at": ev.OccurredAt, "wallet_id": ""}).Error
	if err != nil {
		return err
	}
	if err := s.queueWebhooks(ctx, ev); err != nil {
		return err
	}
	return s.eventAppended(ctx, ev.ID, ev.Event)
}
