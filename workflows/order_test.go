package workflows

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/policy"
)

// fakeOrder stands in for the order activities: it records which ran, in order, and
// answers as a test tells it to.
type fakeOrder struct {
	mu       sync.Mutex
	calls    []string
	decision PolicyDecision
	chain    []string // successive CheckLeg answers; the last one repeats
	checks   int
	// outcome is what the store says of the approval item when the workflow asks.
	outcome string
	// refused are the legs the chain refuses for good, with the failure code.
	refused map[string]string
}

func (f *fakeOrder) record(name string) {
	f.mu.Lock()
	f.calls = append(f.calls, name)
	f.mu.Unlock()
}

func (f *fakeOrder) register(env *testsuite.TestWorkflowEnvironment) {
	reg := func(fn any, name string) { env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name}) }
	reg(func(context.Context, StepInput) error { f.record("submitted"); return nil }, orders.StepSubmitted.Activity)
	reg(func(context.Context, StepInput) (PolicyDecision, error) { f.record("policy"); return f.decision, nil }, orders.StepPolicyEvaluated.Activity)
	reg(func(_ context.Context, in ApprovalRequest) (string, error) {
		f.record("approval-requested")
		return "apr_1", nil
	}, orders.StepApprovalRequested.Activity)
	reg(func(context.Context, ApprovalRequest) error { f.record("approved"); return nil }, orders.StepApproved.Activity)
	reg(func(context.Context, ApprovalRequest) (ApprovalOutcome, error) {
		f.record("asked-store")
		return ApprovalOutcome{Status: f.outcome, RejectedBy: "key_store"}, nil
	}, ApprovalOutcomeActivity)
	reg(func(_ context.Context, in RejectInput) error { f.record("rejected:" + in.Reason); return nil }, orders.StepRejected.Activity)
	reg(func(_ context.Context, in LegInput) (SigningRequestRef, error) {
		f.record("sign-requested:" + in.Leg)
		if code := f.refused[in.Leg]; code != "" {
			return SigningRequestRef{}, temporal.NewNonRetryableApplicationError("the chain refused "+in.Leg, ErrTypeLegRefused, nil, code)
		}
		return SigningRequestRef{ID: "sig_" + in.Leg, Digest: "d"}, nil
	}, orders.StepSignatureRequested.Activity)
	reg(func(_ context.Context, in LegInput) error { f.record("signed:" + in.Leg); return nil }, orders.StepSigned.Activity)
	reg(func(_ context.Context, in LegInput) (string, error) {
		f.record("broadcast:" + in.Leg)
		return "0xhash", nil
	}, orders.StepBroadcast.Activity)
	reg(func(context.Context, LegInput) (LegStatus, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		i := min(f.checks, len(f.chain)-1)
		f.checks++
		return LegStatus{State: chain.TxState(f.chain[i]), Reason: "reverted"}, nil
	}, CheckLegActivity)
	reg(func(_ context.Context, in LegInput) error {
		f.record("leg-confirmed:" + in.Leg)
		return nil
	}, orders.StepConfirmed.Activity)
	reg(func(_ context.Context, in FailInput) error {
		f.record(strings.TrimSuffix("failed:"+string(in.Code)+":"+in.Reason, ":"))
		return nil
	}, orders.StepFailed.Activity)
}

type scenario struct {
	name     string
	legs     []string
	decision PolicyDecision
	chain    []string
	outcome  string
	refused  map[string]string
	// script runs signals at points in (workflow) time.
	script    func(env *testsuite.TestWorkflowEnvironment)
	want      string
	endStatus string
}

func sign(env *testsuite.TestWorkflowEnvironment, at time.Duration, req string) {
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalSignature, Signature{SigningRequestID: req, Signature: "c2ln"})
	}, at)
}

func refuse(env *testsuite.TestWorkflowEnvironment, at time.Duration, req, reason string) {
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalRefusal, Refusal{SigningRequestID: req, Reason: reason, Detail: "what the signer saw"})
	}, at)
}

func decide(env *testsuite.TestWorkflowEnvironment, at time.Duration, by, decision, outcome string) {
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalApprovalDecision, ApprovalDecision{ItemID: "apr_1", DecidedBy: by, Decision: decision, Outcome: outcome})
	}, at)
}

func TestOrderLifecyclePaths(t *testing.T) {
	allowed := PolicyDecision{Allowed: true}
	quorum := func(n int) PolicyDecision { return PolicyDecision{Allowed: true, ApprovalRequired: true, Quorum: n} }
	cases := []scenario{
		{name: "no approval", legs: []string{"TRANSFER"}, decision: allowed, chain: []string{"pending", "confirmed"},
			script: func(env *testsuite.TestWorkflowEnvironment) { sign(env, time.Minute, "sig_TRANSFER") },
			want:   "submitted policy sign-requested:TRANSFER signed:TRANSFER broadcast:TRANSFER leg-confirmed:TRANSFER", endStatus: "confirmed"},
		{name: "quorum 1", legs: []string{"TRANSFER"}, decision: quorum(1), chain: []string{"confirmed"},
			script: func(env *testsuite.TestWorkflowEnvironment) {
				decide(env, time.Hour, "key_approver", "APPROVE", "approved")
				sign(env, 2*time.Hour, "sig_TRANSFER")
			},
			want: "submitted policy approval-requested approved sign-requested:TRANSFER signed:TRANSFER broadcast:TRANSFER leg-confirmed:TRANSFER", endStatus: "confirmed"},
		{name: "quorum 2 ignores a repeated approver", legs: []string{"TRANSFER"}, decision: quorum(2), chain: []string{"confirmed"},
			script: func(env *testsuite.TestWorkflowEnvironment) {
				decide(env, time.Hour, "key_a", "APPROVE", "pending")
				decide(env, 2*time.Hour, "key_a", "APPROVE", "pending")
				// Still one approval: signing is requested only after the second approver.
				env.RegisterDelayedCallback(func() {
					v, err := env.QueryWorkflow(QueryState)
					if err != nil {
						t.Error(err)
						return
					}
					var st OrderState
					_ = v.Get(&st)
					if st.Status != "pending_approval" || len(st.Approvals) != 1 {
						t.Errorf("after a repeated approver: %+v", st)
					}
				}, 3*time.Hour)
				decide(env, 4*time.Hour, "key_b", "APPROVE", "approved")
				sign(env, 5*time.Hour, "sig_TRANSFER")
			},
			want: "submitted policy approval-requested approved sign-requested:TRANSFER signed:TRANSFER broadcast:TRANSFER leg-confirmed:TRANSFER", endStatus: "confirmed"},
		{name: "first reject wins", legs: []string{"TRANSFER"}, decision: quorum(2), chain: []string{"confirmed"},
			script: func(env *testsuite.TestWorkflowEnvironment) {
				decide(env, time.Hour, "key_a", "APPROVE", "pending")
				decide(env, 2*time.Hour, "key_b", "REJECT", "rejected")
				// A signal after the outcome changes nothing.
				decide(env, 3*time.Hour, "key_c", "APPROVE", "approved")
			},
			want: "submitted policy approval-requested rejected:approver", endStatus: "rejected"},
		{name: "approval expires", legs: []string{"TRANSFER"}, decision: quorum(1), chain: []string{"confirmed"},
			script: func(env *testsuite.TestWorkflowEnvironment) {
				decide(env, 73*time.Hour, "key_late", "APPROVE", "approved")
			},
			want: "submitted policy approval-requested asked-store rejected:expired", endStatus: "rejected"},
		{name: "a decision whose signal was lost is found in the store at expiry", legs: []string{"TRANSFER"}, decision: quorum(1),
			chain: []string{"confirmed"}, outcome: "approved",
			script:    func(env *testsuite.TestWorkflowEnvironment) { sign(env, 80*time.Hour, "sig_TRANSFER") },
			want:      "submitted policy approval-requested asked-store approved sign-requested:TRANSFER signed:TRANSFER broadcast:TRANSFER leg-confirmed:TRANSFER",
			endStatus: "confirmed"},
		{name: "policy violation", legs: []string{"TRANSFER"}, decision: PolicyDecision{Violations: []policy.Violation{{Rule: "maxOrderUsd"}}}, chain: []string{"confirmed"},
			script: func(*testsuite.TestWorkflowEnvironment) {},
			want:   "submitted policy rejected:policy", endStatus: "rejected"},
		{name: "signing expires", legs: []string{"TRANSFER"}, decision: allowed, chain: []string{"confirmed"},
			script: func(env *testsuite.TestWorkflowEnvironment) { sign(env, 25*time.Hour, "sig_TRANSFER") },
			want:   "submitted policy sign-requested:TRANSFER failed:signing_expired", endStatus: "failed"},
		{name: "a signature for another request is not this one", legs: []string{"TRANSFER"}, decision: allowed, chain: []string{"confirmed"},
			script: func(env *testsuite.TestWorkflowEnvironment) {
				sign(env, time.Hour, "sig_OTHER")
				sign(env, 2*time.Hour, "sig_TRANSFER")
			},
			want: "submitted policy sign-requested:TRANSFER signed:TRANSFER broadcast:TRANSFER leg-confirmed:TRANSFER", endStatus: "confirmed"},
		{name: "the signer's refusal fails the order", legs: []string{"TRANSFER"}, decision: allowed, chain: []string{"confirmed"},
			script: func(env *testsuite.TestWorkflowEnvironment) {
				refuse(env, time.Hour, "sig_OTHER", "unknown_method")
				refuse(env, 2*time.Hour, "sig_TRANSFER", "destination_not_allowed")
				// A signature after the refusal changes nothing.
				sign(env, 3*time.Hour, "sig_TRANSFER")
			},
			want: "submitted policy sign-requested:TRANSFER failed:signer_refused:destination_not_allowed", endStatus: "failed"},
		{name: "a refused second leg fails the order after the first", legs: []string{"APPROVE", "SWAP"}, decision: allowed, chain: []string{"confirmed"},
			script: func(env *testsuite.TestWorkflowEnvironment) {
				sign(env, time.Minute, "sig_APPROVE")
				refuse(env, 2*time.Minute, "sig_SWAP", "fee_above_cap")
			},
			want: "submitted policy sign-requested:APPROVE signed:APPROVE broadcast:APPROVE leg-confirmed:APPROVE " +
				"sign-requested:SWAP failed:signer_refused:fee_above_cap", endStatus: "failed"},
		{name: "revert", legs: []string{"TRANSFER"}, decision: allowed, chain: []string{"pending", "failed"},
			script: func(env *testsuite.TestWorkflowEnvironment) { sign(env, time.Minute, "sig_TRANSFER") },
			want:   "submitted policy sign-requested:TRANSFER signed:TRANSFER broadcast:TRANSFER failed:tx_reverted", endStatus: "failed"},
		{name: "a leg stuck pending times out", legs: []string{"TRANSFER"}, decision: allowed, chain: []string{"pending"},
			script: func(env *testsuite.TestWorkflowEnvironment) { sign(env, time.Minute, "sig_TRANSFER") },
			want:   "submitted policy sign-requested:TRANSFER signed:TRANSFER broadcast:TRANSFER failed:tx_timeout", endStatus: "failed"},
		{name: "two legs run one after the other", legs: []string{"APPROVE", "SWAP"}, decision: allowed, chain: []string{"confirmed"},
			script: func(env *testsuite.TestWorkflowEnvironment) {
				sign(env, time.Minute, "sig_APPROVE")
				sign(env, 2*time.Minute, "sig_SWAP")
			},
			want: "submitted policy sign-requested:APPROVE signed:APPROVE broadcast:APPROVE leg-confirmed:APPROVE " +
				"sign-requested:SWAP signed:SWAP broadcast:SWAP leg-confirmed:SWAP", endStatus: "confirmed"},
		{name: "a leg the chain refuses for good fails the order", legs: []string{"TRANSFER"}, decision: allowed, chain: []string{"confirmed"},
			refused: map[string]string{"TRANSFER": "insufficient_funds"}, script: func(*testsuite.TestWorkflowEnvironment) {},
			want: "submitted policy sign-requested:TRANSFER failed:insufficient_funds", endStatus: "failed"},
		{name: "a second leg the chain refuses fails the order after the first", legs: []string{"APPROVE", "SWAP"}, decision: quorum(1),
			chain: []string{"confirmed"}, refused: map[string]string{"SWAP": "unsupported_asset"},
			script: func(env *testsuite.TestWorkflowEnvironment) {
				decide(env, time.Hour, "key_approver", "APPROVE", "approved")
				sign(env, 2*time.Hour, "sig_APPROVE")
			},
			want: "submitted policy approval-requested approved sign-requested:APPROVE signed:APPROVE broadcast:APPROVE leg-confirmed:APPROVE " +
				"sign-requested:SWAP failed:unsupported_asset", endStatus: "failed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestWorkflowEnvironment()
			env.RegisterWorkflowWithOptions(OrderLifecycle, workflow.RegisterOptions{Name: OrderWorkflow})
			f := &fakeOrder{decision: tc.decision, chain: tc.chain, outcome: tc.outcome, refused: tc.refused}
			f.register(env)
			tc.script(env)
			env.ExecuteWorkflow(OrderWorkflow, OrderInput{OrderID: "ord_1", CorrelationID: "c", Legs: tc.legs})
			if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
				t.Fatalf("completed %v, error %v", env.IsWorkflowCompleted(), env.GetWorkflowError())
			}
			var st OrderState
			if err := env.GetWorkflowResult(&st); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(f.calls, " "); got != tc.want {
				t.Fatalf("steps\n got %s\nwant %s", got, tc.want)
			}
			if string(st.Status) != tc.endStatus {
				t.Fatalf("status %s, want %s", st.Status, tc.endStatus)
			}
		})
	}
}

func TestPolicyDecisionUpdateAnswersWithTheWorkflowsDecision(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(OrderLifecycle, workflow.RegisterOptions{Name: OrderWorkflow})
	f := &fakeOrder{decision: PolicyDecision{Violations: []policy.Violation{{Rule: "destinationWhitelist", Message: "no"}}}, chain: []string{"confirmed"}}
	f.register(env)
	var got PolicyDecision
	var updateErr error
	done := false
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(UpdatePolicyDecision, "u1", &testsuite.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(err error) { updateErr = err },
			OnComplete: func(v any, err error) {
				done, updateErr = true, err
				if d, ok := v.(PolicyDecision); ok {
					got = d
				}
			},
		})
	}, 0)
	env.ExecuteWorkflow(OrderWorkflow, OrderInput{OrderID: "ord_1", Legs: []string{"TRANSFER"}})
	if env.GetWorkflowError() != nil || updateErr != nil || !done {
		t.Fatalf("workflow %v, update %v, done %v", env.GetWorkflowError(), updateErr, done)
	}
	if got.Allowed || len(got.Violations) != 1 || got.Violations[0].Rule != "destinationWhitelist" {
		t.Fatalf("decision %+v", got)
	}
}
