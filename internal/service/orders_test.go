package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	. "github.com/opentreasury/treasury/internal/service"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/store"
)

// evmWallet is a seeded wallet on Ethereum.
func (f *fixture) evmWallet(t *testing.T) string {
	t.Helper()
	for _, w := range f.creds.Wallets {
		if w.Chain == "ethereum" {
			return w.ID
		}
	}
	t.Fatal("the seed has no Ethereum wallet")
	return ""
}

// A created order keeps what it asks for as its domain's type, read back the same from the
// store, with the payload hash of exactly those fields.
func TestACreatedOrderKeepsItsTypedDetails(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	wallet := f.evmWallet(t)
	o, err := f.svc.CreateOrder(ctx, f.as(t, f.creds.Keys["trade"].SK), orders.Domains[1],
		fmt.Appendf(nil, `{"walletId":%q,"sellAsset":"USDC","buyAsset":"ETH","sellAmount":"250.50","maxSlippageBps":0}`, wallet), nil)
	if err != nil {
		t.Fatal(err)
	}
	stored, legs, err := f.svc.Store.Order(ctx, o.ID)
	if err != nil {
		t.Fatal(err)
	}
	trade, ok := stored.Details.Details.(*orders.Trade)
	if !ok || trade.SellAmount.String() != "250.5" || trade.BuyAsset != "ETH" || trade.MaxSlippageBps != 0 {
		t.Fatalf("stored details %#v", stored.Details.Details)
	}
	names := []string{}
	for _, l := range legs {
		names = append(names, l.Leg)
	}
	if _, hash, _ := orders.Payload(o.ID, wallet, "ethereum", stored.Details, names); hash != stored.PayloadHash {
		t.Fatalf("payload hash %s, stored %s", hash, stored.PayloadHash)
	}
	// A trade's slippage of 0 is a value: the answer writes it.
	body, _ := json.Marshal(o.Answer())
	var answer map[string]any
	if err := json.Unmarshal(body, &answer); err != nil || answer["maxSlippageBps"] != 0.0 || answer["sellAmount"] != "250.5" {
		t.Fatalf("answer %s", body)
	}
}

// The Idempotency-Key record handed to a create is stored with the order, holding the
// answer the create gives; a second create under the same key makes no order and is told
// which record holds it.
func TestACreateStoresItsIdempotencyAnswerWithTheOrder(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	who := f.as(t, f.creds.Keys["pay"].SK)
	body := fmt.Appendf(nil, `{"walletId":%q,"asset":"USDC","amount":"5","destination":{"address":"0x1111111111111111111111111111111111111111"}}`,
		f.evmWallet(t))
	claim := func() *store.IdempotencyRecord {
		now := time.Now().UTC()
		return &store.IdempotencyRecord{OrgID: who.OrgID, Key: "k-1", Method: http.MethodPost, Path: "/api/v1/payments",
			Fingerprint: "fp", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	}
	o, err := f.svc.CreateOrder(ctx, who, orders.Domains[0], body, claim())
	if err != nil {
		t.Fatal(err)
	}
	rec, err := f.svc.Store.IdempotencyRecordOf(ctx, who.OrgID, "k-1")
	if err != nil || rec == nil || rec.State != store.IdempotencyDone || rec.StatusCode != http.StatusCreated {
		t.Fatalf("record %+v %v", rec, err)
	}
	var answered apitypes.Order
	if err := json.Unmarshal(rec.ResponseBody, &answered); err != nil || answered.ID != o.ID || answered.Amount != "5" ||
		answered.Status != string(orders.StatusDraft) {
		t.Fatalf("stored answer %s", rec.ResponseBody)
	}
	var headers map[string]string
	if err := json.Unmarshal([]byte(rec.ResponseHeaders), &headers); err != nil || headers["Location"] != "/api/v1/payments/"+o.ID {
		t.Fatalf("stored headers %s", rec.ResponseHeaders)
	}

	again, err := f.svc.CreateOrder(ctx, who, orders.Domains[0], body, claim())
	var held *store.KeyHeldError
	if !errors.As(err, &held) || held.Held.Key != "k-1" || again != nil {
		t.Fatalf("a second create under the key: %v, %v", again, err)
	}
	list, _, err := f.svc.ListOrders(ctx, who, orders.Domains[0], OrderFilter{Page: Page{Limit: 50}})
	if err != nil || len(list) != 1 {
		t.Fatalf("orders after the second create: %d %v", len(list), err)
	}
}

// A batch payment takes its chain's configured part size when it is made, and keeps it:
// five recipients in parts of two are three TRANSFER legs, and its answer places each
// recipient in its part.
func TestABatchTakesItsChainsPartSize(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.svc.BatchPartSizes = map[string]int{"ethereum": 2}
	var rs []string
	for i := range 5 {
		rs = append(rs, fmt.Sprintf(`{"address":"0x111111111111111111111111111111111111111%d","amount":"1.%d"}`, i, i))
	}
	o, err := f.svc.CreateOrder(ctx, f.as(t, f.creds.Keys["pay"].SK), orders.Domains[0],
		fmt.Appendf(nil, `{"walletId":%q,"asset":"USDC","recipients":[%s]}`, f.evmWallet(t), strings.Join(rs, ",")), nil)
	if err != nil {
		t.Fatal(err)
	}
	f.svc.BatchPartSizes = nil
	stored, legs, err := f.svc.Store.Order(ctx, o.ID)
	if err != nil || len(legs) != 3 || stored.Details.Details.(*orders.Payment).PartSize != 2 {
		t.Fatalf("legs %d, details %+v (%v)", len(legs), stored.Details.Details, err)
	}
	answer := o.Answer()
	if answer.Amount != "6" || len(answer.Recipients) != 5 || answer.Recipients[4].Part != 3 || answer.Recipients[1].Part != 1 ||
		answer.Recipients[2].Status != "pending" {
		t.Fatalf("answer %+v", answer.OrderDetails)
	}
}
