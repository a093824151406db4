// Command policy-review proposes a change of an app's policy and shows what it would do
// before anyone publishes it: it saves the rules as a draft, prints the draft's diff from
// the policy in force, runs the draft against the app's orders of the last days (a
// background job on the server) and prints what would have changed, with the first
// orders of each kind. It publishes nothing: another person approves the draft, in the
// console or through the API, when the app's policy asks for change approvals.
//
// Its key needs only the developer action on the app: policies are developer settings,
// and developer can neither create, approve nor sign an order.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/opentreasury/treasury/client"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("policy-review", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		baseURL  = fs.String("url", cmp.Or(os.Getenv("TREASURY_URL"), "http://127.0.0.1:8080"), "where the API answers ($TREASURY_URL)")
		token    = fs.String("token", "", "a tk_ key with only the developer action on the app (default $TREASURY_TOKEN)")
		app      = fs.String("app", "pay", "the app whose policy to change: pay, trade, earn or borrow")
		rules    = fs.String("rules", "", "a file holding the proposed rules (JSON, as GET /policies/{app} answers them)")
		days     = fs.Int("days", 30, "how many days of orders to run the draft against (1-366)")
		examples = fs.Int("examples", 3, "how many orders of each kind of change to show (1-50)")
		timeout  = fs.Duration("timeout", 5*time.Minute, "how long to wait for the dry run")
	)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	*token = strings.TrimSpace(cmp.Or(*token, os.Getenv("TREASURY_TOKEN")))
	if *token == "" || *rules == "" {
		fmt.Fprintln(stderr, "policy-review: --token (or $TREASURY_TOKEN) and --rules are required")
		return 2
	}
	raw, err := os.ReadFile(*rules)
	if err != nil {
		fmt.Fprintln(stderr, "policy-review:", err)
		return 2
	}
	var proposed client.PolicyRules
	if err := json.Unmarshal(raw, &proposed); err != nil {
		fmt.Fprintln(stderr, "policy-review: --rules:", err)
		return 2
	}
	c, err := client.New(*baseURL, client.WithToken(*token))
	if err != nil {
		fmt.Fprintln(stderr, "policy-review:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := review(ctx, c, *app, proposed, *days, *examples, stdout); err != nil {
		fmt.Fprintln(stderr, "policy-review:", err)
		var p *client.Problem
		if errors.As(err, &p) && p.Status == 422 {
			return 2
		}
		return 1
	}
	return 0
}

func review(ctx context.Context, c *client.Client, app string, rules client.PolicyRules, days, examples int, out io.Writer) error {
	draft, err := c.CreatePolicyDraft(ctx, app, client.PolicyDraftRequest{Rules: &rules})
	if err != nil {
		return fmt.Errorf("draft: %w", err)
	}
	fmt.Fprintf(out, "Draft %s of the %s policy, against version %d in force:\n", draft.ID, app, draft.InForceVersion)
	if len(draft.Diff) == 0 {
		fmt.Fprintln(out, "  (no change)")
	}
	for _, ch := range draft.Diff {
		fmt.Fprintln(out, "  "+ch.Text)
	}
	// The run is one request to start and a few to read: a retried start with the same
	// key is the same run, so a lost answer starts nothing twice.
	dr, err := c.StartPolicyDryRun(ctx, app, client.PolicyDryRunRequest{DraftID: draft.ID, Days: days, Examples: examples},
		client.WithIdempotencyKey("policy-review-"+draft.ID))
	if err != nil {
		return fmt.Errorf("dry run: %w", err)
	}
	for dr.Status == client.PolicyDryRunRunning {
		select {
		case <-ctx.Done():
			return fmt.Errorf("dry run %s: %d of %d orders evaluated when the wait ended: %w", dr.ID, dr.Progress.Evaluated, dr.Progress.Total, ctx.Err())
		case <-time.After(time.Second):
		}
		if dr, err = c.GetPolicyDryRun(ctx, app, dr.ID); err != nil {
			return fmt.Errorf("dry run: %w", err)
		}
	}
	if dr.Status != client.PolicyDryRunCompleted {
		why := "no reason given"
		if dr.Error != nil {
			why = *dr.Error
		}
		return fmt.Errorf("dry run %s %s: %s", dr.ID, dr.Status, why)
	}
	r := dr.Report
	fmt.Fprintf(out, "\nAgainst the %d orders of the last %d days (%d unchanged):\n", r.Evaluated, days, r.Unchanged)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, s := range []struct{ name, say string }{
		{client.PolicyShiftAllowedToRefused, "would be refused (were let through)"},
		{client.PolicyShiftRefusedToAllowed, "would be let through (were refused)"},
		{client.PolicyShiftApprovalAdded, "would need approval (needed none)"},
		{client.PolicyShiftApprovalRemoved, "would need no approval"},
		{client.PolicyShiftQuorumRaised, "would need more approvals"},
		{client.PolicyShiftQuorumLowered, "would need fewer approvals"},
	} {
		shift := r.Shifts[s.name]
		fmt.Fprintf(w, "  %d\t%s\n", shift.Count, s.say)
		for _, ex := range shift.Examples {
			fmt.Fprintf(w, "  \t  %s\t%s USD\t%s\t%s\n", ex.Href, ex.AmountUSD, ex.SubmittedAt.Format(time.RFC3339), strings.Join(ex.After.Violations, ", "))
		}
	}
	for _, rule := range slices.Sorted(maps.Keys(r.ByRule)) {
		n := r.ByRule[rule]
		fmt.Fprintf(w, "  rule %s\tnewly refuses %d, no longer refuses %d\n", rule, n.NewlyRefused, n.NoLongerRefused)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nNothing is published yet. Publish: POST /api/v1/policies/%s/drafts/%s/publish, or, when the policy asks for\n"+
		"approvals, another person approves it on the console's policy page (/console/%s/policy/drafts/%s).\n", app, draft.ID, app, draft.ID)
	return nil
}
