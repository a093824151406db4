package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/internal/policy"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
)

// A draft's dry run against history: started from the draft's page, run by a background
// workflow over the app's past orders, and read on a page of its own, which reloads
// itself while the run goes on. The forms call the service functions of
// POST and GET /api/v1/policies/{app}/dry-runs; the policy page and a draft's page list
// the latest.

func dryRunPath(app, id string) string { return "/console/" + app + "/policy/dry-runs/" + id }

// startDryRun starts a dry run of the draft against the app's orders of the days typed
// (the service's default when none) and goes to its page. What the service refuses goes
// back to the draft, saying why.
func (c *console) startDryRun(w http.ResponseWriter, r *http.Request, rq *request) {
	draftID := r.PathValue("id")
	days := 0 // the service's default
	if typed := strings.TrimSpace(r.PostFormValue("days")); typed != "" {
		n, err := strconv.Atoi(typed)
		if err != nil || n == 0 {
			n = -1 // not a number of days the service takes: refused, with its range
		}
		days = n
	}
	d, err := c.Service.StartPolicyDryRun(r.Context(), rq.caller(r), rq.app, service.PolicyDryRunInput{DraftID: draftID, Days: days})
	if err != nil {
		c.back(w, r, draftPath(rq.app, draftID), err, "")
		return
	}
	http.Redirect(w, r, dryRunPath(rq.app, d.ID), http.StatusSeeOther)
}

// dryRunRow is a dry run as the policy page and a draft's page list it.
type dryRunRow struct {
	ID, DraftID, By, Status string
	// Href and DraftHref are the run's page and its draft's.
	Href, DraftHref  string
	Days             int
	CreatedAt        time.Time
	Evaluated, Total int
	Changed          int
}

// dryRuns reads the app's latest dry runs, of one draft when draftID is set.
func (c *console) dryRuns(r *http.Request, rq *request, n names, draftID string, limit int) ([]dryRunRow, error) {
	list, _, err := c.Service.PolicyDryRuns(r.Context(), rq.caller(r), rq.app, draftID, service.Page{Limit: limit})
	out := make([]dryRunRow, len(list))
	for i := range list {
		d := &list[i]
		report := reportOf(d)
		out[i] = dryRunRow{ID: d.ID, DraftID: d.DraftID, Href: dryRunPath(rq.app, d.ID), DraftHref: draftPath(rq.app, d.DraftID), By: n.of(d.CreatedByUser, d.CreatedBy), Status: d.Status, Days: d.Days, CreatedAt: d.CreatedAt,
			Evaluated: d.Evaluated, Total: d.Total, Changed: report.Evaluated - report.Unchanged}
	}
	return out, err
}

// reportOf is a dry run's report so far.
func reportOf(d *store.PolicyDryRun) *policy.HistoryReport {
	report := policy.NewHistoryReport()
	_ = json.Unmarshal([]byte(d.Report), report) // written by the dry run from this type
	return report
}

// shiftWords are the words for each shift of outcome (policy.Shifts), said of the orders
// it moved.
var shiftWords = map[string]string{
	policy.ShiftAllowedToRefused: "Would be refused (now allowed)",
	policy.ShiftRefusedToAllowed: "Would be allowed (now refused)",
	policy.ShiftApprovalAdded:    "Would need approval (now none)",
	policy.ShiftApprovalRemoved:  "Would no longer need approval",
	policy.ShiftQuorumRaised:     "Would need more approvals",
	policy.ShiftQuorumLowered:    "Would need fewer approvals",
}

type dryRunPage struct {
	Run *store.PolicyDryRun
	// By is who started it; Draft the draft it tried, as it is now.
	By    string
	Draft *service.PolicyDraftView
	// Edited: the draft was saved again after the run started, which tried the rules it
	// had then (Rules, indented).
	Edited bool
	Rules  string
	// Changes is what those rules change from InForce, the version in force.
	InForce int
	Changes []change
	Report  dryRunReport
}

type dryRunReport struct {
	Evaluated, Unchanged, Changed int
	Shifts                        []shiftRow
	Rules                         []ruleRow
}

// shiftRow is one shift of outcome: how many orders it moved, and the first of them.
type shiftRow struct {
	Name, Words string
	Count       int
	Examples    []exampleRow
	// More is how many it moved beyond the examples kept.
	More int
}

type exampleRow struct {
	OrderID string
	// AmountUSD is the order's value, a decimal.Decimal when it reads as one.
	AmountUSD   any
	SubmittedAt time.Time
	// Then is what the order's policy decided; Draft what the draft would have.
	Then, Draft string
}

type ruleRow struct {
	Rule string
	policy.RuleCounts
}

// outcome says what a policy decided of an order.
func outcome(o policy.Outcome) string {
	switch {
	case !o.Allowed:
		return "refused: " + strings.Join(o.Violations, ", ")
	case o.ApprovalRequired:
		return fmt.Sprintf("allowed with %d approval(s)", o.Quorum)
	}
	return "allowed, no approval"
}

// dryRun shows a dry run: its progress, and beside what the draft changes, what would
// have changed for the orders evaluated so far. The page reloads itself every 2 seconds
// while the run goes on.
func (c *console) dryRun(w http.ResponseWriter, r *http.Request, rq *request) {
	ctx, who := r.Context(), rq.caller(r)
	d, err := c.Service.PolicyDryRun(ctx, who, rq.app, r.PathValue("id"))
	if err != nil {
		c.failed(w, r, rq, err)
		return
	}
	// The run is read beside its draft and the policy in force, whose diff it shows.
	draft, err := c.Service.PolicyDraft(ctx, who, rq.app, d.DraftID)
	var p *store.Policy
	if err == nil {
		p, err = c.Service.Policy(ctx, who, rq.app)
	}
	if err != nil {
		c.failed(w, r, rq, err)
		return
	}
	inForce, err := policy.Parse([]byte(p.Document))
	var tried policy.Rules
	if err == nil {
		tried, err = policy.Parse([]byte(d.Document))
	}
	if err != nil { // both were checked when they were saved
		c.failed(w, r, rq, err)
		return
	}
	rq.v.Title = "Policy dry run " + d.ID
	if d.Status == store.DryRunRunning {
		rq.v.Refresh = 2
	}
	page := dryRunPage{Run: d, By: c.people(ctx, who).of(d.CreatedByUser, d.CreatedBy), Draft: draft, Edited: draft.Document != d.Document,
		Rules: indent(d.Document), InForce: p.Version, Changes: changes(policy.Diff(inForce, tried))}
	report := reportOf(d)
	page.Report = dryRunReport{Evaluated: report.Evaluated, Unchanged: report.Unchanged, Changed: report.Evaluated - report.Unchanged}
	for _, name := range policy.Shifts {
		s := report.Shifts[name]
		if s == nil {
			s = &policy.ShiftReport{}
		}
		row := shiftRow{Name: name, Words: shiftWords[name], Count: s.Count, More: s.Count - len(s.Examples)}
		for _, ex := range s.Examples {
			var amount any // "—" unless it reads as an amount
			if v, err := decimal.NewFromString(ex.AmountUSD); err == nil {
				amount = v
			}
			row.Examples = append(row.Examples, exampleRow{OrderID: ex.OrderID, AmountUSD: amount, SubmittedAt: ex.SubmittedAt,
				Then: outcome(ex.Before), Draft: outcome(ex.After)})
		}
		page.Report.Shifts = append(page.Report.Shifts, row)
	}
	for rule, n := range report.ByRule {
		page.Report.Rules = append(page.Report.Rules, ruleRow{Rule: rule, RuleCounts: *n})
	}
	slices.SortFunc(page.Report.Rules, func(a, b ruleRow) int { return strings.Compare(a.Rule, b.Rule) })
	c.render(w, r, rq, http.StatusOK, "policy_dry_run", page)
}
