package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/opentreasury/treasury/internal/policy"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/workflows"
)

// PolicyStore is what a dry run needs of the store: the run, past orders, the rules and the volume they counted (*store.Store).
type PolicyStore interface {
	PolicyDryRunOf(ctx context.Context, orgID, id string) (*store.PolicyDryRun, error)
	AdvancePolicyDryRun(ctx context.Context, d *store.PolicyDryRun, next string) (bool, error)
	HistoryOrders(ctx context.Context, orgID, app string, since, until time.Time, afterID string, limit int) ([]store.Order, error)
	PolicyRules(ctx context.Context, orgID, app string, version *int) (policy.Rules, int, error)
	PolicyUsage(ctx context.Context, orgID string, rules policy.Rules, o policy.Order, now time.Time, past bool, excludeOrderID string) (policy.Usage, error)
}

// Policies holds the activity of the policy dry run against history.
type Policies struct {
	Store PolicyStore
	Log   *slog.Logger
	Now   func() time.Time
	// PageSize is how many orders a page evaluates (DryRunPageSize when zero).
	PageSize int
}

// DryRunPageSize is how many orders one activity of a dry run evaluates, by default.
const DryRunPageSize = 200

// DryRunPage evaluates the next page of a dry run's orders under its draft, as if the
// draft had been in force when each was submitted, and saves the tally with the page's
// place in one statement: a retry after a save finds the place moved and goes on from
// there. An order is compared with the decision its own policy recorded.
func (a *Policies) DryRunPage(ctx context.Context, in workflows.DryRunInput) (workflows.DryRunProgress, error) {
	d, err := a.Store.PolicyDryRunOf(ctx, "", in.DryRunID)
	if errors.Is(err, store.ErrNotFound) {
		return workflows.DryRunProgress{}, classify(fmt.Errorf("%w: %s", errUnknownDryRun, in.DryRunID))
	}
	if err != nil {
		return workflows.DryRunProgress{}, err
	}
	progress := workflows.DryRunProgress{Evaluated: d.Evaluated, Total: d.Total, Done: d.Status != store.DryRunRunning}
	if progress.Done {
		return progress, nil
	}
	size := a.PageSize
	if size <= 0 {
		size = DryRunPageSize
	}
	page, err := a.Store.HistoryOrders(ctx, d.OrgID, d.App, d.Since, d.Until, d.LastOrderID, size)
	if err != nil {
		return progress, err
	}
	report := policy.NewHistoryReport()
	err = json.Unmarshal([]byte(d.Report), report)
	var rules policy.Rules
	if err == nil {
		rules, err = policy.Parse([]byte(d.Document))
	}
	next := d.LastOrderID
	own := map[int]policy.Rules{} // the orders' own versions, read once a page
	for i := 0; err == nil && i < len(page); i++ {
		var ex policy.HistoryExample
		if ex, err = a.replay(ctx, rules, own, &page[i]); err == nil {
			report.Add(ex, d.Examples)
			next = page[i].ID
		}
	}
	now := time.Now().UTC()
	if a.Now != nil {
		now = a.Now().UTC()
	}
	d.UpdatedAt = now
	var corrupt *corruptOrder
	switch {
	case errors.As(err, &corrupt):
		// No retry can evaluate it: the run ends, saying why.
		d.Status, d.Error, d.CompletedAt = store.DryRunFailed, err.Error(), &now
		a.Log.Error("policy dry run failed", "dryRunId", d.ID, "error", err)
	case err != nil:
		return progress, err
	case len(page) < size:
		d.Status, d.CompletedAt = store.DryRunCompleted, &now
	}
	d.Evaluated = report.Evaluated
	encoded, err := json.Marshal(report)
	if err != nil {
		return progress, err
	}
	d.Report = string(encoded)
	saved, err := a.Store.AdvancePolicyDryRun(ctx, d, next)
	if err != nil || !saved {
		// Not saved: an earlier attempt saved this page; the next call reads on from it.
		return progress, err
	}
	return workflows.DryRunProgress{Evaluated: d.Evaluated, Total: d.Total, Done: d.Status != store.DryRunRunning}, nil
}

// corruptOrder is a stored order a dry run cannot evaluate.
type corruptOrder struct{ err error }

func (e *corruptOrder) Error() string { return e.err.Error() }

// replay evaluates an order under rules as if they had been in force when it was
// submitted, counting the volume of the orders submitted until then as it stands now,
// and under its own version the same way: the two differ only where the rules do. An order
// submitted before versions were kept is compared with the decision it recorded.
func (a *Policies) replay(ctx context.Context, rules policy.Rules, own map[int]policy.Rules, o *store.Order) (policy.HistoryExample, error) {
	recorded, err := workflows.RecordedDecision(*o.PolicyDecision)
	if err != nil {
		return policy.HistoryExample{}, &corruptOrder{fmt.Errorf("order %s: recorded decision: %w", o.ID, err)}
	}
	pol := o.Details.PolicyOrder(o.App, o.WalletID, o.AmountUSD)
	evaluate := func(r policy.Rules) (policy.Outcome, error) {
		usage, err := a.Store.PolicyUsage(ctx, o.OrgID, r, pol, *o.SubmittedAt, true, o.ID)
		return policy.OutcomeOf(r.Evaluate(pol, usage)), err
	}
	after, err := evaluate(rules)
	if err != nil {
		return policy.HistoryExample{}, err
	}
	before := policy.Outcome{Allowed: recorded.Allowed, ApprovalRequired: recorded.ApprovalRequired, Quorum: recorded.Quorum, Violations: []string{}}
	for _, v := range recorded.Violations {
		before.Violations = append(before.Violations, v.Rule)
	}
	if o.PolicyVersion != nil {
		ownRules, ok := own[*o.PolicyVersion]
		if !ok {
			if ownRules, _, err = a.Store.PolicyRules(ctx, o.OrgID, o.App, o.PolicyVersion); err != nil {
				return policy.HistoryExample{}, err
			}
			own[*o.PolicyVersion] = ownRules
		}
		if before, err = evaluate(ownRules); err != nil {
			return policy.HistoryExample{}, err
		}
	}
	return policy.HistoryExample{OrderID: o.ID, Domain: o.Domain, AmountUSD: o.AmountUSD.StringFixedBank(2),
		SubmittedAt: o.SubmittedAt.UTC(), Before: before, After: after}, nil
}
