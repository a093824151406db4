package api

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opentreasury/treasury/activities"
	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/workflows"
)

// personOf signs in a new person of the fixture's organisation, without a password.
func personOf(t *testing.T, f *fixture, role string, grants map[string]string) signedIn {
	t.Helper()
	u := matrixPerson(t, f, f.creds.OrgID, role, grants, "-")
	token := sessionFor(t, f, u)
	return signedIn{token: token, csrf: auth.CSRFToken(token), userID: u.ID}
}

func decodeDraft(t *testing.T, r response, status int) apitypes.PolicyDraft {
	t.Helper()
	var d apitypes.PolicyDraft
	if r.status != status || json.Unmarshal(r.body, &d) != nil || d.ID == "" {
		t.Fatalf("want a draft with %d, got %d %s", status, r.status, r.body)
	}
	return d
}

func TestPolicyChangesGoThroughADraftApprovedByAnotherPerson(t *testing.T) {
	f := newFixture(t)
	sk := f.creds.Keys["pay"].SK
	author := personOf(t, f, auth.RoleMember, map[string]string{"pay": "developer"})
	checker := personOf(t, f, auth.RoleOwner, nil)
	inForce := func() apitypes.Policy {
		t.Helper()
		var p apitypes.Policy
		if r := f.do(t, "GET", "/api/v1/policies/pay", sk, nil); r.status != 200 || json.Unmarshal(r.body, &p) != nil {
			t.Fatalf("policy: %d %s", r.status, r.body)
		}
		return p
	}
	start := inForce().Version

	// The app asks for one approval of its changes from now on; a PUT no longer publishes.
	const guarded = `{"maxOrderUsd":"5000000","destinationWhitelist":["0x1111111111111111111111111111111111111111"],"changeApprovals":1}`
	if r := f.do(t, "PUT", "/api/v1/policies/pay", sk, strings.NewReader(guarded)); r.status != 200 {
		t.Fatalf("put %d %s", r.status, r.body)
	}
	f.do(t, "PUT", "/api/v1/policies/pay", sk, strings.NewReader(`{}`)).wantProblem(t, 409, apitypes.CodeConflict)

	// A draft: no effect until published, its diff against the version in force.
	d := decodeDraft(t, f.as(t, author, "POST", "/api/v1/policies/pay/drafts",
		`{"rules":{"maxOrderUsd":"100","destinationWhitelist":["0x1111111111111111111111111111111111111111","0x2222222222222222222222222222222222222222"],"changeApprovals":1}}`), 201)
	if d.Status != "open" || d.ApprovalsRequired != 1 || d.BaseVersion != start+1 || d.AuthorPerson == nil || *d.AuthorPerson != author.userID {
		t.Fatalf("draft %+v", d)
	}
	diff := map[string]apitypes.PolicyChange{}
	for _, c := range d.Diff {
		diff[c.Rule] = c
	}
	if len(d.Diff) != 2 || string(diff["maxOrderUsd"].To) != `"100"` || len(diff["destinationWhitelist"].Added) != 1 {
		t.Fatalf("diff %+v", d.Diff)
	}
	if inForce().Version != start+1 {
		t.Fatal("a draft changed the policy in force")
	}
	// The dry run of the draft, beside the version in force.
	body := `{"walletId":"` + f.creds.Wallets[0].ID + `","asset":"USDC","amount":"500","destination":{"address":"0x1111111111111111111111111111111111111111"}}`
	var e apitypes.PolicyEvaluation
	_ = json.Unmarshal(f.post(t, "/api/v1/policies/pay/evaluate?draft="+d.ID, sk, body).body, &e)
	if e.Allowed || e.DraftID == nil || *e.DraftID != d.ID || e.Violations[0].Rule != "maxOrderUsd" {
		t.Fatalf("dry run of the draft: %+v", e)
	}
	_ = json.Unmarshal(f.post(t, "/api/v1/policies/pay/evaluate", sk, body).body, &e)
	if !e.Allowed || e.DraftID != nil {
		t.Fatalf("dry run of the version in force: %+v", e)
	}

	// Maker-checker: not its author, not a key, not twice.
	f.as(t, author, "POST", "/api/v1/policies/pay/drafts/"+d.ID+"/approve", "").wantProblem(t, 403, apitypes.CodeMakerChecker)
	f.post(t, "/api/v1/policies/pay/drafts/"+d.ID+"/approve", sk, `{}`).wantProblem(t, 403, apitypes.CodePermissionDenied)
	f.post(t, "/api/v1/policies/pay/drafts/"+d.ID+"/publish", sk, `{}`).wantProblem(t, 409, apitypes.CodeConflict)
	published := decodeDraft(t, f.as(t, checker, "POST", "/api/v1/policies/pay/drafts/"+d.ID+"/approve", ""), 200)
	if published.Status != "published" || published.PublishedVersion == nil || *published.PublishedVersion != start+2 ||
		len(published.Approvals) != 1 || published.Approvals[0].By != checker.userID {
		t.Fatalf("approved draft %+v", published)
	}
	if p := inForce(); p.Version != start+2 || p.Rules.MaxOrderUSD != "100" {
		t.Fatalf("in force after approval: %+v", p)
	}
	f.as(t, checker, "POST", "/api/v1/policies/pay/drafts/"+d.ID+"/approve", "").wantProblem(t, 409, apitypes.CodeConflict)
	// Read later, a published draft shows what its publication changed, not an empty diff
	// against its own rules now in force.
	if later := decodeDraft(t, f.do(t, "GET", "/api/v1/policies/pay/drafts/"+d.ID, sk, nil), 200); len(later.Diff) != 2 || later.ApprovalsRequired != 1 {
		t.Fatalf("the published draft read again: diff %+v, approvals required %d", later.Diff, later.ApprovalsRequired)
	}

	// Every version is kept, with its author, approvals and diff.
	var versions struct{ Data []apitypes.PolicyVersion }
	if r := f.do(t, "GET", "/api/v1/policies/pay/versions?limit=2", sk, nil); r.status != 200 || json.Unmarshal(r.body, &versions) != nil ||
		len(versions.Data) != 2 || versions.Data[0].Version != start+2 || versions.Data[1].Version != start+1 {
		t.Fatalf("versions %d %s", r.status, r.body)
	}
	var v apitypes.PolicyVersion
	if r := f.do(t, "GET", fmt.Sprintf("/api/v1/policies/pay/versions/%d", start+2), sk, nil); r.status != 200 || json.Unmarshal(r.body, &v) != nil ||
		v.DraftID == nil || *v.DraftID != d.ID || len(v.Approvals) != 1 || len(v.Diff) != 2 || *v.AuthorPerson != author.userID {
		t.Fatalf("version %d %s", r.status, r.body)
	}
	f.do(t, "GET", "/api/v1/policies/pay/versions/999", sk, nil).wantProblem(t, 404, apitypes.CodeNotFound)

	// Rollback publishes the earlier rules again, under the same approval.
	rb := decodeDraft(t, f.as(t, author, "POST", fmt.Sprintf("/api/v1/policies/pay/versions/%d/rollback", start+1), ""), 201)
	if rb.Status != "open" || rb.Restores == nil || *rb.Restores != start+1 {
		t.Fatalf("rollback draft %+v", rb)
	}
	rb = decodeDraft(t, f.as(t, checker, "POST", "/api/v1/policies/pay/drafts/"+rb.ID+"/approve", ""), 200)
	if p := inForce(); rb.Status != "published" || p.Version != start+3 || p.Rules.MaxOrderUSD != "5000000" {
		t.Fatalf("after the rollback: %+v, in force %+v", rb, p)
	}

	// A draft saved before another version was published would undo it unseen: it must be
	// saved again, which re-bases it and withdraws its approvals.
	stale := decodeDraft(t, f.as(t, author, "POST", "/api/v1/policies/pay/drafts", `{"rules":{"maxOrderUsd":"7","changeApprovals":1}}`), 201)
	other := decodeDraft(t, f.as(t, author, "POST", "/api/v1/policies/pay/drafts", `{"rules":{"maxOrderUsd":"8","changeApprovals":1}}`), 201)
	decodeDraft(t, f.as(t, checker, "POST", "/api/v1/policies/pay/drafts/"+other.ID+"/approve", ""), 200)
	f.as(t, checker, "POST", "/api/v1/policies/pay/drafts/"+stale.ID+"/approve", "").wantProblem(t, 409, apitypes.CodeConflict)
	resaved := decodeDraft(t, f.as(t, author, "PUT", "/api/v1/policies/pay/drafts/"+stale.ID, `{"rules":{"maxOrderUsd":"7","changeApprovals":1}}`), 200)
	if resaved.BaseVersion != start+4 || len(resaved.Approvals) != 0 {
		t.Fatalf("re-saved draft %+v", resaved)
	}
	decodeDraft(t, f.as(t, checker, "POST", "/api/v1/policies/pay/drafts/"+stale.ID+"/approve", ""), 200)

	// Discarded drafts stay, closed.
	gone := decodeDraft(t, f.post(t, "/api/v1/policies/pay/drafts", sk, `{"fromVersion":1}`), 201)
	decodeDraft(t, f.post(t, "/api/v1/policies/pay/drafts/"+gone.ID+"/discard", sk, `{}`), 200)
	f.do(t, "PUT", "/api/v1/policies/pay/drafts/"+gone.ID, sk, strings.NewReader(`{"rules":{}}`)).wantProblem(t, 409, apitypes.CodeConflict)
	var open struct{ Data []apitypes.PolicyDraft }
	if r := f.do(t, "GET", "/api/v1/policies/pay/drafts?status=open", sk, nil); json.Unmarshal(r.body, &open) != nil || len(open.Data) != 0 {
		t.Fatalf("open drafts: %s", r.body)
	}

	// Refusals of bad input.
	f.post(t, "/api/v1/policies/pay/drafts", sk, `{}`).wantProblem(t, 422, apitypes.CodeValidationFailed)
	f.post(t, "/api/v1/policies/pay/drafts", sk, `{"rules":{"maxOrder":"1"}}`).wantProblem(t, 422, apitypes.CodeValidationFailed)
	f.post(t, "/api/v1/policies/pay/drafts", sk, `{"fromVersion":999}`).wantProblem(t, 422, apitypes.CodeValidationFailed)
	f.post(t, "/api/v1/policies/pay/evaluate?draft=pdr_nothing", sk, body).wantProblem(t, 404, apitypes.CodeNotFound)

	// Every policy action is in the audit log.
	audit, _ := f.store.ListAudit(t.Context(), f.creds.OrgID, []string{"pay"}, nil, "", 100)
	var actions []string
	for _, a := range audit {
		actions = append(actions, a.Action)
	}
	for _, want := range []string{"policy.published", "policy.draft_created", "policy.draft_approved", "policy.draft_updated", "policy.draft_discarded"} {
		if !slices.Contains(actions, want) {
			t.Errorf("no %s in the audit log: %v", want, actions)
		}
	}
}

// inlineDryRuns runs a policy dry run to its end inside its start, page by page as the
// worker would, so that a test reads its report at once.
type inlineDryRuns struct{ acts *activities.Policies }

func (r inlineDryRuns) StartPolicyDryRun(ctx context.Context, id string) error {
	for {
		p, err := r.acts.DryRunPage(ctx, workflows.DryRunInput{DryRunID: id})
		if err != nil || p.Done {
			return err
		}
	}
}

func TestADraftsDryRunAgainstHistoryIsABackgroundJobWithAReport(t *testing.T) {
	f := newFixture(t)
	sk := f.creds.Keys["pay"].SK
	ctx := t.Context()
	// Two past orders the seeded policy let through, one of them needing no approval.
	var orderIDs []string
	for _, amount := range []string{"50", "20000"} {
		var o struct{ ID string }
		r := f.post(t, "/api/v1/payments", sk, `{"walletId":"`+f.creds.Wallets[0].ID+`","asset":"USDC","amount":"`+amount+
			`","destination":{"address":"0x1111111111111111111111111111111111111111"}}`)
		if r.status != 201 || json.Unmarshal(r.body, &o) != nil {
			t.Fatalf("create %d %s", r.status, r.body)
		}
		quorum := map[string]int{"50": 0, "20000": 1}[amount]
		decision, _ := json.Marshal(workflows.PolicyDecision{Allowed: true, ApprovalRequired: quorum > 0, Quorum: quorum, PolicyVersion: 1})
		_, err := f.store.ApplyOrderStep(ctx, store.OrderChange{OrderID: o.ID, Step: "submitted", To: "submitted", CorrelationID: "c",
			Mutate: func(o *store.Order, _ []store.OrderLeg) {
				at, doc := time.Now().Add(-time.Hour), string(decision)
				o.SubmittedAt, o.PolicyDecision, o.PolicyAllowed = &at, &doc, true
			}})
		if err != nil {
			t.Fatal(err)
		}
		orderIDs = append(orderIDs, o.ID)
	}
	d := decodeDraft(t, f.post(t, "/api/v1/policies/pay/drafts", sk, `{"rules":{"maxOrderUsd":"10000","approvalTiers":[{"minUsd":"10","quorum":1}]}}`), 201)

	r := f.post(t, "/api/v1/policies/pay/dry-runs", sk, `{"draftId":"`+d.ID+`","days":7,"examples":3}`)
	var run apitypes.PolicyDryRun
	if r.status != 202 || json.Unmarshal(r.body, &run) != nil || run.ID == "" || run.Progress.Total != 2 || run.Days != 7 {
		t.Fatalf("start %d %s", r.status, r.body)
	}
	// The test's worker ran it within the start; the stored run is what a client polls.
	r = f.do(t, "GET", "/api/v1/policies/pay/dry-runs/"+run.ID, sk, nil)
	if r.status != 200 || json.Unmarshal(r.body, &run) != nil || run.Status != "completed" || run.Progress.Evaluated != 2 {
		t.Fatalf("read %d %s", r.status, r.body)
	}
	added, refused := run.Report.Shifts["approvalAdded"], run.Report.Shifts["allowedToRefused"]
	if added.Count != 1 || added.Examples[0].OrderID != orderIDs[0] || added.Examples[0].Href != "/api/v1/payments/"+orderIDs[0] ||
		refused.Count != 1 || refused.Examples[0].OrderID != orderIDs[1] || run.Report.ByRule["maxOrderUsd"].NewlyRefused != 1 {
		t.Fatalf("report %s", r.body)
	}

	f.post(t, "/api/v1/policies/pay/dry-runs", sk, `{}`).wantProblem(t, 422, apitypes.CodeValidationFailed)
	f.post(t, "/api/v1/policies/pay/dry-runs", sk, `{"draftId":"`+d.ID+`","days":400}`).wantProblem(t, 422, apitypes.CodeValidationFailed)
	f.post(t, "/api/v1/policies/pay/dry-runs", sk, `{"draftId":"pdr_nothing"}`).wantProblem(t, 422, apitypes.CodeValidationFailed)
	f.do(t, "GET", "/api/v1/policies/pay/dry-runs/pdx_nothing", sk, nil).wantProblem(t, 404, apitypes.CodeNotFound)
	f.do(t, "GET", "/api/v1/policies/trade/dry-runs/"+run.ID, f.creds.Keys["trade"].SK, nil).wantProblem(t, 404, apitypes.CodeNotFound)
}

func TestWindowsShowTheirHeadroom(t *testing.T) {
	f := newFixture(t)
	sk := f.creds.Keys["pay"].SK
	rules := `{"windows":[{"scope":"wallet","hours":24,"limitUsd":"1000"},{"scope":"app","hours":1,"limitUsd":"500"},{"scope":"destination","hours":24,"limitUsd":"10"}]}`
	if r := f.do(t, "PUT", "/api/v1/policies/pay", sk, strings.NewReader(rules)); r.status != 200 {
		t.Fatalf("put %d %s", r.status, r.body)
	}
	// Two orders the policy let through, 30 minutes ago; a third it refused counts nothing.
	for i, amount := range []string{"100.25", "200", "300"} {
		var o struct{ ID string }
		r := f.post(t, "/api/v1/payments", sk, `{"walletId":"`+f.creds.Wallets[0].ID+`","asset":"USDC","amount":"`+amount+
			`","destination":{"address":"0x1111111111111111111111111111111111111111"}}`)
		if json.Unmarshal(r.body, &o) != nil {
			t.Fatalf("create %d %s", r.status, r.body)
		}
		_, err := f.store.ApplyOrderStep(t.Context(), store.OrderChange{OrderID: o.ID, Step: "submitted", To: "submitted", CorrelationID: "c",
			Mutate: func(o *store.Order, _ []store.OrderLeg) {
				at := time.Now().Add(-30 * time.Minute)
				o.SubmittedAt, o.PolicyAllowed, o.PolicyAsset = &at, i < 2, "USDC"
			}})
		if err != nil {
			t.Fatal(err)
		}
	}
	var got apitypes.PolicyWindows
	r := f.do(t, "GET", "/api/v1/policies/pay/windows", sk, nil)
	if r.status != 200 || json.Unmarshal(r.body, &got) != nil || len(got.Windows) != 3 {
		t.Fatalf("windows %d %s", r.status, r.body)
	}
	want := []apitypes.PolicyWindowUse{
		{Scope: "wallet", Key: f.creds.Wallets[0].ID, Hours: 24, LimitUSD: "1000", UsedUSD: "300.25", RemainingUSD: "699.75"},
		{Scope: "app", Key: "pay", Hours: 1, LimitUSD: "500", UsedUSD: "300.25", RemainingUSD: "199.75"},
		{Scope: "destination", Key: "", Hours: 24, LimitUSD: "10", UsedUSD: "0.00", RemainingUSD: "10.00"},
	}
	for i, w := range want {
		if got.Windows[i] != w {
			t.Errorf("window %d: %+v, want %+v", i, got.Windows[i], w)
		}
	}
	// A key restricted to one wallet reads nothing that spans them all.
	narrow := f.newKey(t, sk, `{"kind":"tk","actions":["developer"],"resourceIds":["`+f.creds.Wallets[0].ID+`"]}`).Secret
	f.do(t, "GET", "/api/v1/policies/pay/windows", narrow, nil).wantProblem(t, 403, apitypes.CodePermissionDenied)
	d := decodeDraft(t, f.post(t, "/api/v1/policies/pay/drafts", narrow, `{"rules":{}}`), 201)
	f.post(t, "/api/v1/policies/pay/dry-runs", narrow, `{"draftId":"`+d.ID+`"}`).wantProblem(t, 403, apitypes.CodePermissionDenied)
}

// Publishing is an event of the app, in the outbox for its live configs and webhooks that
// name it.
func TestPublishingAPolicyIsAnEventOfTheApp(t *testing.T) {
	f := newFixture(t)
	sk := f.creds.Keys["pay"].SK
	if r := f.do(t, "PUT", "/api/v1/policies/pay", sk, strings.NewReader(`{"maxOrderUsd":"42"}`)); r.status != 200 {
		t.Fatalf("put %d %s", r.status, r.body)
	}
	// GET /events is the orders' stream: the policy's record is its versions.
	if r := f.do(t, "GET", "/api/v1/events?limit=200", sk, nil); r.status != 200 || strings.Contains(string(r.body), "Policy.Published") {
		t.Fatalf("events %d %s", r.status, r.body)
	}
	stored, err := f.store.EventsSince(t.Context(), time.Now().Add(-time.Minute), 100)
	if err != nil {
		t.Fatal(err)
	}
	var ev *events.Event
	for i := range stored {
		if stored[i].Name == events.PolicyPublished {
			ev = &stored[i]
		}
	}
	var body map[string]any
	if ev == nil || ev.OrderID != "" || ev.App != "pay" || ev.OrgID != f.creds.OrgID || json.Unmarshal(ev.Data, &body) != nil ||
		body["policyVersion"] != float64(2) || body["draftId"] != nil || body["app"] != "pay" {
		t.Fatalf("the outbox's followers read %+v", ev)
	}
	for _, entry := range []string{"policy.*", "Policy.Published"} {
		normal, err := events.NormalizeEntry(entry)
		if err != nil {
			t.Fatalf("%s: %v", entry, err)
		}
		sub := events.Subscription{OrgID: f.creds.OrgID, App: "pay", Entries: []string{normal}, Enabled: true}
		if !sub.Wants(ev) {
			t.Errorf("a config of pay naming %s does not want %s", entry, ev.Name)
		}
	}
	// Webhooks: one naming policy events gets a message of the next publish, byte for byte its
	// body; one of every event gets none.
	var policyHook, everyHook struct{ ID string }
	for hook, entry := range map[*struct{ ID string }]string{&policyHook: "policy.*", &everyHook: "*"} {
		r := f.post(t, "/developer/webhooks", sk, `{"url":"https://hooks.example.com/policy","events":["`+entry+`"]}`)
		if r.status != 201 || json.Unmarshal(r.body, hook) != nil {
			t.Fatalf("a webhook for %s: %d %s", entry, r.status, r.body)
		}
	}
	if r := f.do(t, "PUT", "/api/v1/policies/pay", sk, strings.NewReader(`{"maxOrderUsd":"43"}`)); r.status != 200 {
		t.Fatalf("put %d %s", r.status, r.body)
	}
	for hook, want := range map[string]int{policyHook.ID: 1, everyHook.ID: 0} {
		deliveries, _, err := f.store.ListWebhookDeliveries(t.Context(), store.DeliveryFilter{ConfigID: hook, Limit: 10})
		if err != nil || len(deliveries) != want {
			t.Fatalf("webhook %s: %d deliveries (%v), want %d", hook, len(deliveries), err, want)
		}
		if want == 1 && (deliveries[0].Event != events.PolicyPublished || !strings.Contains(deliveries[0].Payload, `"policyVersion":3`)) {
			t.Fatalf("delivery %+v", deliveries[0])
		}
	}
	if (&events.Subscription{OrgID: f.creds.OrgID, App: "trade", Entries: []string{"policy.*"}, Enabled: true}).Wants(ev) {
		t.Error("another app's config wants pay's policy")
	}
	// A config of every event gets the orders' events it always did, and this one only by name.
	if (&events.Subscription{OrgID: f.creds.OrgID, App: "pay", Entries: []string{"*"}, Enabled: true}).Wants(ev) {
		t.Error("* selects Policy.Published")
	}
}
