package api

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/opentreasury/treasury/activities"
	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/webhook"
	"github.com/opentreasury/treasury/workflows"
)

type createdWebhook = apitypes.Webhook

type deliveryList struct {
	Data       []apitypes.WebhookDelivery `json:"data"`
	NextCursor *string                    `json:"nextCursor"`
}

// The webhooks of an app: the secret shown once (and on a rotation), the same subscription
// rules as WebSocket configs, URLs vetted, a test message and a redelivery of the same
// message, and nothing of it reachable from another app.
func TestWebhookConfigs(t *testing.T) {
	f := newFixture(t)
	dev := f.creds.Keys["pay"].SK
	r := f.post(t, "/developer/webhooks", dev, `{"url":"https://hooks.example.com/treasury","events":["Order.*","order.submitted"],"description":"payouts"}`,
		"Idempotency-Key", "hook-1")
	var hook createdWebhook
	if err := json.Unmarshal(r.body, &hook); err != nil || r.status != 201 || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if !strings.HasPrefix(hook.Secret, webhook.SecretPrefix) || !strings.HasPrefix(hook.ID, "whk_") || !hook.Enabled ||
		strings.Join(hook.Events, ",") != "order.*,order.submitted" || hook.App != "pay" || hook.Description != "payouts" {
		t.Fatalf("created %+v", hook)
	}
	if replay := f.post(t, "/developer/webhooks", dev, `{"url":"https://hooks.example.com/treasury","events":["Order.*","order.submitted"],"description":"payouts"}`,
		"Idempotency-Key", "hook-1"); strings.Contains(string(replay.body), hook.Secret) || !strings.Contains(string(replay.body), hook.ID) {
		t.Fatalf("the replay shows the secret again or another webhook: %s", replay.body)
	}
	for _, path := range []string{"/developer/webhooks", "/developer/webhooks/" + hook.ID} {
		got := f.do(t, "GET", path, dev, nil)
		if got.status != 200 || !strings.Contains(string(got.body), hook.ID) || strings.Contains(string(got.body), hook.Secret) {
			t.Fatalf("GET %s: %d %s", path, got.status, got.body)
		}
	}

	for _, bad := range []string{
		`{"url":"http://hooks.example.com/x","events":["*"]}`,
		`{"url":"https://10.0.0.7/x","events":["*"]}`,
		`{"url":"https://[::1]/x","events":["*"]}`,
		`{"url":"https://hooks.example.com/x","events":["order.nothing"]}`,
		`{"url":"https://hooks.example.com/x","events":[]}`,
		`{"url":"https://hooks.example.com/x","events":["*"],"secret":"whsec_mine"}`,
	} {
		f.post(t, "/developer/webhooks", dev, bad).wantProblem(t, 422, apitypes.CodeValidationFailed)
	}

	patched := f.do(t, "PATCH", "/developer/webhooks/"+hook.ID, dev, strings.NewReader(`{"events":["*"],"enabled":false}`))
	if patched.status != 200 || !strings.Contains(string(patched.body), `"events":["*"]`) || !strings.Contains(string(patched.body), `"enabled":false`) {
		t.Fatalf("patch: %d %s", patched.status, patched.body)
	}
	f.post(t, "/developer/webhooks/"+hook.ID+"/test", dev, `{}`).wantProblem(t, 409, apitypes.CodeConflict)
	f.do(t, "PATCH", "/developer/webhooks/"+hook.ID, dev, strings.NewReader(`{"url":"ftp://x"}`)).wantProblem(t, 422, apitypes.CodeValidationFailed)
	f.do(t, "PATCH", "/developer/webhooks/"+hook.ID, dev, strings.NewReader(`{"enabled":true}`))

	rotated := f.post(t, "/developer/webhooks/"+hook.ID+"/rotate-secret", dev, `{}`)
	var rot createdWebhook
	if err := json.Unmarshal(rotated.body, &rot); err != nil || rotated.status != 200 || rot.Secret == hook.Secret ||
		!strings.HasPrefix(rot.Secret, webhook.SecretPrefix) || rot.PreviousSecretExpiresAt == nil {
		t.Fatalf("rotate: %d %s", rotated.status, rotated.body)
	}
	if until := rot.PreviousSecretExpiresAt.Time; time.Until(until) < 23*time.Hour || time.Until(until) > 25*time.Hour {
		t.Fatalf("the old secret signs until %s", until)
	}

	sent := f.post(t, "/developer/webhooks/"+hook.ID+"/test", dev, `{}`)
	var test apitypes.WebhookDelivery
	if err := json.Unmarshal(sent.body, &test); err != nil || sent.status != 202 || test.Event != "webhook.test" ||
		test.Status != "pending" || !strings.HasPrefix(test.MessageID, "msg_") || test.NextAttemptAt == nil {
		t.Fatalf("test: %d %s", sent.status, sent.body)
	}
	again := f.post(t, "/developer/webhooks/"+hook.ID+"/deliveries/"+test.ID+"/redeliver", dev, `{}`)
	var redelivery apitypes.WebhookDelivery
	if err := json.Unmarshal(again.body, &redelivery); err != nil || again.status != 202 || redelivery.MessageID != test.MessageID ||
		redelivery.ID == test.ID {
		t.Fatalf("redeliver: %d %s", again.status, again.body)
	}
	var list deliveryList
	if err := json.Unmarshal(f.do(t, "GET", "/developer/webhooks/"+hook.ID+"/deliveries?event=webhook.test&status=pending", dev, nil).body, &list); err != nil ||
		len(list.Data) != 2 || list.Data[0].ID != redelivery.ID {
		t.Fatalf("deliveries %+v %v", list, err)
	}
	f.do(t, "GET", "/developer/webhooks/"+hook.ID+"/deliveries?status=lost", dev, nil).wantProblem(t, 422, apitypes.CodeValidationFailed)
	f.do(t, "GET", "/developer/webhooks/"+hook.ID+"/deliveries?event=order.nothing", dev, nil).wantProblem(t, 422, apitypes.CodeValidationFailed)
	f.post(t, "/developer/webhooks/"+hook.ID+"/deliveries/dlv_nothing/redeliver", dev, `{}`).wantProblem(t, 404, apitypes.CodeNotFound)

	trade := f.creds.Keys["trade"].SK
	f.do(t, "GET", "/developer/webhooks/"+hook.ID, trade, nil).wantProblem(t, 404, apitypes.CodeNotFound)
	f.post(t, "/developer/webhooks/"+hook.ID+"/test", trade, `{}`).wantProblem(t, 404, apitypes.CodeNotFound)
	if got := f.do(t, "GET", "/developer/webhooks", trade, nil); strings.Contains(string(got.body), hook.ID) {
		t.Fatal("another app lists the webhook")
	}

	if r := f.do(t, "DELETE", "/developer/webhooks/"+hook.ID, dev, nil); r.status != 200 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	f.do(t, "GET", "/developer/webhooks/"+hook.ID, dev, nil).wantProblem(t, 404, apitypes.CodeNotFound)
	f.do(t, "GET", "/developer/webhooks/"+hook.ID+"/deliveries", dev, nil).wantProblem(t, 404, apitypes.CodeNotFound)
	if strings.Contains(f.logs.String(), strings.TrimPrefix(hook.Secret, webhook.SecretPrefix)) ||
		strings.Contains(f.logs.String(), strings.TrimPrefix(rot.Secret, webhook.SecretPrefix)) {
		t.Fatal("a webhook secret reached the log")
	}
}

// Without a sealing key the service cannot keep a secret: creating a webhook is 503, not a
// webhook signed by nothing.
func TestWebhooksNeedASealingKey(t *testing.T) {
	f := newFixture(t)
	f.handler = NewRouter(Config{Store: f.store, Log: quietLog(), Service: &service.Service{Store: f.store, Log: quietLog()}})
	f.post(t, "/developer/webhooks", f.creds.Keys["pay"].SK, `{"url":"https://hooks.example.com/x","events":["*"]}`).
		wantProblem(t, 503, apitypes.CodeUnavailable)
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// inlineRecoveries runs a webhook recovery to its end inside its start, page by page as
// the worker would.
type inlineRecoveries struct{ acts *activities.WebhookRecoveries }

func (r inlineRecoveries) StartWebhookRecovery(ctx context.Context, id string) error {
	for {
		p, err := r.acts.RecoveryPage(ctx, workflows.RecoveryInput{RecoveryID: id})
		if err != nil || p.Done {
			return err
		}
	}
}

// A webhook's own rate limit is set, changed and removed; a recovery of a window sends
// again, with their webhook-ids, the messages skipped while the webhook was disabled,
// once under its Idempotency-Key, and is another app's to read by no one.
func TestWebhookRateLimitAndRecovery(t *testing.T) {
	f := newFixture(t)
	dev := f.creds.Keys["pay"].SK
	var hook apitypes.Webhook
	r := f.post(t, "/developer/webhooks", dev, `{"url":"https://hooks.example.com/t","events":["order.*"],"rateLimit":50}`)
	if err := json.Unmarshal(r.body, &hook); err != nil || r.status != 201 || hook.RateLimit == nil || *hook.RateLimit != 50 || hook.FailingSince != nil {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	path := "/developer/webhooks/" + hook.ID
	f.post(t, "/developer/webhooks", dev, `{"url":"https://hooks.example.com/t","events":["*"],"rateLimit":0}`).wantProblem(t, 422, apitypes.CodeValidationFailed)
	f.do(t, "PATCH", path, dev, strings.NewReader(`{"rateLimit":10001}`)).wantProblem(t, 422, apitypes.CodeValidationFailed)
	f.do(t, "PATCH", path, dev, strings.NewReader(`{"rateLimit":"fast"}`)).wantProblem(t, 422, apitypes.CodeValidationFailed)
	if got := f.do(t, "PATCH", path, dev, strings.NewReader(`{"rateLimit":null,"enabled":false}`)); got.status != 200 ||
		!strings.Contains(string(got.body), `"rateLimit":null`) {
		t.Fatalf("patch: %d %s", got.status, got.body)
	}

	since := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339Nano)
	for range 2 {
		p := f.post(t, "/api/v1/payments", dev, `{"walletId":"`+f.creds.Wallets[0].ID+`","asset":"USDC","amount":"5",`+
			`"destination":{"address":"0x1111111111111111111111111111111111111111"}}`)
		if p.status != 201 {
			t.Fatalf("payment: %d %s", p.status, p.body)
		}
	}
	var skipped deliveryList
	if err := json.Unmarshal(f.do(t, "GET", path+"/deliveries?status=skipped", dev, nil).body, &skipped); err != nil || len(skipped.Data) != 2 {
		t.Fatalf("skipped while disabled: %+v %v", skipped, err)
	}
	body := `{"since":"` + since + `"}`
	f.post(t, path+"/recover", dev, body).wantProblem(t, 409, apitypes.CodeConflict)
	f.do(t, "PATCH", path, dev, strings.NewReader(`{"enabled":true}`))

	for _, bad := range []string{`{}`, `{"since":"yesterday"}`, `{"since":"` + since + `","until":"` + since + `"}`,
		`{"since":"` + time.Now().Add(time.Hour).UTC().Format(time.RFC3339) + `"}`, `{"since":"` + since + `","from":"x"}`} {
		f.post(t, path+"/recover", dev, bad).wantProblem(t, 422, apitypes.CodeValidationFailed)
	}
	started := f.post(t, path+"/recover", dev, body, "Idempotency-Key", "recover-1")
	var rec apitypes.WebhookRecovery
	if err := json.Unmarshal(started.body, &rec); err != nil || started.status != 202 || !strings.HasPrefix(rec.ID, "rcv_") ||
		rec.WebhookID != hook.ID || rec.Status != "running" {
		t.Fatalf("recover: %d %s", started.status, started.body)
	}
	if replay := f.post(t, path+"/recover", dev, body, "Idempotency-Key", "recover-1"); replay.status != 202 ||
		!strings.Contains(string(replay.body), rec.ID) {
		t.Fatalf("replay: %d %s", replay.status, replay.body)
	}
	var recs struct{ Data []apitypes.WebhookRecovery }
	if err := json.Unmarshal(f.do(t, "GET", path+"/recoveries", dev, nil).body, &recs); err != nil || len(recs.Data) != 1 || recs.Data[0].ID != rec.ID {
		t.Fatalf("recoveries %+v %v", recs, err)
	}
	// The test's starter runs the job to its end before the answer.
	var done apitypes.WebhookRecovery
	if got := f.do(t, "GET", path+"/recoveries/"+rec.ID, dev, nil); got.status != 200 || json.Unmarshal(got.body, &done) != nil ||
		done.Status != "completed" || done.Scanned != 2 || done.Requeued != 2 || done.CompletedAt == nil {
		t.Fatalf("recovery: %d %s", got.status, got.body)
	}
	var pending deliveryList
	if err := json.Unmarshal(f.do(t, "GET", path+"/deliveries?status=pending", dev, nil).body, &pending); err != nil || len(pending.Data) != 2 {
		t.Fatalf("pending after the recovery: %+v %v", pending, err)
	}
	ids := map[string]bool{skipped.Data[0].MessageID: true, skipped.Data[1].MessageID: true}
	for _, d := range pending.Data {
		if !ids[d.MessageID] {
			t.Fatalf("a recovered message has a new webhook-id: %+v", d)
		}
	}

	trade := f.creds.Keys["trade"].SK
	f.post(t, path+"/recover", trade, body).wantProblem(t, 404, apitypes.CodeNotFound)
	f.do(t, "GET", path+"/recoveries/"+rec.ID, trade, nil).wantProblem(t, 404, apitypes.CodeNotFound)
	f.do(t, "GET", path+"/recoveries/rcv_nothing", dev, nil).wantProblem(t, 404, apitypes.CodeNotFound)
}
