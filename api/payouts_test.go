package api

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/workflows"
)

// fakePayouts records what the service asks of Temporal's schedules.
type fakePayouts struct {
	mu      sync.Mutex
	created []workflows.PayoutScheduleSpec
	paused  map[string]bool
	deleted []string
}

func (f *fakePayouts) Create(_ context.Context, s workflows.PayoutScheduleSpec) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.created = append(f.created, s)
	return nil
}

func (f *fakePayouts) SetPaused(_ context.Context, id string, paused bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.paused == nil {
		f.paused = map[string]bool{}
	}
	f.paused[id] = paused
	return nil
}

func (f *fakePayouts) Delete(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, id)
	return nil
}

func (f *fakePayouts) NextRuns(context.Context, string) ([]time.Time, error) {
	return []time.Time{time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)}, nil
}

// A schedule through the API, and its runs as its worker would run them: each nominal
// time makes one order however often it runs, under the key <id>:<time>, created by the
// schedule's key and naming the schedule; a paused or deleted schedule makes none.
func TestAPayoutScheduleMakesOneOrderPerRun(t *testing.T) {
	f := newFixture(t)
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	payouts := &fakePayouts{}
	svc := &service.Service{Store: f.store, Log: discard, Workflows: &fakeWorkflows{decision: workflows.PolicyDecision{Allowed: true}},
		Payouts: payouts, PayoutMinInterval: 2 * time.Second}
	f.handler = NewRouter(Config{Store: f.store, Log: discard, Service: svc})
	pay := f.creds.Keys["pay"]
	payment := `{"walletId":"` + f.creds.Wallets[0].ID + `","asset":"USDC","amount":"12.5","destination":{"address":"0x1111111111111111111111111111111111111111"},"reference":"retainer"}`

	for body, fields := range map[string]string{
		`{"payment":` + payment + `,"every":"PT1S"}`:                                                                                                        "every",
		`{"payment":{"walletId":"wal_x","asset":"USDC","amount":"-1"},"cron":"0 9 * *"}`:                                                                    "cron payment.amount payment.destination",
		`{"payment":{"walletId":"wal_x","asset":"USDC","amount":"1","destination":{"address":"0x1111111111111111111111111111111111111111"}},"every":"P1D"}`: "payment.walletId",
		`{"payment":` + payment + `,"every":"P1D","endAt":"2020-01-01T00:00:00Z"}`:                                                                          "endAt",
		`{"payment":` + payment + `,"every":"P1D","startAt":"2030-01-02T00:00:00Z","endAt":"2030-01-01T00:00:00Z"}`:                                         "endAt",
		`{"payment":"a string","every":"P1D"}`:                                                                                                              "payment",
	} {
		r := f.post(t, "/api/v1/payout-schedules", pay.SK, body)
		var got []string
		for _, e := range r.problem.Errors {
			got = append(got, e.Field)
		}
		if r.status != 422 || !containsAll(got, strings.Fields(fields)) {
			t.Errorf("%s: %d %v, want 422 naming %s", body, r.status, got, fields)
		}
	}
	r := f.post(t, "/api/v1/payout-schedules", pay.SK, `{"payment":`+payment+`,"every":"PT2S"}`)
	var sched apitypes.PayoutSchedule
	if err := json.Unmarshal(r.body, &sched); err != nil || r.status != 201 || sched.Paused || sched.Every != "PT2S" {
		t.Fatalf("create %d %s", r.status, r.body)
	}
	if len(payouts.created) != 1 || payouts.created[0].ID != sched.ID || payouts.created[0].Every != 2*time.Second {
		t.Fatalf("Temporal was asked for %+v", payouts.created)
	}
	var one apitypes.PayoutSchedule
	if r := f.do(t, "GET", "/api/v1/payout-schedules/"+sched.ID, pay.Read, nil); r.status != 200 || json.Unmarshal(r.body, &one) != nil || one.NextRunAt == nil {
		t.Fatalf("get %d %s", r.status, r.body)
	}

	ctx := context.Background()
	nominal := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	first, err := svc.RunPayout(ctx, sched.ID, nominal)
	if err != nil || first.Outcome != workflows.PayoutSubmitted || first.OrderID == "" {
		t.Fatalf("the run: %+v %v", first, err)
	}
	for range 2 {
		again, err := svc.RunPayout(ctx, sched.ID, nominal.Add(300*time.Millisecond))
		if err != nil || again.OrderID != first.OrderID {
			t.Fatalf("the run done again made %+v %v, want order %s", again, err, first.OrderID)
		}
	}
	o := decodeOrder(t, f.do(t, "GET", "/api/v1/payments/"+first.OrderID, pay.Read, nil))
	if o["scheduleId"] != sched.ID || o["createdBy"] != *sched.CreatedBy || o["status"] != "submitted" || o["correlationId"] != sched.ID+":2026-12-01T08:00:00Z" {
		t.Fatalf("the run's order: %v", o)
	}
	rec, err := f.store.IdempotencyRecordOf(ctx, f.creds.OrgID, sched.ID+":2026-12-01T08:00:00Z")
	if err != nil || rec == nil || rec.StatusCode != 201 || !strings.Contains(string(rec.ResponseBody), first.OrderID) {
		t.Fatalf("the run's Idempotency-Key record: %+v %v", rec, err)
	}
	events := f.do(t, "GET", "/api/v1/events?orderId="+first.OrderID, pay.Read, nil)
	if !strings.Contains(string(events.body), `"scheduleId":"`+sched.ID+`"`) {
		t.Fatalf("Order.Created does not name its schedule: %s", events.body)
	}
	second, err := svc.RunPayout(ctx, sched.ID, nominal.Add(2*time.Second))
	if err != nil || second.OrderID == first.OrderID {
		t.Fatalf("the next run: %+v %v", second, err)
	}
	var runs apitypes.Page[apitypes.PayoutRun]
	if r := f.do(t, "GET", "/api/v1/payout-schedules/"+sched.ID+"/runs?limit=1", pay.Read, nil); r.status != 200 || json.Unmarshal(r.body, &runs) != nil ||
		len(runs.Data) != 1 || *runs.Data[0].OrderID != second.OrderID || runs.Data[0].Status != "submitted" || runs.NextCursor == "" {
		t.Fatalf("runs %d %s", r.status, r.body)
	}
	if r := f.do(t, "GET", "/api/v1/payout-schedules/"+sched.ID+"/runs?cursor="+string(runs.NextCursor), pay.Read, nil); r.status != 200 ||
		json.Unmarshal(r.body, &runs) != nil || len(runs.Data) != 1 || *runs.Data[0].OrderID != first.OrderID || !runs.Data[0].NominalTime.Equal(nominal) {
		t.Fatalf("runs, second page %d %s", r.status, r.body)
	}

	if r := f.do(t, "PATCH", "/api/v1/payout-schedules/"+sched.ID, pay.SK, strings.NewReader(`{"paused":true}`), "Content-Type", "application/json"); r.status != 200 || !payouts.paused[sched.ID] {
		t.Fatalf("pause %d %s", r.status, r.body)
	}
	if res, err := svc.RunPayout(ctx, sched.ID, nominal.Add(4*time.Second)); err != nil || res.Outcome != workflows.PayoutSkipped || res.OrderID != "" {
		t.Fatalf("a paused schedule ran: %+v %v", res, err)
	}
	if r := f.do(t, "PATCH", "/api/v1/payout-schedules/"+sched.ID, pay.SK, strings.NewReader(`{}`), "Content-Type", "application/json"); r.status != 422 {
		t.Fatalf("a patch without paused: %d %s", r.status, r.body)
	}
	if r := f.do(t, "DELETE", "/api/v1/payout-schedules/"+sched.ID, pay.SK, nil); r.status != 200 || len(payouts.deleted) != 1 {
		t.Fatalf("delete %d %s", r.status, r.body)
	}
	if r := f.do(t, "GET", "/api/v1/payout-schedules/"+sched.ID, pay.Read, nil); r.status != 404 {
		t.Fatalf("a deleted schedule: %d", r.status)
	}
	if res, err := svc.RunPayout(ctx, sched.ID, nominal.Add(6*time.Second)); err != nil || res.Outcome != workflows.PayoutSkipped {
		t.Fatalf("a deleted schedule ran: %+v %v", res, err)
	}
	if r := f.do(t, "GET", "/api/v1/payout-schedules/"+sched.ID+"/runs", pay.Read, nil); r.status != 200 || json.Unmarshal(r.body, &runs) != nil || len(runs.Data) != 2 {
		t.Fatalf("the runs of a deleted schedule: %d %s", r.status, r.body)
	}
	var list apitypes.Page[apitypes.PayoutSchedule]
	if r := f.do(t, "GET", "/api/v1/payout-schedules", pay.Read, nil); r.status != 200 || json.Unmarshal(r.body, &list) != nil || len(list.Data) != 0 {
		t.Fatalf("list %d %s", r.status, r.body)
	}
}

// A key restricted to some wallets reaches the schedules of those wallets only; a schedule
// whose key is revoked makes no more orders, and its runs say why.
func TestAPayoutScheduleIsItsWalletsAndItsCredentials(t *testing.T) {
	f := newFixture(t)
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := &service.Service{Store: f.store, Log: discard, Workflows: &fakeWorkflows{decision: workflows.PolicyDecision{Allowed: true}},
		Payouts: &fakePayouts{}, PayoutMinInterval: time.Second}
	f.handler = NewRouter(Config{Store: f.store, Log: discard, Service: svc})
	pay := f.creds.Keys["pay"]
	first, second := f.creds.Wallets[0].ID, f.creds.Wallets[1].ID
	writer := f.newKey(t, pay.SK, `{"kind":"tk","actions":["read","write"]}`)
	elsewhere := f.newKey(t, pay.SK, `{"kind":"tk","actions":["read","write"],"resourceIds":["`+second+`"]}`)
	r := f.post(t, "/api/v1/payout-schedules", writer.Secret, `{"payment":{"walletId":"`+first+`","asset":"USDC","amount":"2",`+
		`"destination":{"address":"0x1111111111111111111111111111111111111111"}},"every":"PT5S"}`)
	var sched apitypes.PayoutSchedule
	if err := json.Unmarshal(r.body, &sched); err != nil || r.status != 201 {
		t.Fatalf("create %d %s", r.status, r.body)
	}
	for _, target := range []string{"/api/v1/payout-schedules/" + sched.ID, "/api/v1/payout-schedules/" + sched.ID + "/runs"} {
		if r := f.do(t, "GET", target, elsewhere.Secret, nil); r.status != 404 {
			t.Fatalf("%s for a key of another wallet: %d %s", target, r.status, r.body)
		}
	}
	if r := f.do(t, "DELETE", "/api/v1/payout-schedules/"+sched.ID, elsewhere.Secret, nil); r.status != 404 {
		t.Fatalf("a key of another wallet deleted it: %d", r.status)
	}
	var list apitypes.Page[apitypes.PayoutSchedule]
	if r := f.do(t, "GET", "/api/v1/payout-schedules", elsewhere.Secret, nil); json.Unmarshal(r.body, &list) != nil || len(list.Data) != 0 {
		t.Fatalf("a key of another wallet lists %s", r.body)
	}
	if r := f.do(t, "GET", "/api/v1/payout-schedules", pay.Read, nil); json.Unmarshal(r.body, &list) != nil || len(list.Data) != 1 {
		t.Fatalf("the app's key lists %s", r.body)
	}

	ctx := context.Background()
	nominal := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	if res, err := svc.RunPayout(ctx, sched.ID, nominal); err != nil || res.Outcome != workflows.PayoutSubmitted {
		t.Fatalf("a run: %+v %v", res, err)
	}
	if r := f.do(t, "DELETE", "/developer/api-keys/"+writer.ID, pay.SK, nil); r.status != 200 {
		t.Fatalf("revoke %d %s", r.status, r.body)
	}
	res, err := svc.RunPayout(ctx, sched.ID, nominal.Add(5*time.Second))
	if err != nil || res.Outcome != workflows.PayoutRefused || res.OrderID != "" || !strings.Contains(res.Error, "can no longer write") {
		t.Fatalf("a run after its key was revoked: %+v %v", res, err)
	}
	var runs apitypes.Page[apitypes.PayoutRun]
	if r := f.do(t, "GET", "/api/v1/payout-schedules/"+sched.ID+"/runs", pay.Read, nil); json.Unmarshal(r.body, &runs) != nil ||
		len(runs.Data) != 2 || runs.Data[0].Status != apitypes.PayoutRunRefused || runs.Data[0].OrderID != nil || runs.Data[0].Error == "" {
		t.Fatalf("runs %s", r.body)
	}
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			found = found || h == w
		}
		if !found {
			return false
		}
	}
	return true
}
