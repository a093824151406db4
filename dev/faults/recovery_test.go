package faults

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/opentreasury/treasury/dev/wait"
)

// Every app's webhook receiver is down for the whole run: each message's retries run out
// (and the webhook may be disabled, its later messages skipped). Then the receivers come
// back, each webhook is enabled again and recovered from before the run: every message
// arrives, none twice.
func TestAReceiverDownForTheWholeRunIsRecovered(t *testing.T) {
	// Retries a tenth as long again: the schedule runs out in about 10 s, the failing
	// window in about 43 s.
	c := startCluster(t, "recovery", "WEBHOOK_BACKOFF_SCALE=0.0001")
	since := time.Now().UTC()
	hooks := hookEveryApp(t, c, true)
	orders := placeOrders(t, c, 60)
	r := row{scenario: "every webhook receiver down for the whole run, then `recover`"}
	owed := account(t, c, orders, nil, &r)

	api := c.APIURLs[0] + "/developer/webhooks/"
	// Wait until no message is left to try: each failed for good, or is held by its
	// disabled webhook.
	deadline := time.Now().Add(3 * time.Minute)
	disabled := 0
	for app, rc := range hooks {
		key := c.Credentials.Keys[app].SK
		wait.For(t, time.Until(deadline), app+"'s webhook to be disabled or to have no delivery pending", func() bool {
			hook := send("GET", api+rc.webhookID, key, "")
			pending := send("GET", api+rc.webhookID+"/deliveries?status=pending&limit=1", key, "")
			if hook.status != 200 || pending.status != 200 {
				t.Fatalf("%s: %d %s, %d %s", app, hook.status, hook.raw, pending.status, pending.raw)
			}
			if hook.body["enabled"] == false {
				disabled++
				return true
			}
			return len(pending.body["data"].([]any)) == 0
		})
	}
	for _, rc := range hooks {
		rc.setDown(false)
	}
	requeued := 0
	for app, rc := range hooks {
		key := c.Credentials.Keys[app].SK
		if a := send("PATCH", api+rc.webhookID, key, `{"enabled":true}`); a.status != 200 {
			t.Fatalf("enable %s: %d %s", app, a.status, a.raw)
		}
		started, err := retried("POST", api+rc.webhookID+"/recover", key, fmt.Sprintf(`{"since":%q}`, since.Format(time.RFC3339Nano)),
			"faults-recover-"+app, 202)
		if err != nil {
			t.Fatal(err)
		}
		id := started.body["id"].(string)
		wait.For(t, time.Until(deadline), "the recovery of "+app+" to complete", func() bool {
			got := send("GET", api+rc.webhookID+"/recoveries/"+url.PathEscape(id), key, "")
			if got.status == 200 && got.body["status"] == "completed" {
				requeued += int(got.body["requeued"].(float64))
				return true
			}
			if got.status != 200 || got.body["status"] == "failed" {
				t.Fatalf("recovery of %s: %d %s", app, got.status, got.raw)
			}
			return false
		})
	}
	// Not wait.For: what is still missing after two minutes is counted and reported below,
	// with the repeats, rather than ending the test.
	for giveUp := time.Now().Add(2 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		r.webhookLost = 0
		for app, rc := range hooks {
			r.webhookLost += rc.missing(owed[app])
		}
		if r.webhookLost == 0 || time.Now().After(giveUp) {
			break
		}
	}
	// A message sent twice would come within moments of the rest.
	time.Sleep(2 * time.Second)
	repeated := 0
	for _, rc := range hooks {
		repeated += rc.repeats()
	}
	if r.webhookLost != 0 {
		t.Errorf("%d webhook messages never delivered after the recovery", r.webhookLost)
	}
	if repeated != 0 {
		t.Errorf("%d webhook messages delivered twice", repeated)
	}
	r.note = fmt.Sprintf("%d messages recovered, %d received twice; %d of %d webhooks disabled meanwhile", requeued, repeated, disabled, len(hooks))
	report(r)
}
