package e2e

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/opentreasury/treasury/dev/wait"
	"github.com/opentreasury/treasury/internal/store/storetest"
	"github.com/opentreasury/treasury/workflows"
)

// TestPayoutSchedules runs a payout schedule every 2 s through the public API, across a
// restart of the whole bundle (its worker and Temporal with it), a pause and a replay of
// one of its runs, on both stores: every nominal time makes exactly one order, none is
// made while the schedule is paused, and a run done again makes nothing new.
func TestPayoutSchedules(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { payoutSchedules(t, "") })
	t.Run("postgres", func(t *testing.T) { payoutSchedules(t, storetest.PostgresSchemaURL(t)) })
}

type payoutRun struct {
	nominal time.Time
	orderID string
	status  string
}

// payoutRuns reads every run of a schedule, the latest due first.
func payoutRuns(t *testing.T, api, token, id string) []payoutRun {
	t.Helper()
	var out []payoutRun
	for cursor := ""; ; {
		r := call(t, "GET", api+"/payout-schedules/"+id+"/runs?limit=200&cursor="+url.QueryEscape(cursor), token)
		if r.status != 200 {
			t.Fatalf("runs %d %s", r.status, r.raw)
		}
		for _, item := range r.body["data"].([]any) {
			run := item.(map[string]any)
			at, err := time.Parse(time.RFC3339Nano, run["nominalTime"].(string))
			if err != nil {
				t.Fatal(err)
			}
			orderID, _ := run["orderId"].(string)
			out = append(out, payoutRun{nominal: at, orderID: orderID, status: run["status"].(string)})
		}
		next, _ := r.body["nextCursor"].(string)
		if next == "" {
			return out
		}
		cursor = next
	}
}

func payoutSchedules(t *testing.T, databaseURL string) {
	dataDir := t.TempDir()
	b := startBundle(t, dataDir, databaseURL)
	defer func() { _ = b.Shutdown() }()
	creds := b.Credentials
	api := b.APIURL + "/api/v1"
	pay := creds.Keys["pay"]
	wallet := creds.Wallets[0].ID
	payment := fmt.Sprintf(`{"walletId":%q,"asset":"USDC","amount":"1.5","destination":{"address":"0x2222222222222222222222222222222222222222"}}`, wallet)

	t.Run("refusals name the field", func(t *testing.T) {
		for _, c := range []struct{ body, field string }{
			{`{"payment":` + payment + `,"every":"PT2S","cron":"* * * * *"}`, "every"},
			{`{"payment":` + payment + `}`, "every"},
			{`{"payment":` + payment + `,"every":"P1M"}`, "every"},
			{`{"payment":` + payment + `,"every":"PT0S"}`, "every"},
			{`{"payment":` + payment + `,"cron":"every monday"}`, "cron"},
			{`{"payment":` + payment + `,"cron":"0 9 1 * *","timezone":"Mars/Olympus"}`, "timezone"},
			{`{"payment":{"walletId":"wal_nope","asset":"USDC","amount":"1","destination":{"address":"0x2222222222222222222222222222222222222222"}},"every":"PT2S"}`, "payment.walletId"},
			{`{"every":"PT2S"}`, "payment"},
		} {
			r := send(t, "POST", api+"/payout-schedules", pay.SK, c.body)
			if r.status != 422 || !strings.Contains(string(r.raw), `"field":"`+c.field+`"`) {
				t.Errorf("%s: %d %s, want 422 naming %s", c.body, r.status, r.raw, c.field)
			}
		}
		if r := send(t, "POST", api+"/payout-schedules", pay.Read, `{"payment":`+payment+`,"every":"PT2S"}`); r.status != 403 {
			t.Errorf("a read-only key created a schedule: %d %s", r.status, r.raw)
		}
	})

	r := send(t, "POST", api+"/payout-schedules", pay.SK, `{"payment":`+payment+`,"every":"PT2S"}`)
	if r.status != 201 {
		t.Fatalf("create %d %s", r.status, r.raw)
	}
	id, creator := r.body["id"].(string), r.body["createdBy"]
	if !strings.HasPrefix(id, "pys_") || r.body["paused"] != false {
		t.Fatalf("created %s", r.raw)
	}
	if r := call(t, "GET", api+"/payout-schedules/"+id, pay.Read); r.status != 200 || r.body["nextRunAt"] == nil {
		t.Fatalf("get %d %s", r.status, r.raw)
	}
	wait.For(t, time.Minute, "two runs of the schedule", func() bool { return len(payoutRuns(t, api, pay.Read, id)) >= 2 })

	if err := b.Shutdown(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	b = startBundle(t, dataDir, databaseURL)
	api = b.APIURL + "/api/v1"
	before := len(payoutRuns(t, api, pay.Read, id))
	wait.For(t, time.Minute, "two more runs after the restart", func() bool { return len(payoutRuns(t, api, pay.Read, id)) >= before+2 })

	t.Run("a run done again makes no second order", func(t *testing.T) {
		runs := payoutRuns(t, api, pay.Read, id)
		last := runs[len(runs)-1] // the first due
		tc, err := client.Dial(client.Options{HostPort: b.TemporalAddr, Namespace: b.Namespace})
		if err != nil {
			t.Fatal(err)
		}
		defer tc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for i := range 2 {
			run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("replay-%s-%d", id, i), TaskQueue: workflows.TaskQueue},
				workflows.PayoutRunWorkflow, workflows.PayoutRunInput{ScheduleID: id, NominalTime: last.nominal})
			if err != nil {
				t.Fatal(err)
			}
			var res workflows.PayoutRunResult
			if err := run.Get(ctx, &res); err != nil {
				t.Fatal(err)
			}
			if res.OrderID != last.orderID || res.Outcome != workflows.PayoutSubmitted {
				t.Fatalf("the run done again: %+v, want order %s submitted", res, last.orderID)
			}
		}
	})

	r = send(t, "PATCH", api+"/payout-schedules/"+id, pay.SK, `{"paused":true}`)
	if r.status != 200 || r.body["paused"] != true || r.body["nextRunAt"] != nil {
		t.Fatalf("pause %d %s", r.status, r.raw)
	}
	pausedAt := time.Now()
	// Long enough for three of its times to pass while it is paused.
	time.Sleep(7 * time.Second)
	resumedAt := time.Now()
	if r := send(t, "PATCH", api+"/payout-schedules/"+id, pay.SK, `{"paused":false}`); r.status != 200 || r.body["paused"] != false {
		t.Fatalf("resume %d %s", r.status, r.raw)
	}
	wait.For(t, time.Minute, "a run after the schedule is resumed", func() bool {
		return payoutRuns(t, api, pay.Read, id)[0].nominal.After(resumedAt)
	})
	if r := send(t, "DELETE", api+"/payout-schedules/"+id, pay.SK, ""); r.status != 200 {
		t.Fatalf("delete %d %s", r.status, r.raw)
	}
	if r := call(t, "GET", api+"/payout-schedules/"+id, pay.Read); r.status != 404 {
		t.Fatalf("a deleted schedule: %d %s", r.status, r.raw)
	}
	deletedAt := time.Now()

	runs := payoutRuns(t, api, pay.Read, id)
	for _, run := range runs {
		if run.nominal.After(pausedAt) && run.nominal.Before(resumedAt) {
			t.Errorf("a run at %s, while the schedule was paused (%s to %s)", run.nominal, pausedAt, resumedAt)
		}
		if run.nominal.After(deletedAt) {
			t.Errorf("a run at %s, after the schedule was deleted at %s", run.nominal, deletedAt)
		}
	}
	// Each run's order: made once, naming its schedule, created by the schedule's key and
	// confirmed; and the pay app has no other order of the schedule.
	want := map[string]bool{}
	for _, run := range runs {
		wait.For(t, time.Minute, "the run of "+run.nominal.String()+" to make its order", func() bool {
			rs := payoutRuns(t, api, pay.Read, id)
			for _, r := range rs {
				if r.nominal.Equal(run.nominal) {
					run = r
				}
			}
			return run.orderID != ""
		})
		if want[run.orderID] {
			t.Fatalf("two runs made order %s", run.orderID)
		}
		want[run.orderID] = true
		o := waitStatus(t, api+"/payments/"+run.orderID, pay.Read, "confirmed")
		if o["scheduleId"] != id || o["createdBy"] != creator || creator == nil {
			t.Fatalf("the order of a run: %v", o)
		}
	}
	made := 0
	for cursor := ""; ; {
		r := call(t, "GET", api+"/payments?limit=200&cursor="+url.QueryEscape(cursor), pay.Read)
		for _, item := range r.body["data"].([]any) {
			if o := item.(map[string]any); o["scheduleId"] == id {
				made++
				if !want[o["id"].(string)] {
					t.Errorf("order %s of the schedule is no run's", o["id"])
				}
			}
		}
		next, _ := r.body["nextCursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	if made != len(want) {
		t.Fatalf("%d orders of the schedule for %d runs", made, len(want))
	}
	var some string
	for orderID := range want {
		some = orderID
	}
	created := call(t, "GET", api+"/events?orderId="+some, pay.Read).body["data"].([]any)[0].(map[string]any)
	if created["event"] != "Order.Created" || created["scheduleId"] != id {
		t.Fatalf("Order.Created of a scheduled order: %v", created)
	}
}
