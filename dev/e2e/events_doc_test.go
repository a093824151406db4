package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/opentreasury/treasury/dev/devstack"
	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/dev/wait"
	"github.com/opentreasury/treasury/internal/events"
)

// eventsDoc is the catalogue this test writes (WRITE_EVENTS_DOC=1, make docs-events) and
// otherwise holds to a fresh run.
const eventsDoc = "../../docs/events.md"

// eventMeaning says when each event is emitted; the payloads beside it come from a run.
var eventMeaning = map[string]string{
	events.OrderCreated:            "A draft order was created (`POST /api/v1/{collection}`, or a payout schedule's run, which adds `scheduleId`).",
	events.OrderSubmitted:          "The order was submitted: accepted into the pipeline (its workflow started, or its start queued when Temporal did not take it in time), and the version of the app's policy that evaluates it is fixed (`policyVersion`, 0 when the app has none): a version published later does not change its decision.",
	events.OrderApproved:           "The approvers reached the quorum; signing starts.",
	events.OrderRejected:           "The order ends rejected: by the policy at submit (`reason: policy`, with its `violations`; a submit answered `policyDecision: pending` learns a refusal here), by an approver (`approver`: `decidedBy` the credential, `decidedByUser` the person behind it), or because its approval expired (`expired`).",
	events.WalletSigningRequested:  "A leg waits for its signature: a signing request (`sig_…`) with the digest to sign.",
	events.WalletTransactionSigned: "The leg's signature was verified against the wallet's public key.",
	events.OrderBroadcast:          "The leg's signed transaction was sent to the chain (`txHash`).",
	events.OrderConfirmed:          "The last leg is final on the chain: the order ends confirmed.",
	events.OrderFailed:             "The order ends failed (`failure.code`: `tx_reverted`, `signing_expired`, `signer_refused` with the signer's check in `failure.reason`, `tx_timeout`, or, before the leg's signing request, `insufficient_funds`, `unsupported_asset`, `amount_too_large`).",
	events.PolicyPublished:         "A new version of the app's policy is in force, for orders submitted from then on: rules put in force at once (`PUT /api/v1/policies/{app}`, `draftId` null), a published draft, or a rollback (`restores`). An event of the app about no order (no `orderId`, `domain`, `walletId`, `orderStatus` or `sequence`): a live config or webhook of the app receives it only when it names it, as `Policy.Published` or `policy.*` (`*` keeps to the orders' events, whose fields it lacks), and `GET /api/v1/events`, the orders' stream, does not list it: the policy's versions are its record. `publishedBy` is the credential whose request put it in force: the `PUT`, the publish, or the approval that completed the draft's quorum.",
	events.WebhookDisabled:         "The service stopped sending to one of the app's webhooks: every attempt to its URL failed for 5 days (`failingSince`). An event of the app about no order, like `Policy.Published`: the app's live configs and other webhooks receive it when they name it (`Webhook.Disabled` or `webhook.*`); the disabled webhook records it as skipped. Fix the endpoint, enable the webhook again (`PATCH {\"enabled\": true}`), then recover what it missed (`POST /developer/webhooks/{id}/recover`).",
	events.WebSocketTest:           "Sent by Send test (`POST /developer/websockets/{id}/test`) to every live connection of the config, whatever it subscribes to. Live only: not stored.",
	events.WebhookTest:             "Sent by `POST /developer/webhooks/{id}/test` to the webhook's URL, whatever it subscribes to.",
}

// TestEventsCatalogue runs orders down every path (confirmed, approved, rejected by an
// approver and by the policy, failed on chain, a two-leg trade), a WebSocket test and a
// webhook test, and collects an example of every event and every status change seen.
// docs/events.md must show exactly those events with exactly those fields, and that
// status machine; WRITE_EVENTS_DOC=1 rewrites it from the run.
func TestEventsCatalogue(t *testing.T) {
	// Webhook retries and the 5-day failing window a millionth as long (0.43 s), so that
	// an endpoint that fails every attempt is disabled within the run.
	b := startBundle(t, t.TempDir(), "", func(o *devstack.Options) { o.WebhookBackoffScale = 1e-6 })
	defer func() { _ = b.Shutdown() }()
	api := b.APIURL + "/api/v1"
	pay, trade := b.Credentials.Keys["pay"], b.Credentials.Keys["trade"]
	wallet := b.Credentials.Wallets[0].ID
	const whitelisted = "0x1111111111111111111111111111111111111111"

	examples := map[string]json.RawMessage{}
	edges := map[[2]string]bool{}
	// follow runs an order to want, and returns its events' lines and the data of its
	// Order.Broadcast.
	follow := func(key, collection, body string, decide string, want string) (lines string, broadcast json.RawMessage) {
		t.Helper()
		r := send(t, "POST", api+"/"+collection, key, body)
		if r.status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.status, r.raw)
		}
		id := r.body["id"].(string)
		send(t, "POST", api+"/"+collection+"/"+id+"/submit", key, "{}")
		if decide != "" {
			var item string
			wait.For(t, 30*time.Second, "an approval item for "+id, func() bool {
				r := call(t, "GET", api+"/approvals?status=pending", pay.Approve)
				for _, it := range r.body["data"].([]any) {
					if it.(map[string]any)["orderId"] == id {
						item = it.(map[string]any)["id"].(string)
					}
				}
				return item != ""
			})
			send(t, "POST", api+"/approvals/payment/"+item+"/decide", pay.Approve, `{"decision":"`+decide+`"}`)
		}
		o := waitStatus(t, api+"/"+collection+"/"+id, key, want)
		prev := "draft"
		for _, h := range o["history"].([]any) {
			status := h.(map[string]any)["status"].(string)
			if status != prev {
				edges[[2]string{prev, status}] = true
			}
			prev = status
		}
		r = call(t, "GET", api+"/events?limit=200&orderId="+id, key)
		var names []string
		for _, ev := range r.body["data"].([]any) {
			ev := ev.(map[string]any)
			name := ev["event"].(string)
			raw, _ := json.Marshal(ev)
			if _, ok := examples[name]; !ok && ev["leg"] == nil {
				examples[name] = raw
			}
			if name == events.OrderBroadcast {
				broadcast = raw
			}
			line := name
			if leg, ok := ev["leg"].(string); ok {
				line += " [" + leg + "]"
			}
			if part, ok := ev["part"].(float64); ok {
				line += fmt.Sprintf(" [part %d]", int(part))
			}
			names = append(names, fmt.Sprintf("%-34s → %v", line, ev["orderStatus"]))
		}
		return strings.Join(names, "\n"), broadcast
	}
	payment := func(amount, to string) string {
		return fmt.Sprintf(`{"walletId":%q,"asset":"USDC","amount":%q,"destination":{"address":%q},"reference":"inv-2026-0042"}`, wallet, amount, to)
	}
	follow(pay.SK, "payments", payment("500", whitelisted), "", "confirmed")
	follow(pay.SK, "payments", payment("20000", whitelisted), "APPROVE", "confirmed")
	follow(pay.SK, "payments", payment("20000", whitelisted), "REJECT", "rejected")
	follow(pay.SK, "payments", payment("10", "0x3333333333333333333333333333333333333333"), "", "rejected")
	follow(pay.SK, "payments", payment("10", "0x000000000000000000000000000000000000dEaD"), "", "failed")
	legEvents, _ := follow(trade.SK, "trade-orders", fmt.Sprintf(`{"walletId":%q,"sellAsset":"USDC","buyAsset":"ETH","sellAmount":"300","maxSlippageBps":50}`, wallet), "", "confirmed")
	solanaEvents, solanaBroadcast := follow(pay.SK, "payments", fmt.Sprintf(`{"walletId":%q,"asset":"USDC","amount":"250","destination":{"address":%q}}`,
		walletOn(b.Credentials, "solana", true).ID, seed.SolanaPayees[0]), "", "confirmed")
	batchEvents, batchBroadcast := follow(pay.SK, "payments", fmt.Sprintf(`{"walletId":%q,"asset":"USDC","recipients":[`+
		`{"address":%q,"amount":"120","reference":"alice"},{"address":"0x2222222222222222222222222222222222222222","amount":"95.5","reference":"bob"}]}`,
		wallet, whitelisted), "", "confirmed")

	// A payout schedule's run: its order's Order.Created names the schedule.
	r := send(t, "POST", api+"/payout-schedules", pay.SK, `{"payment":`+payment("5", whitelisted)+`,"every":"PT1S"}`)
	if r.status != http.StatusCreated {
		t.Fatalf("create a payout schedule: %d %s", r.status, r.raw)
	}
	scheduleID := r.body["id"].(string)
	var scheduledCreated json.RawMessage
	wait.For(t, 30*time.Second, "a run of the payout schedule to make its order", func() bool {
		runs := call(t, "GET", api+"/payout-schedules/"+scheduleID+"/runs", pay.Read).body["data"].([]any)
		for _, run := range runs {
			if id, ok := run.(map[string]any)["orderId"].(string); ok {
				created := call(t, "GET", api+"/events?orderId="+id, pay.Read).body["data"].([]any)
				if len(created) > 0 {
					scheduledCreated, _ = json.Marshal(created[0])
				}
			}
		}
		return scheduledCreated != nil
	})
	if r := send(t, "DELETE", api+"/payout-schedules/"+scheduleID, pay.SK, ""); r.status != http.StatusOK {
		t.Fatalf("delete the payout schedule: %d %s", r.status, r.raw)
	}

	// A policy published at once, heard by a live config that names policy events: trade's,
	// whose orders have all run.
	r = send(t, "POST", b.APIURL+"/developer/websockets", trade.SK, `{"events":["policy.*"]}`)
	policyLive := dialLive(t, b.APIURL, r.body["id"].(string), trade.PK)
	r = send(t, "GET", api+"/policies/trade", trade.SK, "")
	rules, _ := json.Marshal(r.body["rules"])
	if r = send(t, "PUT", api+"/policies/trade", trade.SK, string(rules)); r.status != http.StatusOK {
		t.Fatalf("put the trade policy: %d %s", r.status, r.raw)
	}
	select {
	case f := <-policyLive.frames:
		examples[events.PolicyPublished], _ = json.Marshal(f["data"])
	case <-time.After(10 * time.Second):
		t.Fatal("no Policy.Published frame")
	}

	// websocket.test reaches a live connection; webhook.test a receiver.
	r = send(t, "POST", b.APIURL+"/developer/websockets", pay.SK, `{"events":["order.*"]}`)
	configID := r.body["id"].(string)
	live := dialLive(t, b.APIURL, configID, pay.PK)
	send(t, "POST", b.APIURL+"/developer/websockets/"+configID+"/test", pay.SK, "")
	select {
	case f := <-live.frames:
		examples[events.WebSocketTest], _ = json.Marshal(f["data"])
	case <-time.After(10 * time.Second):
		t.Fatal("no websocket.test frame")
	}
	bodies := make(chan []byte, 1)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		select {
		case bodies <- body:
		default:
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()
	r = send(t, "POST", b.APIURL+"/developer/webhooks", pay.SK, `{"url":"`+receiver.URL+`/hooks","events":["webhook.test"]}`)
	send(t, "POST", b.APIURL+"/developer/webhooks/"+r.body["id"].(string)+"/test", pay.SK, "")
	select {
	case body := <-bodies:
		examples[events.WebhookTest] = body
	case <-time.After(20 * time.Second):
		t.Fatal("no webhook.test message")
	}

	// An endpoint that fails every attempt, sent test messages until the service disables
	// it; a live config of the app that names webhook events hears of it.
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer failing.Close()
	r = send(t, "POST", b.APIURL+"/developer/websockets", pay.SK, `{"events":["webhook.*"]}`)
	hookLive := dialLive(t, b.APIURL, r.body["id"].(string), pay.PK)
	r = send(t, "POST", b.APIURL+"/developer/webhooks", pay.SK, `{"url":"`+failing.URL+`/hooks","events":["order.confirmed"]}`)
	failingID := r.body["id"].(string)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	giveUp := time.After(30 * time.Second)
	for examples[events.WebhookDisabled] == nil {
		select {
		case f := <-hookLive.frames:
			if f["event"] == events.WebhookDisabled {
				examples[events.WebhookDisabled], _ = json.Marshal(f["data"])
			}
		case <-tick.C:
			// 202 while it is enabled; 409 once it is disabled.
			send(t, "POST", b.APIURL+"/developer/webhooks/"+failingID+"/test", pay.SK, "")
		case <-giveUp:
			t.Fatal("no Webhook.Disabled frame")
		}
	}

	for _, name := range events.Names {
		if examples[name] == nil {
			t.Fatalf("the run emitted no %s", name)
		}
	}
	doc := renderEventsDoc(examples, edges, legEvents, solanaEvents, solanaBroadcast, batchEvents, batchBroadcast, scheduledCreated)
	if os.Getenv("WRITE_EVENTS_DOC") != "" {
		if err := os.WriteFile(eventsDoc, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	committed, err := os.ReadFile(eventsDoc)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := eventsDocShape(string(committed)), eventsDocShape(doc); got != want {
		t.Fatalf("docs/events.md no longer matches a run (make docs-events rewrites it):\n--- committed\n%s\n--- this run\n%s", got, want)
	}
}

// renderEventsDoc writes the catalogue: the status machine, then every event with its
// meaning and an example payload.
func renderEventsDoc(examples map[string]json.RawMessage, edges map[[2]string]bool, legEvents, solanaEvents string, solanaBroadcast json.RawMessage,
	batchEvents string, batchBroadcast, scheduledCreated json.RawMessage) string {
	var b strings.Builder
	b.WriteString(`# Events

Every change of an order appends one event, in the same transaction as the change, and so
does every publish of an app's policy (` + "`Policy.Published`" + `) and every webhook the service
disables (` + "`Webhook.Disabled`" + `): events of the app. The same
event reaches you three ways, with the same body (its ` + "`data`" + `): live over a WebSocket
([live-events.md](live-events.md)), durably by webhook ([webhooks.md](webhooks.md)), and on
request from ` + "`GET /api/v1/events?orderId=&cursor=`" + ` (kept 30 days).

Every event of an order carries ` + "`id`" + ` (` + "`evt_…`" + `, the same on every channel: deduplicate on it),
` + "`orderId`, `domain`, `orderStatus`" + ` (the status after the event), ` + "`sequence`" + ` (1, 2, 3 … per order:
a gap means you missed one), ` + "`correlationId`" + ` (of the request that caused it) and ` + "`occurredAt`" + `.
Leg events of multi-leg orders also carry ` + "`leg`" + `.

The examples below were produced by a run of the dev bundle (` + "`make docs-events`" + ` regenerates this
page, and the test suite fails if the events or their fields change without it).

## The status machine

Every transition below was taken by an order of that run.

` + "```mermaid\nstateDiagram-v2\n    [*] --> draft\n")
	var lines []string
	for e := range edges {
		lines = append(lines, fmt.Sprintf("    %s --> %s", e[0], e[1]))
	}
	sort.Strings(lines)
	b.WriteString(strings.Join(lines, "\n"))
	b.WriteString("\n    confirmed --> [*]\n    failed --> [*]\n    rejected --> [*]\n```\n\n")
	b.WriteString("Not in that run: a signing request that expires (24 h) ends the order `failed` " +
		"(`signing_expired`) from `pending_signature`, and an approval that expires (72 h) ends it `rejected` " +
		"(`expired`) from `pending_approval`.\n\n")
	b.WriteString("A multi-leg order signs, broadcasts and confirms each leg before the next; a trade selling USDC for ETH (`APPROVE`, then `SWAP`):\n\n```\n" +
		legEvents + "\n```\n\n")
	var broadcast bytes.Buffer
	_ = json.Indent(&broadcast, solanaBroadcast, "", "  ")
	b.WriteString("A payment on Solana (USDC from a wallet the dev signer signs for) emits the same events; its `txHash` " +
		"is the transaction's signature, in base58. A leg whose transaction lapsed (its blockhash expired before it landed) " +
		"adds a second `Wallet.SigningRequested`, `Wallet.TransactionSigned` and `Order.Broadcast`, each with `replacesTxHash` " +
		"naming the lapsed transaction, as an EVM replacement does ([chains.md](chains.md)).\n\n```\n" + solanaEvents + "\n```\n\n" +
		"Its `Order.Broadcast`:\n\n```\n" + broadcast.String() + "\n```\n\n")
	var batch, scheduled bytes.Buffer
	_ = json.Indent(&batch, batchBroadcast, "", "  ")
	_ = json.Indent(&scheduled, scheduledCreated, "", "  ")
	b.WriteString("A batch payment ([payouts.md](payouts.md)) of two recipients, one part: each leg event and the terminal one " +
		"carry `part` (from 1); a batch of more recipients than a part holds repeats the leg events for each part, " +
		"`leg` and `part` naming it.\n\n```\n" + batchEvents + "\n```\n\nIts `Order.Broadcast`:\n\n```\n" + batch.String() +
		"\n```\n\nAn order that a payout schedule's run made ([payouts.md](payouts.md#payout-schedules)) names the schedule " +
		"in its `Order.Created` (`scheduleId`), and its `correlationId` is the run's Idempotency-Key, `<scheduleId>:<nominal time>`:" +
		"\n\n```\n" + scheduled.String() + "\n```\n\n## The events\n")
	for _, name := range events.Names {
		var pretty bytes.Buffer
		_ = json.Indent(&pretty, examples[name], "", "  ")
		fmt.Fprintf(&b, "\n### `%s`\n\n%s\n\n```json\n%s\n```\n", name, eventMeaning[name], pretty.String())
	}
	return b.String()
}

var (
	eventHeading = regexp.MustCompile("(?m)^### `([^`]+)`$")
	jsonBlock    = regexp.MustCompile("(?s)```json\n(.*?)\n```")
	edgeLine     = regexp.MustCompile(`(?m)^    \S+ --> \S+$`)
)

// eventsDocShape is what must not drift between the committed catalogue and a run: the
// events, in order, each with the paths of its fields (not their values, which change
// with every run), and the transitions of the status machine.
func eventsDocShape(doc string) string {
	var out []string
	sections := eventHeading.FindAllStringSubmatchIndex(doc, -1)
	for i, s := range sections {
		end := len(doc)
		if i+1 < len(sections) {
			end = sections[i+1][0]
		}
		name := doc[s[2]:s[3]]
		var v any
		if m := jsonBlock.FindStringSubmatch(doc[s[1]:end]); m != nil {
			_ = json.Unmarshal([]byte(m[1]), &v)
		}
		out = append(out, name+": "+strings.Join(fieldPaths("", v), " "))
	}
	edges := edgeLine.FindAllString(doc, -1)
	slices.Sort(edges)
	return strings.Join(append(out, edges...), "\n")
}

func fieldPaths(prefix string, v any) []string {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	var out []string
	for k, child := range m {
		out = append(out, prefix+k)
		out = append(out, fieldPaths(prefix+k+".", child)...)
	}
	sort.Strings(out)
	return out
}
