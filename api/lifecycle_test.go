package api

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentreasury/treasury/activities"
	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/chain/keys"
	"github.com/opentreasury/treasury/internal/policy"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
	"github.com/opentreasury/treasury/workflows"
)

// fakeWorkflows records what the API asks of Temporal.
type fakeWorkflows struct {
	mu         sync.Mutex
	decision   workflows.PolicyDecision
	approvals  []workflows.ApprovalDecision
	signatures []workflows.Signature
	refusals   []workflows.Refusal
	// submissions are the decisions given, by submission id, as Temporal keeps them.
	submissions map[string]workflows.PolicyDecision
	// loseAnswer, when set, runs after a submission is taken and its error is returned
	// instead of the decision: the workflow got it, the caller never heard.
	loseAnswer func() error
	// pending: the workflows start, and their policy does not decide within the wait;
	// notStarted: Temporal does not start them within it. starts counts Start's calls (a
	// worker starting queued orders), which answer startErr.
	pending, notStarted bool
	starts              int
	startErr            error
	// decidedMeanwhile, when set, runs as a pending submit's wait ends: the workflow
	// decides between the end of the wait and the answer's read of the order.
	decidedMeanwhile func(orderID string)
}

func (f *fakeWorkflows) Submit(_ context.Context, s workflows.Submission) (workflows.PolicyDecision, error) {
	submission := s.SubmissionID
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.notStarted {
		// Temporal never heard of it.
		return workflows.PolicyDecision{}, fmt.Errorf("%w: context deadline exceeded", workflows.ErrNotStarted)
	}
	if submission != "" {
		if f.submissions == nil {
			f.submissions = map[string]workflows.PolicyDecision{}
		}
		f.submissions[submission] = f.decision
	}
	if lose := f.loseAnswer; lose != nil {
		f.loseAnswer = nil
		return workflows.PolicyDecision{}, lose()
	}
	if f.pending {
		if f.decidedMeanwhile != nil {
			f.decidedMeanwhile(s.OrderID)
		}
		return workflows.PolicyDecision{}, workflows.ErrDecisionPending
	}
	return f.decision, nil
}

// Start starts nothing: the fake's workflows are started by Submit.
func (f *fakeWorkflows) Start(context.Context, workflows.Submission) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts++
	return f.startErr
}

func (f *fakeWorkflows) SubmitOutcome(_ context.Context, _, submission string) (workflows.PolicyDecision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pending {
		// As Temporal under load: the wait ends before it says which submission it knows.
		return workflows.PolicyDecision{}, workflows.ErrDecisionPending
	}
	d, ok := f.submissions[submission]
	if !ok {
		return d, workflows.ErrUnknownSubmission
	}
	return d, nil
}

func (f *fakeWorkflows) SignalApproval(_ context.Context, _ string, d workflows.ApprovalDecision) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.approvals = append(f.approvals, d)
	return nil
}

func (f *fakeWorkflows) SignalSignature(_ context.Context, _ string, s workflows.Signature) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.signatures = append(f.signatures, s)
	return nil
}

func (f *fakeWorkflows) SignalRefusal(_ context.Context, _ string, r workflows.Refusal) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refusals = append(f.refusals, r)
	return nil
}

func newLifecycleFixture(t *testing.T) (*fixture, *fakeWorkflows, string) {
	t.Helper()
	return newLifecycleFixtureOn(t, storetest.NewSQLite(t))
}

// newLifecycleFixtureOn is newLifecycleFixture on a store of the test's choice.
func newLifecycleFixtureOn(t *testing.T, s *store.Store) (*fixture, *fakeWorkflows, string) {
	t.Helper()
	f := newFixtureOn(t, s)
	fw := &fakeWorkflows{decision: workflows.PolicyDecision{Allowed: true}}
	f.handler = NewRouter(Config{Store: f.store, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Service: &service.Service{Store: f.store, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Workflows: fw}})
	r := f.post(t, "/api/v1/payments", f.creds.Keys["pay"].SK,
		`{"walletId":"`+f.creds.Wallets[0].ID+`","asset":"USDC","amount":"20000","destination":{"address":"0x1111111111111111111111111111111111111111"}}`)
	return f, fw, decodeOrder(t, r)["id"].(string)
}

func TestSubmitAnswers(t *testing.T) {
	f, fw, id := newLifecycleFixture(t)
	fw.decision = workflows.PolicyDecision{Violations: []policy.Violation{{Rule: "maxOrderUsd", Message: "too much"}}}
	r := f.post(t, "/api/v1/payments/"+id+"/submit", f.creds.Keys["pay"].SK, "{}")
	r.wantProblem(t, 422, apitypes.CodePolicyViolation)
	if len(r.problem.Violations) != 1 || r.problem.Violations[0].Rule != "maxOrderUsd" {
		t.Fatalf("violations %s", r.body)
	}
	// Refused, the order is no draft any more: it is not submitted again.
	f.post(t, "/api/v1/payments/"+id+"/submit", f.creds.Keys["pay"].SK, "{}").wantProblem(t, 409, apitypes.CodeConflict)
	fw.decision = workflows.PolicyDecision{Allowed: true}
	id = decodeOrder(t, f.post(t, "/api/v1/payments", f.creds.Keys["pay"].SK,
		`{"walletId":"`+f.creds.Wallets[0].ID+`","asset":"USDC","amount":"20000","destination":{"address":"0x1111111111111111111111111111111111111111"}}`))["id"].(string)
	if r := f.post(t, "/api/v1/payments/"+id+"/submit", f.creds.Keys["pay"].SK, "{}"); r.status != 202 || decodeOrder(t, r)["policyDecision"] != "allowed" {
		t.Fatalf("allowed submit %d %s", r.status, r.body)
	}
	f.post(t, "/api/v1/payments/"+id+"/submit", f.creds.Keys["pay"].Approve, "{}").wantProblem(t, 403, apitypes.CodePermissionDenied)
	f.post(t, "/api/v1/payments/"+id+"/submit", f.creds.OtherOrg.Keys["pay"]["sk"], "{}").wantProblem(t, 404, apitypes.CodeNotFound)
	f.post(t, "/api/v1/trade-orders/"+id+"/submit", f.creds.Keys["trade"].SK, "{}").wantProblem(t, 404, apitypes.CodeNotFound)

	// Without Temporal the API says so, retry-safe.
	f.handler = NewRouter(Config{Store: f.store, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Service: &service.Service{Store: f.store, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}})
	other := decodeOrder(t, f.post(t, "/api/v1/payments", f.creds.Keys["pay"].SK,
		`{"walletId":"`+f.creds.Wallets[0].ID+`","asset":"USDC","amount":"1","destination":{"address":"0x1111111111111111111111111111111111111111"}}`))["id"].(string)
	f.post(t, "/api/v1/payments/"+other+"/submit", f.creds.Keys["pay"].SK, "{}").wantProblem(t, 503, apitypes.CodeUnavailable)
}

// A submit that reached its workflow but whose answer was lost with its Idempotency-Key's
// record (the process died before storing it, or it expired), retried with that key once
// the order has moved on, gets that submission's outcome: 202, not 409. Another key, or
// none, still gets 409.
func TestARetriedSubmitGetsItsFirstOutcome(t *testing.T) {
	f, _, id := newLifecycleFixture(t)
	key := []string{"Idempotency-Key", "submit-once"}
	if r := f.post(t, "/api/v1/payments/"+id+"/submit", f.creds.Keys["pay"].SK, "{}", key...); r.status != 202 {
		t.Fatalf("the submission: %d %s", r.status, r.body)
	}
	// Its record expires (as if a day had passed).
	if _, err := f.store.DeleteExpired(context.Background(), store.ExpiringIdempotencyRecords, time.Now().Add(48*time.Hour), 100, nil); err != nil {
		t.Fatal(err)
	}
	r := f.post(t, "/api/v1/payments/"+id+"/submit", f.creds.Keys["pay"].SK, "{}", key...)
	if r.status != 202 || r.header.Get(replayedHeader) != "" || decodeOrder(t, r)["status"] != "submitted" {
		t.Fatalf("the retried submission: %d %v %s", r.status, r.header, r.body)
	}
	f.post(t, "/api/v1/payments/"+id+"/submit", f.creds.Keys["pay"].SK, "{}", "Idempotency-Key", "another").wantProblem(t, 409, apitypes.CodeConflict)
	f.post(t, "/api/v1/payments/"+id+"/submit", f.creds.Keys["pay"].SK, "{}").wantProblem(t, 409, apitypes.CodeConflict)
}

func TestApprovalDecisionsAreGuarded(t *testing.T) {
	f, fw, id := newLifecycleFixture(t)
	ctx := context.Background()
	item := &store.ApprovalItem{ID: "apr_test", OrgID: f.creds.OrgID, App: "pay", Domain: "payment", OrderID: id, Status: "pending",
		RequiredApprovals: 2, Reason: "r", PayloadHash: "h", Summary: "{}", CreatedBy: "key_maker",
		CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}
	if err := f.store.CreateApprovalItem(ctx, item); err != nil {
		t.Fatal(err)
	}
	decide := "/api/v1/approvals/payment/apr_test/decide"
	approve := `{"decision":"APPROVE"}`
	f.post(t, decide, f.creds.Keys["pay"].SK, approve).wantProblem(t, 403, apitypes.CodeMakerChecker)
	f.post(t, decide, f.creds.Keys["pay"].Read, approve).wantProblem(t, 403, apitypes.CodePermissionDenied)
	f.post(t, decide, f.creds.Keys["trade"].Approve, approve).wantProblem(t, 403, apitypes.CodePermissionDenied)
	f.post(t, decide, f.creds.OtherOrg.Keys["pay"]["sk"], approve).wantProblem(t, 404, apitypes.CodeNotFound)
	f.post(t, "/api/v1/approvals/trade/apr_test/decide", f.creds.Keys["trade"].SK, approve).wantProblem(t, 404, apitypes.CodeNotFound)
	f.post(t, decide, f.creds.Keys["pay"].Approve, `{"decision":"MAYBE"}`).wantProblem(t, 422, apitypes.CodeValidationFailed)
	f.post(t, decide, f.creds.Keys["pay"].Approve, `{"decision":"APPROVE","Comment":"x"}`).wantProblem(t, 422, apitypes.CodeValidationFailed)
	if r := f.post(t, decide, f.creds.Keys["pay"].Approve, `{"decision":"APPROVE","comment":"fine"}`); r.status != 202 ||
		!strings.Contains(string(r.body), `"status":"pending"`) {
		t.Fatalf("approve %d %s", r.status, r.body)
	}
	// The same decision again is a retry: answered again, and signalled again.
	if r := f.post(t, decide, f.creds.Keys["pay"].Approve, approve); r.status != 202 {
		t.Fatalf("retried decision %d %s", r.status, r.body)
	}
	f.post(t, decide, f.creds.Keys["pay"].Approve, `{"decision":"REJECT"}`).wantProblem(t, 409, apitypes.CodeConflict)
	if r := f.post(t, decide, f.creds.SecondApprover["pay"], `{"decision":"REJECT"}`); r.status != 202 ||
		!strings.Contains(string(r.body), `"status":"rejected"`) {
		t.Fatalf("second approver %d %s", r.status, r.body)
	}
	// The store decided the item: the first REJECT closes it, for everyone.
	third := "tk_thirdapproverthirdapproverthirdapprover00"
	if err := f.store.CreateAPIKey(ctx, &store.APIKey{ID: "key_third", OrgID: f.creds.OrgID, App: "pay", Kind: "tk",
		Actions: "approve", SecretHash: hashOf(third), SecretHint: "tk_", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	f.post(t, decide, third, approve).wantProblem(t, 409, apitypes.CodeConflict)
	if len(fw.approvals) != 3 || fw.approvals[0].Outcome != "pending" || fw.approvals[1].Outcome != "pending" ||
		fw.approvals[2].Outcome != "rejected" || fw.approvals[2].Decision != "REJECT" {
		t.Fatalf("signals %+v", fw.approvals)
	}
	audit, _ := f.store.ListAudit(ctx, f.creds.OrgID, []string{"pay"}, nil, "", 10)
	decisions := 0
	for _, a := range audit {
		if strings.HasPrefix(a.Action, "approval.") {
			decisions++
		}
	}
	if decisions != 2 {
		t.Fatalf("want an audit record per stored decision, got %d", decisions)
	}
	list := f.do(t, "GET", "/api/v1/approvals?status=rejected", f.creds.Keys["pay"].Approve, nil)
	if !strings.Contains(string(list.body), `"apr_test"`) || !strings.Contains(string(list.body), `"comment":"fine"`) {
		t.Fatalf("list %s", list.body)
	}
	// The list is an approver's queue: without status it holds pending items only, and a
	// decided item takes status=all (or its own status) to find.
	if queue := f.do(t, "GET", "/api/v1/approvals", f.creds.Keys["pay"].Approve, nil); queue.status != 200 || strings.Contains(string(queue.body), "apr_test") {
		t.Fatalf("the default list holds a rejected item: %d %s", queue.status, queue.body)
	}
	if all := f.do(t, "GET", "/api/v1/approvals?status=all", f.creds.Keys["pay"].Approve, nil); !strings.Contains(string(all.body), `"apr_test"`) {
		t.Fatalf("status=all misses the rejected item: %s", all.body)
	}
	f.do(t, "GET", "/api/v1/approvals?status=decided", f.creds.Keys["pay"].Approve, nil).wantProblem(t, 422, apitypes.CodeValidationFailed)
	if other := f.do(t, "GET", "/api/v1/approvals?status=all", f.creds.OtherOrg.Keys["pay"]["sk"], nil); strings.Contains(string(other.body), "apr_test") {
		t.Fatal("another organisation lists our approvals")
	}
	if other := f.do(t, "GET", "/api/v1/approvals?status=all", f.creds.Keys["trade"].SK, nil); strings.Contains(string(other.body), "apr_test") {
		t.Fatal("another app lists our approvals")
	}
	f.post(t, decide, f.creds.Keys["treasury"].SK, approve).wantProblem(t, 403, apitypes.CodePermissionDenied)
}

// manualSigningRequest stores a pending signing request of the pay order orderID for the
// seeded manual ethereum wallet, whose key (from the credentials) it answers with.
func manualSigningRequest(t *testing.T, f *fixture, orderID, id, digest string) (*keys.Key, seed.Wallet) {
	t.Helper()
	var manual seed.Wallet
	for _, w := range f.creds.Wallets {
		if !w.AutoSign && w.Chain == "ethereum" {
			manual = w
		}
	}
	req := &store.SigningRequest{ID: id, OrgID: f.creds.OrgID, App: "pay", Domain: "payment", OrderID: orderID, Position: 0,
		Leg: "TRANSFER", WalletID: manual.ID, Chain: "ethereum", UnsignedTx: "{}", Scheme: manual.Scheme, Digest: digest, Status: "pending",
		CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}
	if _, err := f.store.CreateSigningRequest(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	key, err := keys.Parse(manual.Scheme, manual.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	return key, manual
}

func TestSignaturesAreVerified(t *testing.T) {
	f, fw, id := newLifecycleFixture(t)
	ctx := context.Background()
	digest := strings.Repeat("ab", 32)
	key, manual := manualSigningRequest(t, f, id, "sig_test", digest)
	d, _ := hex.DecodeString(digest)
	sign := func(k *keys.Key) string {
		sig, err := k.Sign(d)
		if err != nil {
			t.Fatal(err)
		}
		return base64.StdEncoding.EncodeToString(sig)
	}
	other, _ := keys.Generate(manual.Scheme)
	good, bad := sign(key), sign(other)
	// v as 27/28, as some signers write it, is the same signature.
	raw, _ := base64.StdEncoding.DecodeString(good)
	raw[64] += 27
	good27 := base64.StdEncoding.EncodeToString(raw)
	url := "/api/v1/signing-requests/sig_test/signature"
	body := func(sig string) string { return fmt.Sprintf(`{"signature":%q}`, sig) }
	f.post(t, url, f.creds.Keys["pay"].Sign, body(bad)).wantProblem(t, 422, apitypes.CodeInvalidSignature)
	f.post(t, url, f.creds.Keys["pay"].Sign, body("not base64")).wantProblem(t, 422, apitypes.CodeInvalidSignature)
	f.post(t, url, f.creds.Keys["pay"].Sign, body(good[:40])).wantProblem(t, 422, apitypes.CodeInvalidSignature)
	f.post(t, url, f.creds.Keys["pay"].Read, body(good)).wantProblem(t, 403, apitypes.CodePermissionDenied)
	f.post(t, url, f.creds.Keys["trade"].Sign, body(good)).wantProblem(t, 404, apitypes.CodeNotFound)
	f.post(t, url, f.creds.OtherOrg.Keys["pay"]["sk"], body(good)).wantProblem(t, 404, apitypes.CodeNotFound)
	if len(fw.signatures) != 0 {
		t.Fatal("a refused signature reached the workflow")
	}
	if r := f.post(t, url, f.creds.Keys["pay"].Sign, body(good27)); r.status != 202 {
		t.Fatalf("good signature %d %s", r.status, r.body)
	}
	if len(fw.signatures) != 1 || fw.signatures[0].SigningRequestID != "sig_test" {
		t.Fatalf("signals %+v", fw.signatures)
	}
	if r := f.do(t, "GET", "/api/v1/signing-requests/sig_test", f.creds.Keys["pay"].Read, nil); r.status != 200 {
		t.Fatalf("get %d", r.status)
	}
	if err := f.store.SetSigningRequestStatus(ctx, "sig_test", "expired", nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	f.post(t, url, f.creds.Keys["pay"].Sign, body(good)).wantProblem(t, 409, apitypes.CodeConflict)
}

// A signer's refusal reaches the workflow with its reason, from the credentials that may
// sign, while the request is pending; a reason that is not a check's name is refused.
func TestSignersRefusalsAreRecorded(t *testing.T) {
	f, fw, id := newLifecycleFixture(t)
	manualSigningRequest(t, f, id, "sig_test", strings.Repeat("ab", 32))
	url := "/api/v1/signing-requests/sig_test/refusal"
	good := `{"reason":"destination_not_allowed","detail":"0x2222… is not an allowed destination"}`
	f.post(t, url, f.creds.Keys["pay"].Sign, `{"reason":"Not A Check"}`).wantProblem(t, 422, apitypes.CodeValidationFailed)
	f.post(t, url, f.creds.Keys["pay"].Sign, `{"reason":"x","extra":1}`).wantProblem(t, 422, apitypes.CodeValidationFailed)
	f.post(t, url, f.creds.Keys["pay"].Sign, `{"reason":"x","detail":"`+strings.Repeat("d", 1001)+`"}`).wantProblem(t, 422, apitypes.CodeValidationFailed)
	f.post(t, url, f.creds.Keys["pay"].Read, good).wantProblem(t, 403, apitypes.CodePermissionDenied)
	f.post(t, url, f.creds.Keys["trade"].Sign, good).wantProblem(t, 404, apitypes.CodeNotFound)
	f.post(t, url, f.creds.OtherOrg.Keys["pay"]["sk"], good).wantProblem(t, 404, apitypes.CodeNotFound)
	if len(fw.refusals) != 0 {
		t.Fatal("a refused refusal reached the workflow")
	}
	if r := f.post(t, url, f.creds.Keys["pay"].Sign, good); r.status != 202 {
		t.Fatalf("refusal %d %s", r.status, r.body)
	}
	if len(fw.refusals) != 1 || fw.refusals[0].SigningRequestID != "sig_test" || fw.refusals[0].Reason != "destination_not_allowed" ||
		!strings.Contains(fw.refusals[0].Detail, "0x2222") {
		t.Fatalf("signals %+v", fw.refusals)
	}
	audit, err := f.store.ListAudit(context.Background(), f.creds.OrgID, []string{"pay"}, nil, "", 10)
	if err != nil || len(audit) == 0 || audit[0].Action != "signing_request.refused" || !strings.Contains(audit[0].Details, "destination_not_allowed") {
		t.Fatalf("audit %+v (%v)", audit, err)
	}
	if err := f.store.SetSigningRequestStatus(context.Background(), "sig_test", "refused", nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	f.post(t, url, f.creds.Keys["pay"].Sign, good).wantProblem(t, 409, apitypes.CodeConflict)
}

// Signing requests reach only their own app: the treasury sk_ (in the dev credentials), a
// treasury tk_ with sign but no wallets, or another app's signer neither list, read nor
// sign a pay request (404, nothing signalled); a device key (a treasury tk_ with sign,
// restricted to the wallet) does, and one restricted to another wallet does not. The list
// shows pending requests unless asked for another status.
func TestSigningRequestsReachOnlyTheirOwnApp(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		f, fw, id := newLifecycleFixtureOn(t, s)
		ctx := context.Background()
		digest := strings.Repeat("cd", 32)
		key, manual := manualSigningRequest(t, f, id, "sig_reach", digest)
		other := f.creds.Wallets[0] // ethereum, autoSign: another wallet than the request's
		d, _ := hex.DecodeString(digest)
		raw, err := key.Sign(d)
		if err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf(`{"signature":%q}`, base64.StdEncoding.EncodeToString(raw))
		treasury := f.creds.Keys["treasury"].SK
		device := func(wallet string) string {
			return f.newKey(t, treasury, `{"kind":"tk","actions":["sign"],"resourceIds":["`+wallet+`"]}`).Secret
		}
		url := "/api/v1/signing-requests/sig_reach"
		for name, token := range map[string]string{
			"the treasury sk_":                    treasury,
			"a treasury tk_ with sign, no wallet": f.newKey(t, treasury, `{"kind":"tk","actions":["sign","read"]}`).Secret,
			"a device key of another wallet":      device(other.ID),
			"trade's signer":                      f.creds.Keys["trade"].Sign,
		} {
			f.do(t, "GET", url, token, nil).wantProblem(t, 404, apitypes.CodeNotFound)
			f.post(t, url+"/signature", token, body).wantProblem(t, 404, apitypes.CodeNotFound)
			if list := f.do(t, "GET", "/api/v1/signing-requests?status=all", token, nil); strings.Contains(string(list.body), "sig_reach") {
				t.Fatalf("%s lists another app's signing request: %s", name, list.body)
			}
		}
		if len(fw.signatures) != 0 {
			t.Fatalf("a signature from beyond the request's app reached the workflow: %+v", fw.signatures)
		}
		mine := device(manual.ID)
		if list := f.do(t, "GET", "/api/v1/signing-requests", mine, nil); !strings.Contains(string(list.body), "sig_reach") {
			t.Fatalf("the wallet's device does not list the request: %d %s", list.status, list.body)
		}
		if r := f.post(t, url+"/signature", mine, body); r.status != 202 || len(fw.signatures) != 1 {
			t.Fatalf("the wallet's device signs: %d %s, signals %+v", r.status, r.body, fw.signatures)
		}

		// The list is a signer's queue: pending by default, any status on request.
		if err := f.store.SetSigningRequestStatus(ctx, "sig_reach", "signed", &body, time.Now()); err != nil {
			t.Fatal(err)
		}
		pay := f.creds.Keys["pay"].Sign
		if queue := f.do(t, "GET", "/api/v1/signing-requests", pay, nil); queue.status != 200 || strings.Contains(string(queue.body), "sig_reach") {
			t.Fatalf("the default list holds a signed request: %d %s", queue.status, queue.body)
		}
		for _, status := range []string{"all", "signed"} {
			if r := f.do(t, "GET", "/api/v1/signing-requests?status="+status, pay, nil); !strings.Contains(string(r.body), "sig_reach") {
				t.Fatalf("status=%s misses the signed request: %s", status, r.body)
			}
		}
		f.do(t, "GET", "/api/v1/signing-requests?status=done", pay, nil).wantProblem(t, 422, apitypes.CodeValidationFailed)
	})
}

// One person is one approver: two bots a person made, or their session, decide an item
// once between them. The second is told so (409 already_decided, naming the credential
// that decided) and nothing is recorded; the quorum counts people, a seeded key with no
// person behind it as one of its own; each decision names its credential and its person.
// An item beyond the caller's reach is 404 before maker-checker is looked at.
func TestOnePersonIsOneApprover(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		f, fw, id := newLifecycleFixtureOn(t, s)
		ctx := context.Background()
		u := matrixPerson(t, f, f.creds.OrgID, auth.RoleMember, map[string]string{"pay": "read,write,approve,developer"}, "-")
		session := sessionFor(t, f, u)
		m := signedIn{token: session, csrf: auth.CSRFToken(session), userID: u.ID}
		bot := func(body string) createdKey {
			t.Helper()
			var k createdKey
			if r := f.as(t, m, "POST", "/developer/api-keys?app=pay", body); r.status != 201 || json.Unmarshal(r.body, &k) != nil {
				t.Fatalf("the person's key: %d %s", r.status, r.body)
			}
			return k
		}
		first, second := bot(`{"kind":"tk","actions":["approve"]}`), bot(`{"kind":"tk","actions":["approve"]}`)
		item := &store.ApprovalItem{ID: "apr_people", OrgID: f.creds.OrgID, App: "pay", Domain: "payment", OrderID: id, Status: "pending",
			RequiredApprovals: 2, Reason: "r", PayloadHash: "h", Summary: "{}", CreatedBy: "key_maker",
			CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}
		if err := f.store.CreateApprovalItem(ctx, item); err != nil {
			t.Fatal(err)
		}
		decide, approve := "/api/v1/approvals/payment/apr_people/decide", `{"decision":"APPROVE"}`
		if r := f.post(t, decide, first.Secret, approve); r.status != 202 {
			t.Fatalf("the person's first bot: %d %s", r.status, r.body)
		}
		for name, refused := range map[string]response{
			"the person's second bot": f.post(t, decide, second.Secret, approve),
			"the person's session":    f.as(t, m, "POST", decide, approve),
		} {
			refused.wantProblem(t, 409, apitypes.CodeAlreadyDecided)
			if !strings.Contains(refused.problem.Detail, first.ID) {
				t.Fatalf("%s: the refusal does not name the credential that decided: %s", name, refused.body)
			}
		}
		// The first bot again is a retry, answered as before.
		if r := f.post(t, decide, first.Secret, approve); r.status != 202 {
			t.Fatalf("a retry of the first bot: %d %s", r.status, r.body)
		}
		it, ds, err := f.store.ApprovalItem(ctx, f.creds.OrgID, "apr_people")
		if err != nil || it.Status != "pending" || len(ds) != 1 || ds[0].DecidedBy != first.ID || ds[0].DecidedByUser != u.ID {
			t.Fatalf("after one person's three tries: item %+v decisions %+v %v", it, ds, err)
		}
		// A seeded key, made by no person, is an approver of its own: the quorum of two.
		r := f.post(t, decide, f.creds.Keys["pay"].Approve, approve)
		if r.status != 202 || !strings.Contains(string(r.body), `"status":"approved"`) {
			t.Fatalf("a second approver: %d %s", r.status, r.body)
		}
		var decided struct {
			Decisions []apitypes.ApprovalDecision `json:"decisions"`
		}
		_ = json.Unmarshal(r.body, &decided)
		if len(decided.Decisions) != 2 || decided.Decisions[0].DecidedBy != first.ID || decided.Decisions[0].DecidedByUser == nil ||
			*decided.Decisions[0].DecidedByUser != u.ID || !strings.HasPrefix(decided.Decisions[1].DecidedBy, "key_") ||
			decided.Decisions[1].DecidedByUser != nil {
			t.Fatalf("decisions %s", r.body)
		}
		var signalled []string
		for _, d := range fw.approvals {
			signalled = append(signalled, d.DecidedBy+"/"+d.DecidedByUser)
		}
		if len(signalled) != 3 || signalled[0] != first.ID+"/"+u.ID || signalled[2] != decided.Decisions[1].DecidedBy+"/" {
			t.Fatalf("signals %v: the first bot (and its retry) and the seeded key", signalled)
		}

		// Reach before maker-checker: the person's own order, seen through a key of theirs
		// restricted to another wallet, is not there at all.
		mine := decodeOrder(t, f.as(t, m, "POST", "/api/v1/payments", `{"walletId":"`+f.creds.Wallets[0].ID+
			`","asset":"USDC","amount":"5","destination":{"address":"0x1111111111111111111111111111111111111111"}}`))["id"].(string)
		if err := f.store.CreateApprovalItem(ctx, &store.ApprovalItem{ID: "apr_mine", OrgID: f.creds.OrgID, App: "pay", Domain: "payment",
			OrderID: mine, Status: "pending", RequiredApprovals: 1, Reason: "r", PayloadHash: "h", Summary: "{}", CreatedBy: u.ID,
			CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		elsewhere := bot(`{"kind":"tk","actions":["approve"],"resourceIds":["` + f.creds.Wallets[1].ID + `"]}`)
		f.post(t, "/api/v1/approvals/payment/apr_mine/decide", elsewhere.Secret, approve).wantProblem(t, 404, apitypes.CodeNotFound)
		f.post(t, "/api/v1/approvals/payment/apr_mine/decide", first.Secret, approve).wantProblem(t, 403, apitypes.CodeMakerChecker)
	})
}

// A submit whose workflow is durably started but whose policy has not decided within the
// wait is accepted, not timed out: 202 with policyDecision pending and the order submitted
// (stored so, with its one Order.Submitted), as a later read and a retry agree; a submit
// decided in time says allowed.
func TestASubmitWhoseDecisionIsLateIsAccepted(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		f, fw, id := newLifecycleFixtureOn(t, s)
		fw.pending = true
		key := []string{"Idempotency-Key", "late-decision"}
		r := f.post(t, "/api/v1/payments/"+id+"/submit", f.creds.Keys["pay"].SK, "{}", key...)
		o := decodeOrder(t, r)
		if r.status != 202 || o["policyDecision"] != "pending" || o["status"] != "submitted" || o["submittedAt"] == nil || o["policyVersion"] == nil {
			t.Fatalf("a submit whose decision is late: %d %s", r.status, r.body)
		}
		if got := decodeOrder(t, f.do(t, "GET", "/api/v1/payments/"+id, f.creds.Keys["pay"].Read, nil)); got["status"] != "submitted" {
			t.Fatalf("read after the answer: %v", got["status"])
		}
		evs, err := f.store.OrderEvents(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		submitted := 0
		for _, ev := range evs {
			if ev.Event == "Order.Submitted" {
				submitted++
			}
		}
		if submitted != 1 {
			t.Fatalf("Order.Submitted %d times", submitted)
		}
		// Its start stays queued until the workflow runs, not due before its grace: a
		// worker leaves it to the workflow. The workflow's first step finds the order
		// submitted (nothing changes, nothing is emitted) and forgets the queued start.
		if q, err := f.store.QueuedOrderStart(context.Background(), id); err != nil || q == nil {
			t.Fatalf("the queued start before the workflow ran: %+v %v", q, err)
		}
		svc := &service.Service{Store: f.store, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Workflows: fw}
		if n, err := svc.StartQueuedOrders(context.Background(), 10); err != nil || n != 0 || fw.starts != 0 {
			t.Fatalf("a worker within the grace: started %d, %v, starts %d", n, err, fw.starts)
		}
		if res, err := f.store.MarkSubmitted(context.Background(), id, "corr-workflow", time.Now()); err != nil || res.Applied {
			t.Fatalf("the workflow's step after the service's: %+v %v", res, err)
		}
		if q, err := f.store.QueuedOrderStart(context.Background(), id); err != nil || q != nil {
			t.Fatalf("the queued start once the workflow ran: %+v %v", q, err)
		}
		if again := f.post(t, "/api/v1/payments/"+id+"/submit", f.creds.Keys["pay"].SK, "{}", key...); again.status != 202 ||
			again.header.Get(replayedHeader) != "true" || decodeOrder(t, again)["policyDecision"] != "pending" {
			t.Fatalf("the retry: %d %v %s", again.status, again.header, again.body)
		}
		f.post(t, "/api/v1/payments/"+id+"/submit", f.creds.Keys["pay"].SK, "{}").wantProblem(t, 409, apitypes.CodeConflict)
		// Another submission of the order, while Temporal still has no decision, is a
		// conflict: the order names the submission that moved it.
		f.post(t, "/api/v1/payments/"+id+"/submit", f.creds.Keys["pay"].SK, "{}", "Idempotency-Key", "another").wantProblem(t, 409, apitypes.CodeConflict)

		fw.pending = false
		other := decodeOrder(t, f.post(t, "/api/v1/payments", f.creds.Keys["pay"].SK,
			`{"walletId":"`+f.creds.Wallets[0].ID+`","asset":"USDC","amount":"1","destination":{"address":"0x1111111111111111111111111111111111111111"}}`))
		if r := f.post(t, "/api/v1/payments/"+other["id"].(string)+"/submit", f.creds.Keys["pay"].SK, "{}"); r.status != 202 ||
			decodeOrder(t, r)["policyDecision"] != "allowed" {
			t.Fatalf("a submit decided in time: %d %s", r.status, r.body)
		}
	})
}

// A submit whose wait ends just before its workflow records the policy's decision answers
// with the decision the order holds when the answer is read: allowed beside the order's
// status, or the refusal, never "pending" for an order the policy has already decided.
func TestASubmitDecidedAsItsWaitEndsAnswersTheDecision(t *testing.T) {
	f, fw, allowed := newLifecycleFixture(t)
	fw.pending = true
	steps := &activities.Orders{Store: f.store}
	fw.decidedMeanwhile = func(orderID string) {
		if _, err := steps.EvaluatePolicy(context.Background(), workflows.StepInput{OrderID: orderID, CorrelationID: "corr-workflow"}); err != nil {
			t.Error(err)
		}
	}
	r := f.post(t, "/api/v1/payments/"+allowed+"/submit", f.creds.Keys["pay"].SK, "{}")
	if o := decodeOrder(t, r); r.status != 202 || o["policyDecision"] != "allowed" || o["status"] != "submitted" {
		t.Fatalf("a submit decided (allowed) as its wait ended: %d %s", r.status, r.body)
	}
	refused := decodeOrder(t, f.post(t, "/api/v1/payments", f.creds.Keys["pay"].SK,
		`{"walletId":"`+f.creds.Wallets[0].ID+`","asset":"USDC","amount":"1","destination":{"address":"0x9999999999999999999999999999999999999999"}}`))["id"].(string)
	r = f.post(t, "/api/v1/payments/"+refused+"/submit", f.creds.Keys["pay"].SK, "{}")
	r.wantProblem(t, 422, apitypes.CodePolicyViolation)
	if len(r.problem.Violations) != 1 || r.problem.Violations[0].Rule != "destinationWhitelist" {
		t.Fatalf("the refusal's violations: %s", r.body)
	}
	// Undecided when the answer is read, it is pending.
	fw.decidedMeanwhile = nil
	undecided := decodeOrder(t, f.post(t, "/api/v1/payments", f.creds.Keys["pay"].SK,
		`{"walletId":"`+f.creds.Wallets[0].ID+`","asset":"USDC","amount":"1","destination":{"address":"0x9999999999999999999999999999999999999999"}}`))["id"].(string)
	if r := f.post(t, "/api/v1/payments/"+undecided+"/submit", f.creds.Keys["pay"].SK, "{}"); r.status != 202 || decodeOrder(t, r)["policyDecision"] != "pending" {
		t.Fatalf("a submit undecided when answered: %d %s", r.status, r.body)
	}
}

// A submission whose workflow Temporal does not start within the wait is accepted and
// queued in the database, not lost and not refused: 202 pending, the order submitted, its
// start due at once. A worker starts it and forgets it; a start that fails stays queued,
// claimed for a minute, then due again, with its error.
func TestASubmissionTemporalDoesNotStartIsQueuedForAWorker(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		f, fw, id := newLifecycleFixtureOn(t, s)
		ctx := context.Background()
		fw.notStarted = true
		r := f.post(t, "/api/v1/payments/"+id+"/submit", f.creds.Keys["pay"].SK, "{}", "Idempotency-Key", "queued-1")
		if o := decodeOrder(t, r); r.status != 202 || o["policyDecision"] != "pending" || o["status"] != "submitted" {
			t.Fatalf("a submit Temporal did not start: %d %s", r.status, r.body)
		}
		queued, err := f.store.QueuedOrderStart(ctx, id)
		if err != nil || queued == nil || queued.SubmissionID == "" || queued.CorrelationID == "" {
			t.Fatalf("the queued start: %+v %v", queued, err)
		}
		now := time.Now()
		if queued.DueAt.After(now) {
			t.Fatalf("a start the submit could not make is due at %v, after now", queued.DueAt)
		}
		// Its answer lost with its key's record (expired), the submission's retry is told
		// it is pending, from the order's own record of it, though Temporal never heard of
		// it; another submission of the order is a conflict.
		if _, err := f.store.DeleteExpired(ctx, store.ExpiringIdempotencyRecords, now.Add(48*time.Hour), 100, nil); err != nil {
			t.Fatal(err)
		}
		if again := f.post(t, "/api/v1/payments/"+id+"/submit", f.creds.Keys["pay"].SK, "{}", "Idempotency-Key", "queued-1"); again.status != 202 ||
			again.header.Get(replayedHeader) != "" || decodeOrder(t, again)["policyDecision"] != "pending" {
			t.Fatalf("the retry of a queued submission: %d %v %s", again.status, again.header, again.body)
		}
		f.post(t, "/api/v1/payments/"+id+"/submit", f.creds.Keys["pay"].SK, "{}", "Idempotency-Key", "queued-2").wantProblem(t, 409, apitypes.CodeConflict)
		svc := &service.Service{Store: f.store, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Workflows: fw, Now: func() time.Time { return now }}
		// The first start fails, and the start stays queued for the next claim.
		fw.startErr = errors.New("temporal: unavailable")
		if n, err := svc.StartQueuedOrders(ctx, 10); err != nil || n != 0 || fw.starts != 1 {
			t.Fatalf("a failing start: started %d, %v, starts %d", n, err, fw.starts)
		}
		if q, _ := f.store.QueuedOrderStart(ctx, id); q == nil || q.Attempts != 1 || q.LastError == "" || !q.DueAt.After(now) {
			t.Fatalf("after a failed start: %+v", q)
		}
		// Claimed for a minute: not started again before.
		if n, _ := svc.StartQueuedOrders(ctx, 10); n != 0 || fw.starts != 1 {
			t.Fatalf("within its claim: started %d, starts %d", n, fw.starts)
		}
		now, fw.startErr = now.Add(2*time.Minute), nil
		if n, err := svc.StartQueuedOrders(ctx, 10); err != nil || n != 1 || fw.starts != 2 {
			t.Fatalf("once due again: started %d, %v, starts %d", n, err, fw.starts)
		}
		if q, err := f.store.QueuedOrderStart(ctx, id); err != nil || q != nil {
			t.Fatalf("a started order stays queued: %+v %v", q, err)
		}
	})
}
