package store_test

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/dev/wait"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/policy"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
	"github.com/opentreasury/treasury/migrations"
)

// newDraft is a draft payment of org from a new wallet, with legs, not yet stored.
func newDraft(t *testing.T, s *store.Store, org string, legs ...string) (*store.Order, []store.OrderLeg) {
	t.Helper()
	w := mustWallet(t, s, org, "ethereum")
	now := time.Now().UTC()
	o := &store.Order{ID: ids.New(ids.Order), OrgID: org, App: "pay", Domain: "payment", Status: "draft", WalletID: w.ID,
		Chain: "ethereum", Details: orders.Fields{Details: &orders.Payment{Asset: "USDC", Amount: decimal.RequireFromString("500")}}, PayloadHash: "h", AmountUSD: dec("500.00"),
		CreatedBy: "key_maker", CorrelationID: "corr-create", CreatedAt: now, UpdatedAt: now}
	o.WorkflowID = "order-" + o.ID
	var ls []store.OrderLeg
	for i, l := range legs {
		ls = append(ls, store.OrderLeg{Position: i, Leg: l, Status: "pending"})
	}
	return o, ls
}

func mustDraft(t *testing.T, s *store.Store, org string, legs ...string) *store.Order {
	t.Helper()
	o, ls := newDraft(t, s, org, legs...)
	ev, err := s.CreateOrder(ctx, o, ls, store.EventSpec{Name: "Order.Created"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Sequence != 1 || ev.Event != "Order.Created" || o.EventSequence != 1 {
		t.Fatalf("created event %+v, order seq %d", ev, o.EventSequence)
	}
	return o
}

func TestOrderStepsAreAppliedOnce(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		org := mustOrg(t, s)
		o := mustDraft(t, s, org, "TRANSFER")
		submit := store.OrderChange{OrderID: o.ID, Step: "submitted", From: []orders.Status{"draft"}, To: "submitted", Reason: "submitted",
			Event: &store.EventSpec{Name: "Order.Submitted", Body: events.OrderEvent{AmountUSD: "500.00"}}, CorrelationID: "corr-submit"}
		first, err := s.ApplyOrderStep(ctx, submit)
		if err != nil {
			t.Fatal(err)
		}
		if !first.Applied || first.Order.Status != "submitted" || first.Event.Sequence != 2 {
			t.Fatalf("first application: %+v %+v", first, first.Event)
		}
		again, err := s.ApplyOrderStep(ctx, submit)
		if err != nil {
			t.Fatal(err)
		}
		if again.Applied || again.Event == nil || again.Event.ID != first.Event.ID || again.Order.EventSequence != 2 {
			t.Fatalf("a retried step must change nothing and return the first event: %+v", again)
		}
		var data map[string]any
		if err := json.Unmarshal([]byte(first.Event.Data), &data); err != nil {
			t.Fatal(err)
		}
		for k, want := range map[string]any{"event": "Order.Submitted", "domain": "payment", "orderId": o.ID, "orderStatus": "submitted",
			"sequence": float64(2), "correlationId": "corr-submit", "amountUsd": "500.00", "id": first.Event.ID} {
			if data[k] != want {
				t.Fatalf("event data %s = %v, want %v (%s)", k, data[k], want, first.Event.Data)
			}
		}
		if _, ok := data["leg"]; ok {
			t.Fatal("an event without a leg must not carry one")
		}
		if _, err := time.Parse("2006-01-02T15:04:05.000Z", data["occurredAt"].(string)); err != nil {
			t.Fatalf("occurredAt %v", data["occurredAt"])
		}

		// A step from the wrong status changes nothing, not even its step record.
		bad := store.OrderChange{OrderID: o.ID, Step: "confirmed", From: []orders.Status{"broadcast"}, To: "confirmed",
			Event: &store.EventSpec{Name: "Order.Confirmed"}, CorrelationID: "c"}
		if _, err := s.ApplyOrderStep(ctx, bad); !errors.Is(err, store.ErrTransition) {
			t.Fatalf("want ErrTransition, got %v", err)
		}
		bad.From = nil
		if res, err := s.ApplyOrderStep(ctx, bad); err != nil || !res.Applied || res.Event.Sequence != 3 {
			t.Fatalf("after a refused step the same step may apply later: %+v %v", res, err)
		}

		hist, err := s.OrderHistory(ctx, o.ID)
		if err != nil {
			t.Fatal(err)
		}
		var statuses []string
		for _, h := range hist {
			statuses = append(statuses, string(h.Status))
		}
		if fmt.Sprint(statuses) != "[draft submitted confirmed]" || hist[1].CorrelationID != "corr-submit" {
			t.Fatalf("history %v", statuses)
		}
	})
}

func TestOrderStepMutatesLegs(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		o := mustDraft(t, s, mustOrg(t, s), "APPROVE", "SWAP")
		swapLeg := 1
		var alsoSaw string
		res, err := s.ApplyOrderStep(ctx, store.OrderChange{OrderID: o.ID, Step: "leg-1-broadcast", To: "broadcast",
			Mutate: func(o *store.Order, legs []store.OrderLeg) {
				hash := "0xabc"
				legs[1].TxHash, legs[1].Status = &hash, "broadcast"
				o.AmountUSD = decimal.RequireFromString("123.45")
			},
			// Also is handed the locked order and legs, as Mutate left them.
			Also: func(_ *store.Store, o *store.Order, legs []store.OrderLeg) error {
				alsoSaw = o.ID + " " + o.AmountUSD.String() + " " + *legs[1].TxHash
				return nil
			},
			Event: &store.EventSpec{Name: "Order.Broadcast", Leg: &swapLeg, Body: events.OrderEvent{TxHash: "0xabc"}}, CorrelationID: "c"})
		if err != nil {
			t.Fatal(err)
		}
		got, legs, err := s.OrderInApp(ctx, o.OrgID, "pay", o.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(legs) != 2 || legs[1].TxHash == nil || *legs[1].TxHash != "0xabc" || legs[1].Status != "broadcast" || legs[0].TxHash != nil {
			t.Fatalf("legs %+v", legs)
		}
		if got.Status != "broadcast" || !got.AmountUSD.Equal(dec("123.45")) || got.CreatedAt.IsZero() {
			t.Fatalf("order %+v", got)
		}
		var data map[string]any
		_ = json.Unmarshal([]byte(res.Event.Data), &data)
		if data["leg"] != "SWAP" || res.Event.Leg != "SWAP" || data["txHash"] != "0xabc" {
			t.Fatalf("leg event %s", res.Event.Data)
		}
		if alsoSaw != o.ID+" 123.45 0xabc" {
			t.Fatalf("Also saw %q", alsoSaw)
		}
		// A single-leg order's leg events name no leg.
		single := mustDraft(t, s, mustOrg(t, s), "TRANSFER")
		first := 0
		res, err = s.ApplyOrderStep(ctx, store.OrderChange{OrderID: single.ID, Step: "leg-0-broadcast",
			Event: &store.EventSpec{Name: "Order.Broadcast", Leg: &first}, CorrelationID: "c"})
		if err != nil || res.Event.Leg != "" || strings.Contains(res.Event.Data, `"leg"`) {
			t.Fatalf("single-leg event %+v %v", res.Event, err)
		}
		if _, _, err := s.OrderInApp(ctx, o.OrgID, "trade", o.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatal("an order is not visible from another app")
		}
		if _, _, err := s.OrderInApp(ctx, "org_other", "pay", o.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatal("an order is not visible from another organisation")
		}
	})
}

// A step that changes only the first leg (position 0, a zero key) writes that leg alone:
// the second keeps its name, status and hashes.
func TestAStepOnTheFirstLegLeavesTheOthersAsTheyAre(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		o := mustDraft(t, s, mustOrg(t, s), "APPROVE", "SWAP")
		_, err := s.ApplyOrderStep(ctx, store.OrderChange{OrderID: o.ID, Step: "leg-0-signing-requested", To: "pending_signature",
			Mutate: func(_ *store.Order, legs []store.OrderLeg) {
				req := "sig_first"
				legs[0].SigningRequestID, legs[0].Status = &req, "pending_signature"
			}})
		if err != nil {
			t.Fatal(err)
		}
		_, legs, err := s.Order(ctx, o.ID)
		if err != nil {
			t.Fatal(err)
		}
		if legs[0].Leg != "APPROVE" || legs[0].Status != "pending_signature" || legs[0].SigningRequestID == nil {
			t.Fatalf("first leg %+v", legs[0])
		}
		if legs[1].Leg != "SWAP" || legs[1].Status != "pending" || legs[1].SigningRequestID != nil {
			t.Fatalf("the second leg was written with the first's values: %+v", legs[1])
		}
	})
}

func TestConcurrentStepsNumberEventsWithoutGaps(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		o := mustDraft(t, s, mustOrg(t, s), "TRANSFER")
		var wg sync.WaitGroup
		var mu sync.Mutex
		applied := 0
		for i := range 10 {
			for range 2 { // every step twice, at the same time
				wg.Add(1)
				go func() {
					defer wg.Done()
					res, err := s.ApplyOrderStep(ctx, store.OrderChange{OrderID: o.ID, Step: fmt.Sprintf("step-%d", i),
						Event: &store.EventSpec{Name: "Order.Submitted"}, CorrelationID: "c"})
					if err != nil {
						t.Errorf("step %d: %v", i, err)
						return
					}
					if res.Applied {
						mu.Lock()
						applied++
						mu.Unlock()
					}
				}()
			}
		}
		wg.Wait()
		evs, err := s.OrderEvents(ctx, o.ID)
		if err != nil {
			t.Fatal(err)
		}
		if applied != 10 || len(evs) != 11 {
			t.Fatalf("applied %d, events %d; want 10 and 11", applied, len(evs))
		}
		for i, ev := range evs {
			if ev.Sequence != i+1 {
				t.Fatalf("sequence gap: event %d has sequence %d", i, ev.Sequence)
			}
		}
		page, err := s.ListEvents(ctx, store.EventFilter{OrgID: o.OrgID, Apps: []string{"pay"}, OrderID: o.ID, AfterID: evs[4].ID, Limit: 3})
		if err != nil || len(page) != 3 || page[0].ID <= evs[4].ID {
			t.Fatalf("events after a cursor: %d %v", len(page), err)
		}
		if none, _ := s.ListEvents(ctx, store.EventFilter{OrgID: o.OrgID, Apps: []string{"trade"}, Limit: 50}); len(none) != 0 {
			t.Fatal("events of another app leaked")
		}
	})
}

func TestListOrdersFiltersAndPages(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		org := mustOrg(t, s)
		var made []*store.Order
		for range 5 {
			made = append(made, mustDraft(t, s, org, "TRANSFER"))
		}
		if _, err := s.ApplyOrderStep(ctx, store.OrderChange{OrderID: made[2].ID, Step: "submitted", To: "submitted", CorrelationID: "c"}); err != nil {
			t.Fatal(err)
		}
		all, err := s.ListOrders(ctx, store.OrderFilter{OrgID: org, App: "pay", Limit: 3})
		if err != nil || len(all) != 3 || all[0].ID != made[4].ID {
			t.Fatalf("first page newest first: %d %v", len(all), err)
		}
		rest, err := s.ListOrders(ctx, store.OrderFilter{OrgID: org, App: "pay", AfterID: all[2].ID, Limit: 3})
		if err != nil || len(rest) != 2 || rest[1].ID != made[0].ID {
			t.Fatalf("second page: %d %v", len(rest), err)
		}
		sub, err := s.ListOrders(ctx, store.OrderFilter{OrgID: org, App: "pay", Status: "submitted", Limit: 50})
		if err != nil || len(sub) != 1 || sub[0].ID != made[2].ID {
			t.Fatalf("status filter: %v %v", sub, err)
		}
		future := time.Now().Add(time.Hour)
		if none, _ := s.ListOrders(ctx, store.OrderFilter{OrgID: org, App: "pay", CreatedAfter: &future, Limit: 50}); len(none) != 0 {
			t.Fatal("createdAfter filter")
		}
	})
}

func TestPolicyVolumeCountsOnlyLiveAllowedOrdersOfItsKey(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		org := mustOrg(t, s)
		day := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
		var wallet string
		for i, c := range []struct {
			submitted time.Time
			status    orders.Status
			usd       string
		}{
			{day.Add(time.Hour), "submitted", "100.10"},
			{day.Add(2 * time.Hour), "confirmed", "0.20"},
			{day.Add(3 * time.Hour), "rejected", "1000"},
			{day.Add(4 * time.Hour), "failed", "1000"},
			{day.Add(-time.Hour), "confirmed", "1000"},    // yesterday
			{time.Time{}, "draft", "1000"},                // never submitted
			{day.Add(5 * time.Hour), "submitted", "1000"}, // not yet allowed by the policy
			{day.Add(6 * time.Hour), "submitted", "7"},    // another asset
		} {
			o := mustDraft(t, s, org, "TRANSFER")
			if wallet == "" {
				wallet = o.WalletID
			}
			_, err := s.ApplyOrderStep(ctx, store.OrderChange{OrderID: o.ID, Step: fmt.Sprint("s", i), To: c.status, CorrelationID: "c",
				Mutate: func(o *store.Order, _ []store.OrderLeg) {
					o.WalletID = wallet
					o.AmountUSD = dec(c.usd)
					o.PolicyAllowed = i != 6
					o.PolicyAsset = "USDC"
					if i == 7 {
						o.PolicyAsset = "ETH"
					}
					if !c.submitted.IsZero() {
						at := c.submitted
						o.SubmittedAt = &at
					}
				}})
			if err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.PolicyVolume(ctx, store.VolumeQuery{OrgID: org, WalletID: wallet, Since: day})
		if err != nil || !got.Equal(dec("107.30")) {
			t.Fatalf("wallet volume %s (%v), want 107.30", got, err)
		}
		got, err = s.PolicyVolume(ctx, store.VolumeQuery{OrgID: org, Asset: "USDC", Since: day})
		if err != nil || !got.Equal(dec("100.30")) {
			t.Fatalf("USDC volume %s (%v), want 100.30", got, err)
		}
		if got, err = s.PolicyVolume(ctx, store.VolumeQuery{OrgID: "org_other", Since: day}); err != nil || !got.IsZero() {
			t.Fatalf("another organisation's volume %s (%v), want 0", got, err)
		}
		// Per key, the most used first: yesterday's confirmed 1000 is within 48 hours.
		uses, err := s.WindowUse(ctx, org, "pay", policy.Window{Scope: policy.ScopeAsset, Hours: 48}, day.Add(24*time.Hour), 10)
		if err != nil || len(uses) != 2 || uses[0].Key != "USDC" || !uses[0].Used.Equal(dec("1100.30")) || uses[1].Key != "ETH" || !uses[1].Used.Equal(dec("7")) {
			t.Fatalf("window use %+v (%v)", uses, err)
		}
		if uses, err = s.WindowUse(ctx, org, "pay", policy.Window{Scope: policy.ScopeAsset, Hours: 48}, day.Add(24*time.Hour), 1); err != nil || len(uses) != 1 {
			t.Fatalf("limited window use %+v (%v)", uses, err)
		}
	})
}

// On PostgreSQL an event's id is minted inside its transaction, so an event committed
// late can have an older id than one already read. A reader paging the stream must still
// get it: the stream holds back events of transactions younger than one still open.
func TestTheStreamNeverPassesOverAnEventCommittedLate(t *testing.T) {
	s := storetest.NewPostgres(t)
	org := mustOrg(t, s)
	a, b := mustDraft(t, s, org, "TRANSFER"), mustDraft(t, s, org, "TRANSFER")
	stream := func(after string) []store.Event {
		page, err := s.ListEvents(ctx, store.EventFilter{OrgID: org, Apps: []string{"pay"}, AfterID: after, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return page
	}
	read := stream("")
	cursor := read[len(read)-1].ID

	written, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- s.Tx(ctx, func(tx *store.Store) error {
			if _, err := tx.ApplyOrderStep(ctx, store.OrderChange{OrderID: a.ID, Step: "late",
				Event: &store.EventSpec{Name: "Order.Submitted"}, CorrelationID: "late"}); err != nil {
				return err
			}
			close(written)
			<-release // the event is written, its id minted; the commit comes later
			return nil
		})
	}()
	<-written
	// A later id for the next event: its millisecond comes after the one a's id was made in.
	minted := time.Now()
	wait.For(t, time.Second, "the clock to pass the millisecond a's event id was made in", func() bool {
		return time.Now().UnixMilli() > minted.UnixMilli()
	})
	if _, err := s.ApplyOrderStep(ctx, store.OrderChange{OrderID: b.ID, Step: "early",
		Event: &store.EventSpec{Name: "Order.Submitted"}, CorrelationID: "early"}); err != nil {
		t.Fatal(err)
	}
	// b's event is committed, a's is not: a reader now must not move past a's place.
	for _, ev := range stream(cursor) {
		read = append(read, ev)
		cursor = ev.ID
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	// If the wait fails, say which of the two came.
	defer func() {
		if t.Failed() {
			t.Logf("the reader got the late event %v and the early one %v", seen[a.ID], seen[b.ID])
		}
	}()
	wait.For(t, 10*time.Second, "the reader to get both the late and the early event", func() bool {
		for _, ev := range stream(cursor) {
			read = append(read, ev)
			cursor = ev.ID
		}
		seen = map[string]bool{}
		for _, ev := range read {
			if ev.Sequence == 2 {
				seen[ev.OrderID] = true
			}
		}
		return seen[a.ID] && seen[b.ID]
	})
	if !seen[a.ID] || !seen[b.ID] {
		t.Fatalf("the reader got the late event %v and the early one %v", seen[a.ID], seen[b.ID])
	}
}

// Paging the stream a few events at a time, each page after the last one's event, reads
// every event once and in the stream's order; a cursor that names no event continues by
// id.
func TestTheStreamPagesFromEachCursorOnward(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		org := mustOrg(t, s)
		for range 4 {
			o := mustDraft(t, s, org, "TRANSFER")
			if _, err := s.ApplyOrderStep(ctx, store.OrderChange{OrderID: o.ID, Step: "submitted",
				Event: &store.EventSpec{Name: "Order.Submitted"}, CorrelationID: "paging"}); err != nil {
				t.Fatal(err)
			}
		}
		list := func(after string, limit int) []store.Event {
			page, err := s.ListEvents(ctx, store.EventFilter{OrgID: org, Apps: []string{"pay"}, AfterID: after, Limit: limit})
			if err != nil {
				t.Fatal(err)
			}
			return page
		}
		whole := list("", 100)
		if len(whole) != 8 {
			t.Fatalf("the stream holds %d events, want 8", len(whole))
		}
		var paged []string
		for cursor := ""; ; {
			page := list(cursor, 3)
			if len(page) == 0 {
				break
			}
			for _, ev := range page {
				paged = append(paged, ev.ID)
			}
			cursor = page[len(page)-1].ID
		}
		var want []string
		for _, ev := range whole {
			want = append(want, ev.ID)
		}
		if !slices.Equal(paged, want) {
			t.Fatalf("paged three at a time:\n%v\nthe whole stream:\n%v", paged, want)
		}
		// An id no event has, between the fourth event's and the fifth's by id.
		byID := slices.Clone(want)
		slices.Sort(byID)
		between := byID[3] + "0"
		var rest []string
		for _, ev := range list(between, 100) {
			rest = append(rest, ev.ID)
		}
		var later []string
		for _, id := range want {
			if id > between {
				later = append(later, id)
			}
		}
		slices.Sort(rest)
		slices.Sort(later)
		if !slices.Equal(rest, later) {
			t.Fatalf("after an id no event has: %v, want the events with later ids %v", rest, later)
		}
	})
}

// Details written before they named their domain are rewritten by the migration that
// made them name it, and read back as their type; running it again changes nothing.
func TestOrderDetailsWrittenBeforeTheirDomainReadBack(t *testing.T) {
	storetest.ForEachDialectWithSQL(t, func(t *testing.T, s *store.Store, db *sql.DB) {
		org := mustOrg(t, s)
		o := mustDraft(t, s, org, "TRANSFER")
		trade, tradeLegs := newDraft(t, s, org, "SWAP")
		trade.Domain, trade.App = "trade", "trade"
		trade.Details = orders.Fields{Details: &orders.Trade{SellAsset: "ETH", BuyAsset: "USDC", SellAmount: dec("1.5")}}
		if _, err := s.CreateOrder(ctx, trade, tradeLegs, store.EventSpec{Name: "Order.Created"}, nil, nil); err != nil {
			t.Fatal(err)
		}
		for id, old := range map[string]string{o.ID: `{"amount":"500","asset":"USDC","destination":{"address":"0x1111111111111111111111111111111111111111"}}`,
			trade.ID: `{"buyAsset":"USDC","maxSlippageBps":0,"sellAmount":"1.5","sellAsset":"ETH"}`} {
			if _, err := db.ExecContext(ctx, `UPDATE orders SET details = $1 WHERE id = $2`, old, id); err != nil {
				t.Fatal(err)
			}
		}
		fsys, err := migrations.FS(s.Dialect())
		if err != nil {
			t.Fatal(err)
		}
		names, _ := fs.Glob(fsys, "*_typed_order_details.sql")
		if len(names) != 1 {
			t.Fatalf("migration files %v", names)
		}
		text, _ := fs.ReadFile(fsys, names[0])
		up := strings.SplitN(strings.SplitN(string(text), "-- +goose Up", 2)[1], "-- +goose Down", 2)[0]
		for range 2 {
			if _, err := db.ExecContext(ctx, up); err != nil {
				t.Fatal(err)
			}
		}
		got, _, err := s.Order(ctx, o.ID)
		if p, ok := got.Details.Details.(*orders.Payment); err != nil || !ok || p.Amount.String() != "500" ||
			p.Destination.Address != "0x1111111111111111111111111111111111111111" {
			t.Fatalf("payment read back as %#v, %v", got.Details.Details, err)
		}
		got, _, err = s.Order(ctx, trade.ID)
		if tr, ok := got.Details.Details.(*orders.Trade); err != nil || !ok || tr.SellAmount.String() != "1.5" || tr.BuyAsset != "USDC" {
			t.Fatalf("trade read back as %#v, %v", got.Details.Details, err)
		}
	})
}
