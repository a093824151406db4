package api

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/store"
)

// An order create with an Idempotency-Key is answered with the response its own
// transaction stored for the key, and a retry gets exactly those bytes.
func TestAnOrderCreateIsAnsweredAsItsTransactionStoredIt(t *testing.T) {
	f := newFixture(t)
	pay := f.creds.Keys["pay"].SK
	body := `{"walletId":"` + f.creds.Wallets[0].ID + `","asset":"USDC","amount":"5","destination":{"address":"0x1111111111111111111111111111111111111111"}}`

	first := f.post(t, "/api/v1/payments", pay, body, "Idempotency-Key", "create-once")
	if first.status != http.StatusCreated || first.header.Get(replayedHeader) != "" {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	id := decodeOrder(t, first)["id"].(string)
	rec, err := f.store.IdempotencyRecordOf(t.Context(), f.creds.OrgID, "create-once")
	if err != nil || rec == nil {
		t.Fatalf("record: %v %v", rec, err)
	}
	var headers map[string]string
	_ = json.Unmarshal([]byte(rec.ResponseHeaders), &headers)
	if rec.State != store.IdempotencyDone || rec.StatusCode != http.StatusCreated || string(rec.ResponseBody) != string(first.body) ||
		headers["Location"] != "/api/v1/payments/"+id || headers["Location"] != first.header.Get("Location") ||
		headers["Content-Type"] != first.header.Get("Content-Type") {
		t.Fatalf("record %+v against the answer %d %v %s", rec, first.status, first.header, first.body)
	}

	again := f.post(t, "/api/v1/payments", pay, body, "Idempotency-Key", "create-once")
	if again.status != http.StatusCreated || again.header.Get(replayedHeader) != "true" || string(again.body) != string(first.body) ||
		again.header.Get("Location") != first.header.Get("Location") {
		t.Fatalf("replay: %d %v %s", again.status, again.header, again.body)
	}
	f.post(t, "/api/v1/payments", pay, `{"walletId":"`+f.creds.Wallets[0].ID+`","asset":"USDC","amount":"6","destination":{"address":"0x1111111111111111111111111111111111111111"}}`,
		"Idempotency-Key", "create-once").wantProblem(t, 422, apitypes.CodeIdempotencyKeyReused)

	// A refused create keeps nothing: the corrected request runs under the same key.
	f.post(t, "/api/v1/payments", pay, `{"walletId":"`+f.creds.Wallets[0].ID+`","asset":"USDC","amount":"-1"}`,
		"Idempotency-Key", "create-fixed").wantProblem(t, 422, apitypes.CodeValidationFailed)
	if r := f.post(t, "/api/v1/payments", pay, body, "Idempotency-Key", "create-fixed"); r.status != http.StatusCreated || r.header.Get(replayedHeader) != "" {
		t.Fatalf("corrected: %d %s", r.status, r.body)
	}
}

// Creates sent at once under one key make one order: the others hear 409 (the first was
// still running) or, once it has committed, its answer.
func TestConcurrentCreatesUnderOneKeyMakeOneOrder(t *testing.T) {
	f := newFixture(t)
	pay := f.creds.Keys["pay"].SK
	body := `{"walletId":"` + f.creds.Wallets[0].ID + `","asset":"USDC","amount":"7","destination":{"address":"0x1111111111111111111111111111111111111111"}}`
	const n = 12
	answers := make([]response, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { answers[i] = f.post(t, "/api/v1/payments", pay, body, "Idempotency-Key", "create-race") })
	}
	wg.Wait()
	created := ""
	for _, a := range answers {
		switch {
		case a.status == http.StatusCreated && a.header.Get(replayedHeader) == "":
			if created != "" {
				t.Fatalf("two creates ran: %s and %s", created, a.body)
			}
			created = decodeOrder(t, a)["id"].(string)
		case a.status == http.StatusCreated:
		case a.status == http.StatusConflict && a.problem.Code == apitypes.CodeIdempotencyKeyInUse:
		default:
			t.Fatalf("answer %d %s", a.status, a.body)
		}
	}
	if created == "" {
		t.Fatal("no create ran")
	}
	for _, a := range answers {
		if a.status == http.StatusCreated && decodeOrder(t, a)["id"] != created {
			t.Fatalf("a replay names another order: %s", a.body)
		}
	}
	list := f.do(t, "GET", "/api/v1/payments?limit=100", pay, nil)
	var page struct {
		Data []map[string]any `json:"data"`
	}
	if err := json.Unmarshal(list.body, &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0]["id"] != created {
		t.Fatalf("payments after the race: %s", list.body)
	}
}
