package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/opentreasury/treasury/dev/bench/devbundle"
	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/internal/orders"
)

// template is one real order, run by the bundle to the state its copies stand for.
type template struct {
	name, app, collection, body string
	// want is the order's status once the bundle has finished with it.
	want string
	// weight is the template's share of the history, in tenths; the pending one has none:
	// it is copied a fixed number of times instead.
	weight int
	id     string
}

// templates are the orders every copy is made from: every domain, and a payment of each
// ending (confirmed, failed on chain, rejected by the policy) and one waiting for its
// approvers. A history of N orders is half confirmed payments, a tenth each of the rest.
func templates(creds *seed.Credentials) ([]*template, error) {
	wallet := ""
	for _, w := range creds.Wallets {
		if w.Chain == "ethereum" && w.AutoSign {
			wallet = w.ID
			break
		}
	}
	if wallet == "" {
		return nil, fmt.Errorf("the seed has no autoSign ethereum wallet")
	}
	payment := func(amount, to string) string {
		return fmt.Sprintf(`{"walletId":%q,"asset":"USDC","amount":%q,"destination":{"address":%q},"reference":"invoice 2026-11"}`, wallet, amount, to)
	}
	return []*template{
		{name: "payment, confirmed", app: "pay", collection: "payments", body: payment("500", whitelisted), want: "confirmed", weight: 5},
		{name: "payment, failed on chain", app: "pay", collection: "payments", body: payment("500", seed.EVMFailAddress), want: "failed", weight: 1},
		{name: "payment, rejected by the policy", app: "pay", collection: "payments", body: payment("500", "0x3333333333333333333333333333333333333333"), want: "rejected", weight: 1},
		{name: "trade, confirmed", app: "trade", collection: "trade-orders",
			body: fmt.Sprintf(`{"walletId":%q,"sellAsset":"USDC","buyAsset":"ETH","sellAmount":"300","maxSlippageBps":50}`, wallet), want: "confirmed", weight: 1},
		{name: "earn deposit, confirmed", app: "earn", collection: "earn-orders",
			body: fmt.Sprintf(`{"walletId":%q,"protocol":"aave","action":"deposit","asset":"USDC","amount":"1000"}`, wallet), want: "confirmed", weight: 1},
		{name: "borrow draw, confirmed", app: "borrow", collection: "borrow-orders",
			body: fmt.Sprintf(`{"walletId":%q,"protocol":"aave","action":"draw","asset":"USDC","amount":"2500","collateralAsset":"ETH"}`, wallet), want: "confirmed", weight: 1},
		{name: "payment, waiting for approvers", app: "pay", collection: "payments", body: payment("20000", whitelisted), want: "pending_approval"},
	}, nil
}

// whitelisted is a destination the seeded pay policy allows.
const whitelisted = "0x1111111111111111111111111111111111111111"

// runTemplates registers a webhook on every app (to a receiver that takes every delivery),
// so that the history carries its deliveries, then creates and submits each template and
// waits until the bundle has finished with it.
func runTemplates(c *devbundle.Client, ts []*template) (stop func(), err error) {
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	for _, app := range []string{"pay", "trade", "earn", "borrow"} {
		status, out, err := c.Do("POST", "/developer/webhooks", c.Creds.Keys[app].SK,
			fmt.Sprintf(`{"url":%q,"events":["*"],"description":"bench-scale receiver"}`, receiver.URL+"/"+app))
		if err != nil || status != http.StatusCreated {
			receiver.Close()
			return nil, fmt.Errorf("webhook on %s: %d %v %v", app, status, out, err)
		}
	}
	for _, t := range ts {
		status, out, err := c.Do("POST", "/"+t.collection, c.Creds.Keys[t.app].SK, t.body)
		if err != nil || status != http.StatusCreated {
			receiver.Close()
			return nil, fmt.Errorf("create %s: %d %v %v", t.name, status, out, err)
		}
		t.id = out["id"].(string)
		// A refusal by the policy is answered 422, and the order is then rejected.
		if status, out, err = c.Do("POST", "/"+t.collection+"/"+t.id+"/submit", c.Creds.Keys[t.app].SK, "{}"); err != nil ||
			(status/100 != 2 && !(t.want == "rejected" && status == http.StatusUnprocessableEntity)) {
			receiver.Close()
			return nil, fmt.Errorf("submit %s: %d %v %v", t.name, status, out, err)
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, t := range ts {
		for {
			status, out, err := c.Do("GET", "/"+t.collection+"/"+t.id, c.Creds.Keys[t.app].Read, "")
			if err == nil && status == http.StatusOK && out["status"] == t.want {
				break
			}
			if time.Now().After(deadline) {
				receiver.Close()
				return nil, fmt.Errorf("%s (%s) did not become %s: %d %v %v", t.name, t.id, t.want, status, out["status"], err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return receiver.Close, nil
}

// deliveriesDone waits until every webhook delivery of the templates has been made.
func deliveriesDone(ctx context.Context, db *sql.DB, ts []*template) error {
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = t.id
	}
	q := fmt.Sprintf("SELECT count(*) FROM webhook_deliveries WHERE order_id IN (%s) AND completed_at IS NULL", quote(ids...))
	return untilNone(ctx, db, q, time.Minute, "webhook deliveries of the templates still due")
}

// paymentsEnded waits until every payment of ids has reached a final status, so that
// the next size is grown and measured with none of these still working through their
// lifecycle beside it. It returns how long that took.
func paymentsEnded(ctx context.Context, db *sql.DB, ids []string) (time.Duration, error) {
	began := time.Now()
	var final []string
	for _, st := range orders.Statuses {
		if st.Terminal() {
			final = append(final, string(st))
		}
	}
	q := fmt.Sprintf("SELECT count(*) FROM orders WHERE id IN (%s) AND status NOT IN (%s)", quote(ids...), quote(final...))
	err := untilNone(ctx, db, q, 10*time.Minute, "payments written still under way")
	return time.Since(began), err
}

// untilNone polls the count q until it is 0, for at most within; what names what it
// counts in the error.
func untilNone(ctx context.Context, db *sql.DB, q string, within time.Duration, what string) error {
	for deadline := time.Now().Add(within); ; time.Sleep(200 * time.Millisecond) {
		var left int
		if err := db.QueryRowContext(ctx, q).Scan(&left); err != nil {
			return err
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d %s after %s", left, what, within)
		}
	}
}
