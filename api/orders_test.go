package api

import (
	"context"
	"encoding/json"
	"math/big"
	"slices"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

func (f *fixture) post(t *testing.T, target, token, body string, headers ...string) response {
	t.Helper()
	return f.do(t, "POST", target, token, strings.NewReader(body), append([]string{"Content-Type", "application/json"}, headers...)...)
}

func decodeOrder(t *testing.T, r response) map[string]any {
	t.Helper()
	var o map[string]any
	if err := json.Unmarshal(r.body, &o); err != nil {
		t.Fatalf("order body: %s", r.body)
	}
	return o
}

func TestCreateOrdersOfEveryDomain(t *testing.T) {
	f := newFixture(t)
	eth := f.creds.Wallets[0].ID // ethereum, autoSign
	cases := []struct {
		collection, app, body, amountUsd, legs string
		fields                                 map[string]any
	}{
		{"payments", "pay", `{"walletId":"` + eth + `","asset":"USDC","amount":"500","destination":{"address":"0x1111111111111111111111111111111111111111","label":"Supplier"},"reference":"inv-1"}`,
			"500.00", "TRANSFER", map[string]any{"asset": "USDC", "amount": "500", "reference": "inv-1"}},
		{"trade-orders", "trade", `{"walletId":"` + eth + `","sellAsset":"WBTC","buyAsset":"ETH","sellAmount":"0.5","maxSlippageBps":50}`,
			"30000.00", "APPROVE,SWAP", map[string]any{"sellAsset": "WBTC", "buyAsset": "ETH", "sellAmount": "0.5", "maxSlippageBps": float64(50)}},
		{"earn-orders", "earn", `{"walletId":"` + eth + `","protocol":"aave","action":"withdraw","asset":"WBTC","amount":"0.1"}`,
			"6000.00", "WITHDRAW,CLAIM", map[string]any{"protocol": "aave", "action": "withdraw", "asset": "WBTC", "amount": "0.1"}},
		{"borrow-orders", "borrow", `{"walletId":"` + eth + `","protocol":"compound","action":"draw","asset":"USDC","amount":"1000.5","collateralAsset":"ETH"}`,
			"1000.50", "DRAW", map[string]any{"protocol": "compound", "action": "draw", "collateralAsset": "ETH"}},
	}
	for _, tc := range cases {
		t.Run(tc.collection, func(t *testing.T) {
			r := f.post(t, "/api/v1/"+tc.collection, f.creds.Keys[tc.app].SK, tc.body, correlationHeader, "create-"+tc.app)
			if r.status != 201 {
				t.Fatalf("%d %s", r.status, r.body)
			}
			o := decodeOrder(t, r)
			if r.header.Get("Location") != "/api/v1/"+tc.collection+"/"+o["id"].(string) {
				t.Fatalf("Location %q", r.header.Get("Location"))
			}
			if o["status"] != "draft" || o["app"] != tc.app || o["walletId"] != eth || o["chain"] != "ethereum" ||
				o["amountUsd"] != tc.amountUsd || o["correlationId"] != "create-"+tc.app || o["workflowId"] != "order-"+o["id"].(string) {
				t.Fatalf("order %s", r.body)
			}
			for k, v := range tc.fields {
				if o[k] != v {
					t.Fatalf("%s = %v, want %v", k, o[k], v)
				}
			}
			var legs []string
			for _, l := range o["legs"].([]any) {
				leg := l.(map[string]any)
				legs = append(legs, leg["leg"].(string))
				if leg["status"] != "pending" {
					t.Fatalf("leg %v", leg)
				}
			}
			if strings.Join(legs, ",") != tc.legs {
				t.Fatalf("legs %v, want %s", legs, tc.legs)
			}
			if len(o["payloadHash"].(string)) != 64 || o["approval"].(map[string]any)["required"] != false {
				t.Fatalf("payloadHash/approval %s", r.body)
			}

			got := f.do(t, "GET", "/api/v1/"+tc.collection+"/"+o["id"].(string), f.creds.Keys[tc.app].Read, nil)
			if got.status != 200 {
				t.Fatalf("get %d %s", got.status, got.body)
			}
			g := decodeOrder(t, got)
			hist := g["history"].([]any)
			if len(hist) != 1 || hist[0].(map[string]any)["status"] != "draft" {
				t.Fatalf("history %v", g["history"])
			}
			evs, err := f.store.OrderEvents(context.Background(), o["id"].(string))
			if err != nil || len(evs) != 1 || evs[0].Event != "Order.Created" || evs[0].Sequence != 1 || evs[0].CorrelationID != "create-"+tc.app {
				t.Fatalf("events %+v %v", evs, err)
			}
			audit, err := f.store.ListAudit(context.Background(), f.creds.OrgID, []string{tc.app}, nil, "", 100)
			audit = slices.DeleteFunc(audit, func(a store.AuditLog) bool { return a.CorrelationID == "seed" })
			if err != nil || len(audit) != 1 || audit[0].ResourceID != o["id"] || audit[0].CorrelationID != "create-"+tc.app {
				t.Fatalf("audit %+v %v", audit, err)
			}
		})
	}
}

func TestCreateOrderRefusals(t *testing.T) {
	f := newFixture(t)
	eth := f.creds.Wallets[0].ID
	pay := `{"walletId":"` + eth + `","asset":"USDC","amount":"5","destination":{"address":"0x1111111111111111111111111111111111111111"}}`
	otherWallet := func() string {
		ws, _ := f.store.ListWallets(context.Background(), f.creds.OtherOrg.OrgID, "", 1)
		return ws[0].ID
	}()
	cases := []struct {
		name, target, token, body string
		status                    int
		code, field               string
	}{
		{"read key cannot create", "/api/v1/payments", f.creds.Keys["pay"].Read, pay, 403, apitypes.CodePermissionDenied, ""},
		{"approver cannot create", "/api/v1/payments", f.creds.Keys["pay"].Approve, pay, 403, apitypes.CodePermissionDenied, ""},
		{"trade key cannot create payments", "/api/v1/payments", f.creds.Keys["trade"].SK, pay, 403, apitypes.CodePermissionDenied, ""},
		{"wallet of another organisation", "/api/v1/payments", f.creds.Keys["pay"].SK, strings.Replace(pay, eth, otherWallet, 1), 422, apitypes.CodeValidationFailed, "walletId"},
		{"unknown wallet", "/api/v1/payments", f.creds.Keys["pay"].SK, strings.Replace(pay, eth, "wal_nope", 1), 422, apitypes.CodeValidationFailed, "walletId"},
		{"asset not on the chain", "/api/v1/payments", f.creds.Keys["pay"].SK, strings.Replace(pay, "USDC", "SOL", 1), 422, apitypes.CodeValidationFailed, "asset"},
		{"amount as a number", "/api/v1/payments", f.creds.Keys["pay"].SK, strings.Replace(pay, `"5"`, `5`, 1), 422, apitypes.CodeValidationFailed, "amount"},
		{"unknown field", "/api/v1/payments", f.creds.Keys["pay"].SK, strings.Replace(pay, `{`, `{"memo":"x",`, 1), 422, apitypes.CodeValidationFailed, "memo"},
		{"not JSON", "/api/v1/payments", f.creds.Keys["pay"].SK, `walletId=1`, 422, apitypes.CodeValidationFailed, "body"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := f.post(t, tc.target, tc.token, tc.body)
			r.wantProblem(t, tc.status, tc.code)
			if tc.field != "" && (len(r.problem.Errors) == 0 || r.problem.Errors[0].Field != tc.field) {
				t.Fatalf("want an error on %s: %s", tc.field, r.body)
			}
		})
	}
	list, _ := f.store.ListOrders(context.Background(), store.OrderFilter{OrgID: f.creds.OrgID, App: "pay", Limit: 10})
	if len(list) != 0 {
		t.Fatalf("refused requests created %d orders", len(list))
	}
}

// An amount a chain cannot carry is refused at create and at evaluate, naming the field:
// never a 201 that the chain would encode as another amount, never a 500 from the
// database (a 5,000-digit amount overflowed PostgreSQL's NUMERIC).
func TestAmountsTheChainCannotCarryAreRefused(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		f := newFixtureOn(t, s)
		var eth, sol string
		for _, w := range f.creds.Wallets {
			switch {
			case w.Chain == "ethereum" && eth == "":
				eth = w.ID
			case w.Chain == "solana" && sol == "":
				sol = w.ID
			}
		}
		// 2^256 base units of USDC and one USDC more: as an ERC-20 transfer, 1 USDC.
		overWord := new(big.Int).Add(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1_000_000))
		overU64 := new(big.Int).Lsh(big.NewInt(1), 64)
		payment := func(wallet, amount, to string) string {
			return `{"walletId":"` + wallet + `","asset":"USDC","amount":"` + amount + `","destination":{"address":"` + to + `"}}`
		}
		const evmTo, solTo = "0x1111111111111111111111111111111111111111", "C68HJbL4YDuM47YaQrB7vQGKLVtTKkxifD2XgUtaXTss"
		bodies := map[string]string{
			"over a 256-bit word on ethereum": payment(eth, decimal.NewFromBigInt(overWord, -6).String(), evmTo),
			"over a u64 on solana":            payment(sol, decimal.NewFromBigInt(overU64, -6).String(), solTo),
			"5,000 digits":                    payment(eth, strings.Repeat("9", 5000), evmTo),
		}
		for name, body := range bodies {
			for _, target := range []string{"/api/v1/payments", "/api/v1/policies/pay/evaluate"} {
				r := f.post(t, target, f.creds.Keys["pay"].SK, body)
				r.wantProblem(t, 422, apitypes.CodeValidationFailed)
				if len(r.problem.Errors) != 1 || r.problem.Errors[0].Field != "amount" {
					t.Fatalf("%s at %s: %s", name, target, r.body)
				}
			}
		}
		list, _ := f.store.ListOrders(context.Background(), store.OrderFilter{OrgID: f.creds.OrgID, App: "pay", Limit: 10})
		if len(list) != 0 {
			t.Fatalf("refused amounts created %d orders", len(list))
		}
		// The largest amount each chain carries is an order like any other.
		for _, body := range []string{
			payment(eth, decimal.NewFromBigInt(orders.MaxBaseUnits(256), -6).String(), evmTo),
			payment(sol, decimal.NewFromBigInt(orders.MaxBaseUnits(64), -6).String(), solTo),
		} {
			if r := f.post(t, "/api/v1/payments", f.creds.Keys["pay"].SK, body); r.status != 201 {
				t.Fatalf("the largest amount the chain carries: %d %s", r.status, r.body)
			}
		}
	})
}

func TestOrdersAreInvisibleAcrossAppsAndOrgs(t *testing.T) {
	f := newFixture(t)
	eth := f.creds.Wallets[0].ID
	r := f.post(t, "/api/v1/payments", f.creds.Keys["pay"].SK,
		`{"walletId":"`+eth+`","asset":"USDC","amount":"5","destination":{"address":"0x1111111111111111111111111111111111111111"}}`)
	id := decodeOrder(t, r)["id"].(string)
	for _, target := range []string{"/api/v1/trade-orders/" + id} {
		f.do(t, "GET", target, f.creds.Keys["trade"].SK, nil).wantProblem(t, 404, apitypes.CodeNotFound)
	}
	f.do(t, "GET", "/api/v1/payments/"+id, f.creds.OtherOrg.Keys["pay"]["sk"], nil).wantProblem(t, 404, apitypes.CodeNotFound)
	var page apitypes.Page[map[string]any]
	other := f.do(t, "GET", "/api/v1/payments", f.creds.OtherOrg.Keys["pay"]["sk"], nil)
	if err := json.Unmarshal(other.body, &page); err != nil || len(page.Data) != 0 {
		t.Fatalf("another organisation lists our payments: %s", other.body)
	}
}

func TestListOrdersFiltersAndPages(t *testing.T) {
	f := newFixture(t)
	eth := f.creds.Wallets[0].ID
	body := `{"walletId":"` + eth + `","asset":"USDC","amount":"5","destination":{"address":"0x1111111111111111111111111111111111111111"}}`
	var made []string
	for range 3 {
		made = append(made, decodeOrder(t, f.post(t, "/api/v1/payments", f.creds.Keys["pay"].SK, body))["id"].(string))
	}
	var seen []string
	cursor := ""
	for range 5 {
		target := "/api/v1/payments?limit=2&status=draft"
		if cursor != "" {
			target += "&cursor=" + cursor
		}
		r := f.do(t, "GET", target, f.creds.Keys["pay"].Read, nil)
		var page apitypes.Page[map[string]any]
		if err := json.Unmarshal(r.body, &page); err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Data {
			seen = append(seen, o["id"].(string))
		}
		if page.NextCursor == "" {
			break
		}
		cursor = string(page.NextCursor)
	}
	if len(seen) != 3 || seen[0] != made[2] || seen[2] != made[0] {
		t.Fatalf("paging newest first: %v (made %v)", seen, made)
	}
	r := f.do(t, "GET", "/api/v1/payments?status=confirmed", f.creds.Keys["pay"].Read, nil)
	if !strings.Contains(string(r.body), `"data":[]`) {
		t.Fatalf("status filter: %s", r.body)
	}
	f.do(t, "GET", "/api/v1/payments?status=done", f.creds.Keys["pay"].Read, nil).wantProblem(t, 422, apitypes.CodeValidationFailed)
	f.do(t, "GET", "/api/v1/payments?createdAfter=yesterday", f.creds.Keys["pay"].Read, nil).wantProblem(t, 422, apitypes.CodeValidationFailed)
}

func TestCreateWithIdempotencyKeyMakesOneOrder(t *testing.T) {
	f := newFixture(t)
	body := `{"walletId":"` + f.creds.Wallets[0].ID + `","asset":"USDC","amount":"5","destination":{"address":"0x1111111111111111111111111111111111111111"}}`
	a := f.post(t, "/api/v1/payments", f.creds.Keys["pay"].SK, body, idempotencyHeader, "create-once")
	b := f.post(t, "/api/v1/payments", f.creds.Keys["pay"].SK, body, idempotencyHeader, "create-once")
	if a.status != 201 || b.status != 201 || b.header.Get(replayedHeader) != "true" || decodeOrder(t, a)["id"] != decodeOrder(t, b)["id"] {
		t.Fatalf("replay: %d %d %v", a.status, b.status, b.header)
	}
	list, _ := f.store.ListOrders(context.Background(), store.OrderFilter{OrgID: f.creds.OrgID, App: "pay", Limit: 10})
	if len(list) != 1 {
		t.Fatalf("want one order, got %d", len(list))
	}
}
