package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"
)

// pagedServer serves a list of n items in pages of the asked size, with a cursor of its
// own (param names the query parameter that takes it), and records each query.
type pagedServer struct {
	n       int
	param   string
	failAt  string // a cursor answered with a 404
	mu      sync.Mutex
	queries []url.Values
}

func (s *pagedServer) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	s.queries = append(s.queries, q)
	s.mu.Unlock()
	if q.Get(s.param) != "" && q.Get(s.param) == s.failAt {
		problem(404, CodeNotFound)(w, r)
		return
	}
	start := 0
	if c := q.Get(s.param); c != "" {
		_, _ = fmt.Sscanf(c, "after-%d", &start)
	}
	var limit int
	_, _ = fmt.Sscanf(q.Get("limit"), "%d", &limit)
	end := min(start+limit, s.n)
	data := ""
	for i := start; i < end; i++ {
		if data != "" {
			data += ","
		}
		data += fmt.Sprintf(`{"id":"ord_%d","domain":"payment","status":"draft","createdAt":"2026-11-22T01:24:34.123Z"}`, i)
	}
	next := "null"
	if end < s.n {
		next = fmt.Sprintf(`"after-%d"`, end)
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"data":[%s],"nextCursor":%s}`, data, next)
}

func TestOrdersIteratesOverEveryPage(t *testing.T) {
	s := &pagedServer{n: 7, param: "cursor"}
	c := newRESTClient(t, s.serve, WithToken(restKey))
	after := time.Date(2026, 11, 22, 1, 0, 0, 0, time.FixedZone("CET", 3600))
	var ids []string
	for o, err := range c.Orders(context.Background(), DomainPayment, OrderFilter{Status: "draft", CreatedAfter: after, Limit: 3}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, o.ID)
	}
	if fmt.Sprint(ids) != "[ord_0 ord_1 ord_2 ord_3 ord_4 ord_5 ord_6]" {
		t.Fatalf("ids %v", ids)
	}
	var cursors []string
	for _, q := range s.queries {
		if q.Get("status") != "draft" || q.Get("limit") != "3" || q.Get("createdAfter") != "2026-11-22T00:00:00Z" {
			t.Fatalf("query %v", q)
		}
		cursors = append(cursors, q.Get("cursor"))
	}
	if fmt.Sprint(cursors) != "[ after-3 after-6]" {
		t.Fatalf("cursors %q", cursors)
	}

	// One page, as asked.
	page, err := c.ListOrders(context.Background(), DomainPayment, OrderFilter{Limit: 5, Cursor: "after-5"})
	if err != nil || len(page.Data) != 2 || page.NextCursor != "" || page.Data[1].ID != "ord_6" || page.Data[0].CreatedAt.IsZero() {
		t.Fatalf("%v %+v", err, page)
	}
}

func TestIteratorsStopWhenTheLoopDoesAndOnTheFirstError(t *testing.T) {
	s := &pagedServer{n: 100, param: "cursor"}
	c := newRESTClient(t, s.serve, WithToken(restKey))
	n := 0
	for _, err := range c.Orders(context.Background(), DomainTrade, OrderFilter{Limit: 10}) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 15 {
			break
		}
	}
	if len(s.queries) != 2 {
		t.Fatalf("%d pages read for 15 items", len(s.queries))
	}

	s = &pagedServer{n: 100, param: "cursor", failAt: "after-20"}
	c = newRESTClient(t, s.serve, WithToken(restKey))
	n = 0
	var last error
	for _, err := range c.Approvals(context.Background(), ApprovalFilter{Limit: 10}) {
		if err != nil {
			last = err
			continue
		}
		n++
	}
	var p *Problem
	if n != 20 || !errors.As(last, &p) || p.Code != CodeNotFound {
		t.Fatalf("%d items, then %v", n, last)
	}

	if _, err := c.ListOrders(context.Background(), "loans", OrderFilter{}); err == nil {
		t.Fatal("an unknown domain was listed")
	}
	for _, err := range c.Orders(context.Background(), "loans", OrderFilter{}) {
		if err == nil {
			t.Fatal("an unknown domain was iterated")
		}
	}
}

// Events page like every list, with cursor=, the previous page's nextCursor; the
// deprecated After is sent as the cursor.
func TestEventsPageWithTheCursor(t *testing.T) {
	s := &pagedServer{n: 5, param: "cursor"}
	c := newRESTClient(t, s.serve, WithToken(restKey))
	n := 0
	for _, err := range c.Events(context.Background(), EventFilter{OrderID: "ord_1", Cursor: "after-1", Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	var afters []string
	for _, q := range s.queries {
		if q.Get("orderId") != "ord_1" || q.Has("after") {
			t.Fatalf("query %v", q)
		}
		afters = append(afters, q.Get("cursor"))
	}
	if n != 4 || fmt.Sprint(afters) != "[after-1 after-3]" {
		t.Fatalf("%d events, afters %v", n, afters)
	}
}

func TestAServerRepeatingItsCursorIsNotPagedForever(t *testing.T) {
	c := newRESTClient(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"data":[{"id":"wal_1"}],"nextCursor":"same"}`))
	}, WithToken(restKey))
	n := 0
	var last error
	for _, err := range c.Wallets(context.Background(), ListOptions{}) {
		if err != nil {
			last = err
			break
		}
		n++
	}
	if n != 2 || last == nil {
		t.Fatalf("%d wallets, then %v", n, last)
	}
}
