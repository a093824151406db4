package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/policy"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
	"github.com/opentreasury/treasury/workflows"
)

// publish puts rules in force for the pay app and returns their version.
func (l *lifecycle) publish(t *testing.T, doc string) int {
	t.Helper()
	p := &store.Policy{OrgID: l.creds.OrgID, App: "pay", Document: doc, UpdatedBy: "key_dev", UpdatedAt: time.Now()}
	if err := l.store.PublishPolicy(context.Background(), p, &store.PolicyVersion{}); err != nil {
		t.Fatal(err)
	}
	return p.Version
}

func (l *lifecycle) payment(t *testing.T, amount, to string) (*store.Order, []string) {
	t.Helper()
	return l.draft(t, "payment", `{"walletId":"`+l.wallet.ID+`","asset":"USDC","amount":"`+amount+`","destination":{"address":"`+to+`"}}`)
}

const payee = "0x1111111111111111111111111111111111111111"

// An order is evaluated by the version of the policy in force when it was submitted, and
// keeps the quorum that version gave it whatever is published while it waits.
func TestAnOrderInFlightKeepsThePolicyVersionItWasSubmittedUnder(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		l := newLifecycle(t, s)
		ctx := context.Background()
		strict := l.publish(t, `{"approvalTiers":[{"minUsd":"1","quorum":2}]}`)

		// Published between its submit and its evaluation: the order is still the strict
		// version's.
		o, _ := l.payment(t, "500", payee)
		in := workflows.StepInput{OrderID: o.ID, CorrelationID: "c"}
		if err := l.acts.MarkSubmitted(ctx, in); err != nil {
			t.Fatal(err)
		}
		loose := l.publish(t, `{"approvalTiers":[{"minUsd":"1","quorum":1}]}`)
		d, err := l.acts.EvaluatePolicy(ctx, in)
		if err != nil || d.PolicyVersion != strict || d.Quorum != 2 {
			t.Fatalf("decision %+v (%v), want version %d's quorum of 2", d, err, strict)
		}
		_, data := l.events(t, o.ID)
		if data[1]["event"] != "Order.Submitted" || data[1]["policyVersion"] != float64(strict) {
			t.Fatalf("Order.Submitted %v, want policyVersion %d", data[1], strict)
		}
		later, _ := l.payment(t, "500", payee)
		if err := l.acts.MarkSubmitted(ctx, workflows.StepInput{OrderID: later.ID}); err != nil {
			t.Fatal(err)
		}
		if d, err := l.acts.EvaluatePolicy(ctx, workflows.StepInput{OrderID: later.ID}); err != nil || d.PolicyVersion != loose || d.Quorum != 1 {
			t.Fatalf("an order submitted after the publish: %+v (%v)", d, err)
		}

		// Published while the workflow waits for its approvers: one approval does not
		// make the quorum of two, and the order expires unapproved.
		l.publish(t, `{"approvalTiers":[{"minUsd":"1","quorum":2}]}`)
		waiting, legs := l.payment(t, "500", payee)
		submittedUnder := strict + 2
		l.meanwhile = map[time.Duration]func(){30 * time.Second: func() { l.publish(t, `{"approvalTiers":[{"minUsd":"1","quorum":1}]}`) }}
		st := l.run(t, waiting, legs, "usr_checker")
		if st.Status != orders.StatusRejected || st.Decision == nil || st.Decision.Quorum != 2 || st.Decision.PolicyVersion != submittedUnder {
			t.Fatalf("state %+v decision %+v, want rejected under version %d with a quorum of 2", st, st.Decision, submittedUnder)
		}
		stored, _, err := l.store.Order(ctx, waiting.ID)
		if err != nil || stored.PolicyVersion == nil || *stored.PolicyVersion != submittedUnder || stored.ApprovalQuorum != 2 ||
			stored.RejectionReason == nil || *stored.RejectionReason != orders.RejectedExpired {
			t.Fatalf("stored order %+v (%v)", stored, err)
		}
	})
}

// Orders evaluated at the same instant at a window's edge take turns: of three orders that
// each take two thirds of the window, exactly one passes, on either database. A rejected
// order frees its share at once.
func TestOrdersAtAWindowsEdgeCannotBothPass(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		l := newLifecycle(t, s)
		ctx := context.Background()
		probe, _ := l.payment(t, "300", payee)
		limit := probe.AmountUSD.Mul(decimal.RequireFromString("1.5"))
		l.publish(t, `{"windows":[{"scope":"destination","hours":24,"limitUsd":"`+limit.String()+`"}]}`)
		for round := range 8 {
			to := fmt.Sprintf("0x%040x", 0xabc000+round)
			var batch []*store.Order
			for range 3 {
				o, _ := l.payment(t, "300", to)
				if err := l.acts.MarkSubmitted(ctx, workflows.StepInput{OrderID: o.ID}); err != nil {
					t.Fatal(err)
				}
				batch = append(batch, o)
			}
			decisions := make([]workflows.PolicyDecision, len(batch))
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i, o := range batch {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					var err error
					// A conflict the database reports is retried, as Temporal retries the activity.
					for attempt := 0; attempt < 20; attempt++ {
						if decisions[i], err = l.acts.EvaluatePolicy(ctx, workflows.StepInput{OrderID: o.ID}); err == nil {
							return
						}
					}
					t.Error(err)
				}()
			}
			close(start)
			wg.Wait()
			var passed []int
			for i, d := range decisions {
				if d.Allowed {
					passed = append(passed, i)
				}
			}
			if len(passed) != 1 {
				t.Fatalf("round %d: %d of 3 orders passed a window that holds one: %+v", round, len(passed), decisions)
			}
			// Its rejection frees the share: the next order at the edge passes.
			if err := l.acts.RejectOrder(ctx, workflows.RejectInput{OrderID: batch[passed[0]].ID, Reason: orders.RejectedByApprover}); err != nil {
				t.Fatal(err)
			}
			next, _ := l.payment(t, "300", to)
			if err := l.acts.MarkSubmitted(ctx, workflows.StepInput{OrderID: next.ID}); err != nil {
				t.Fatal(err)
			}
			if d, err := l.acts.EvaluatePolicy(ctx, workflows.StepInput{OrderID: next.ID}); err != nil || !d.Allowed {
				t.Fatalf("round %d: after the rejection the window refused %+v (%v)", round, d, err)
			}
		}
	})
}

// A dry run evaluates the app's past orders under a draft, page by page, and reports what
// would have changed against what each order's own policy decided; a page whose answer was
// lost after it was saved is not counted twice.
func TestADryRunReportsWhatADraftWouldHaveChanged(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		l := newLifecycle(t, s)
		ctx := context.Background()
		const inForce = `{"maxOrderUsd":"100000","approvalTiers":[{"minUsd":"1000","quorum":1}]}`
		l.publish(t, inForce)
		byAmount := map[string]string{}
		for _, amount := range []string{"10", "500", "2000", "50000", "200000"} {
			o, _ := l.payment(t, amount, payee)
			in := workflows.StepInput{OrderID: o.ID}
			if err := l.acts.MarkSubmitted(ctx, in); err != nil {
				t.Fatal(err)
			}
			if _, err := l.acts.EvaluatePolicy(ctx, in); err != nil {
				t.Fatal(err)
			}
			byAmount[amount] = o.ID
		}
		l.draft(t, "payment", `{"walletId":"`+l.wallet.ID+`","asset":"USDC","amount":"7","destination":{"address":"`+payee+`"}}`) // never submitted

		draft := `{"maxOrderUsd":"20000","approvalTiers":[{"minUsd":"100","quorum":1},{"minUsd":"10000","quorum":2}]}`
		report, _ := json.Marshal(policy.NewHistoryReport())
		now := time.Now()
		run := &store.PolicyDryRun{ID: ids.New(ids.PolicyDryRun), OrgID: l.creds.OrgID, App: "pay", DraftID: "pdr_x", Document: draft,
			Days: 1, Examples: 1, Since: now.Add(-time.Hour), Until: now.Add(time.Minute), Status: store.DryRunRunning, Total: 5,
			Report: string(report), Creator: store.Creator{CreatedBy: "key_dev"}, CreatedAt: now, UpdatedAt: now}
		if err := s.CreatePolicyDryRun(ctx, run); err != nil {
			t.Fatal(err)
		}

		acts := &Policies{Store: s, Log: l.acts.Log, PageSize: 2}
		var suite testsuite.WorkflowTestSuite
		env := suite.NewTestWorkflowEnvironment()
		env.RegisterWorkflowWithOptions(workflows.PolicyDryRun, workflow.RegisterOptions{Name: workflows.PolicyDryRunWorkflow})
		calls := 0
		env.RegisterActivityWithOptions(func(ctx context.Context, in workflows.DryRunInput) (workflows.DryRunProgress, error) {
			calls++
			p, err := acts.DryRunPage(ctx, in)
			if calls == 2 {
				return p, errors.New("the worker died before the answer left")
			}
			return p, err
		}, activity.RegisterOptions{Name: workflows.DryRunPageActivity})
		env.ExecuteWorkflow(workflows.PolicyDryRunWorkflow, workflows.DryRunInput{DryRunID: run.ID})
		if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
			t.Fatalf("completed %v, error %v", env.IsWorkflowCompleted(), env.GetWorkflowError())
		}

		done, err := s.PolicyDryRunOf(ctx, "", run.ID)
		if err != nil || done.Status != store.DryRunCompleted || done.Evaluated != 5 || done.CompletedAt == nil {
			t.Fatalf("dry run %+v (%v)", done, err)
		}
		got := policy.NewHistoryReport()
		if err := json.Unmarshal([]byte(done.Report), got); err != nil {
			t.Fatal(err)
		}
		shift := func(name string) *policy.ShiftReport { return got.Shifts[name] }
		if got.Evaluated != 5 || got.Unchanged != 3 || shift(policy.ShiftApprovalAdded).Count != 1 ||
			shift(policy.ShiftAllowedToRefused).Count != 1 || shift(policy.ShiftRefusedToAllowed).Count != 0 {
			t.Fatalf("report %s", done.Report)
		}
		if ex := shift(policy.ShiftApprovalAdded).Examples; len(ex) != 1 || ex[0].OrderID != byAmount["500"] || ex[0].After.Quorum != 1 {
			t.Errorf("approval added: %+v", ex)
		}
		if ex := shift(policy.ShiftAllowedToRefused).Examples; len(ex) != 1 || ex[0].OrderID != byAmount["50000"] ||
			ex[0].After.Violations[0] != "maxOrderUsd" {
			t.Errorf("allowed to refused: %+v", ex)
		}
		if c := got.ByRule["maxOrderUsd"]; c == nil || c.NewlyRefused != 1 || c.NoLongerRefused != 0 {
			t.Errorf("by rule: %+v", got.ByRule)
		}

		// The rules in force, run the same way, change nothing: each order is compared with
		// its own version evaluated like the draft.
		same := *run
		same.ID, same.Document, same.Status, same.LastOrderID = ids.New(ids.PolicyDryRun), inForce, store.DryRunRunning, ""
		same.Evaluated, same.Report, same.CompletedAt = 0, string(report), nil
		if err := s.CreatePolicyDryRun(ctx, &same); err != nil {
			t.Fatal(err)
		}
		for p := (workflows.DryRunProgress{}); !p.Done; {
			if p, err = acts.DryRunPage(ctx, workflows.DryRunInput{DryRunID: same.ID}); err != nil {
				t.Fatal(err)
			}
		}
		sameRun, _ := s.PolicyDryRunOf(ctx, "", same.ID)
		unchanged := policy.NewHistoryReport()
		if err := json.Unmarshal([]byte(sameRun.Report), unchanged); err != nil || unchanged.Evaluated != 5 || unchanged.Unchanged != 5 {
			t.Fatalf("the rules in force against their own orders: %s (%v)", sameRun.Report, err)
		}
	})
}
