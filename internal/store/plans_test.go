package store_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

// The rows every order step writes skip gorm's statement building; an order with every
// field set reads back exactly as it was written, on both databases.
func TestAnOrderWrittenByItsInsertPlanReadsBackAsWritten(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		for _, model := range []any{&store.Order{}, &store.OrderLeg{}, &store.OrderStatusChange{}, &store.Event{},
			&store.AuditLog{}, &store.IdempotencyRecord{}, &store.WebhookDelivery{}} {
			if byGorm, err := s.WrittenByGorm(model); err != nil || byGorm {
				t.Fatalf("%T: written by gorm %v (%v), want its insert plan", model, byGorm, err)
			}
		}
		o, legs := newDraft(t, s, mustOrg(t, s), "approve", "swap")
		at := time.Date(2026, 11, 30, 10, 0, 0, 123456000, time.UTC)
		version := 3
		o.CreatedAt, o.UpdatedAt = at, at.Add(time.Second)
		o.ApprovalRequired, o.ApprovalQuorum, o.ApprovalItemID = true, 2, ptr("apr_1")
		o.PolicyDecision, o.PolicyVersion, o.PolicyAllowed = ptr("allow"), &version, true
		o.PolicyAsset, o.PolicyDestination = "USDC", "0xabc"
		o.FailureCode, o.FailureMessage, o.RejectionReason, o.RejectionDetail = ptr("f"), ptr("fm"), ptr("r"), ptr("rd")
		o.CreatedByUser, o.SubmissionID, o.ScheduleID = "usr_1", "sub_1", "pys_1"
		legs[1].SigningRequestID, legs[1].TxHash, legs[1].TxHashes = ptr("sig_1"), ptr("0xtx"), `["0xtx"]`
		want, wantLegs := *o, append([]store.OrderLeg(nil), legs...)
		if _, err := s.CreateOrder(ctx, o, legs, store.EventSpec{Name: "Order.Created"}, nil, nil); err != nil {
			t.Fatal(err)
		}
		want.EventSequence = 1
		got, gotLegs, err := s.OrderInApp(ctx, o.OrgID, o.App, o.ID)
		if err != nil {
			t.Fatal(err)
		}
		sameFields(t, "order", *got, want)
		if len(gotLegs) != len(wantLegs) {
			t.Fatalf("%d legs, want %d", len(gotLegs), len(wantLegs))
		}
		for i := range wantLegs {
			wantLegs[i].OrderID = o.ID
			sameFields(t, "leg", gotLegs[i], wantLegs[i])
		}
	})
}

// A row met again is left as it is and counted as not written; a model whose column has
// a database default is written by gorm, which leaves a zero value out for the default.
func TestInsertPlansSkipExistingRowsAndLeaveDefaultsToGorm(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		now, org := time.Now().UTC().Truncate(time.Microsecond), mustOrg(t, s)
		rec := &store.IdempotencyRecord{OrgID: org, Key: "k", Method: "POST", Path: "/p", State: "done",
			StatusCode: 201, ResponseBody: []byte(`{}`), CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
		for i, want := range []int64{1, 0} {
			if n, err := s.InsertRow(ctx, rec, true); err != nil || n != want {
				t.Fatalf("write %d: %d rows (%v), want %d", i+1, n, err, want)
			}
		}
		if _, err := s.InsertRow(ctx, rec, false); err == nil {
			t.Fatal("a second row with the same key was written")
		}
		w := &store.Wallet{ID: ids.New(ids.Wallet), OrgID: org, Chain: "solana", Address: ids.New("addr"), PublicKey: "pk", CreatedAt: now}
		if byGorm, err := s.WrittenByGorm(w); err != nil || !byGorm {
			t.Fatalf("wallet written by gorm %v (%v): its scheme has a database default", byGorm, err)
		}
		if _, err := s.InsertRow(ctx, w, false); err != nil {
			t.Fatal(err)
		}
		got, err := s.Wallet(ctx, w.OrgID, w.ID)
		if err != nil || got.Scheme != "ed25519" {
			t.Fatalf("wallet %+v (%v): want the default scheme ed25519", got, err)
		}
		// The reads every create makes come through their take plans: NULLs as zero
		// values and nil pointers, times at the instant written.
		w.Scheme = "ed25519"
		sameFields(t, "wallet", *got, *w)
		if _, err := s.Wallet(ctx, "org_other", w.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("another organisation's wallet: %v, want not found", err)
		}
		held, err := s.IdempotencyRecordOf(ctx, org, rec.Key)
		if err != nil || held == nil {
			t.Fatalf("record %+v (%v)", held, err)
		}
		sameFields(t, "record", *held, *rec)
		if none, err := s.IdempotencyRecordOf(ctx, org, "other"); none != nil || err != nil {
			t.Fatalf("an unknown key: %+v (%v), want none", none, err)
		}
	})
}

func ptr[T any](v T) *T { return &v }

// sameFields fails unless every field of got equals want's: times at the same instant,
// decimals of the same value, the rest deeply equal.
func sameFields[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	g, w := reflect.ValueOf(got), reflect.ValueOf(want)
	for i := range g.NumField() {
		name := g.Type().Field(i).Name
		a, b := g.Field(i).Interface(), w.Field(i).Interface()
		var same bool
		switch b := b.(type) {
		case time.Time:
			same = a.(time.Time).Equal(b)
		case decimal.Decimal:
			same = a.(decimal.Decimal).Equal(b)
		case orders.Fields:
			same = reflect.DeepEqual(a.(orders.Fields).Details, b.Details)
		default:
			same = reflect.DeepEqual(a, b)
		}
		if !same {
			t.Errorf("%s.%s = %#v, want %#v", what, name, a, b)
		}
	}
}

// Request logs are written many rows a statement; more rows than a statement takes are
// written in several, every row as it was added.
func TestRequestLogsAreWrittenManyRowsAStatement(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		org := mustOrg(t, s)
		at := time.Now().UTC().Truncate(time.Millisecond)
		var rows []store.RequestLog
		for i := range 450 {
			rows = append(rows, store.RequestLog{ID: ids.New("req"), OrgID: org, App: "pay", Method: "GET", Path: "/p",
				Status: 200 + i%3, LatencyMs: 1.5, KeyID: "key_1", CorrelationID: "c", At: at.Add(time.Duration(i) * time.Millisecond)})
		}
		if err := s.AppendRequestLogs(ctx, rows); err != nil {
			t.Fatal(err)
		}
		got, err := s.ListRequestLogs(ctx, org, "pay", store.RequestLogFilter{}, "", 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(rows) {
			t.Fatalf("%d rows read, want %d", len(got), len(rows))
		}
		byID := map[string]store.RequestLog{}
		for _, r := range rows {
			byID[r.ID] = r
		}
		for _, g := range got {
			sameFields(t, "request log", g, byID[g.ID])
		}
	})
}

// On SQLite the plans' statements are prepared once and bound to each transaction, not
// parsed again in every one; on PostgreSQL pgx keeps its own per connection.
func TestPlansRunPreparedInTransactionsOnSQLite(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		prepared, err := s.RunsPrepared(ctx, &store.Order{})
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.HasSuffix(t.Name(), "/sqlite"); prepared != want {
			t.Fatalf("the order's insert runs prepared: %v, want %v", prepared, want)
		}
	})
}
