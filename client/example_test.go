package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/client"
)

// Create a payment and submit it. Both writes are retried safely by themselves; a job
// that may be run again gives each write a key of its own, so that a rerun resumes the
// same payment rather than paying twice.
func ExampleClient_CreateOrder() {
	c, err := client.New(os.Getenv("TREASURY_URL"), client.WithToken(os.Getenv("TREASURY_TOKEN")))
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	job := "payout-2026-11-22-supplier-117" // yours, stable across reruns of the job
	o, err := c.CreateOrder(ctx, client.PaymentRequest{
		WalletID:    "wal_01938f…",
		Asset:       "USDC",
		Amount:      "1250.50", // a decimal string, never a float
		Destination: client.Destination{Address: "0x1111111111111111111111111111111111111111", Label: "Supplier"},
		Reference:   "invoice 117",
	}, client.WithIdempotencyKey(job+":create"))
	if err != nil {
		log.Fatal(err)
	}
	o, err = c.SubmitOrder(ctx, o.Domain, o.ID, client.WithIdempotencyKey(job+":submit"))
	var p *client.Problem
	switch {
	case errors.As(err, &p) && p.Code == client.CodePolicyViolation:
		for _, v := range p.Violations {
			fmt.Printf("refused by %s: %s\n", v.Rule, v.Message)
		}
	case errors.As(err, &p) && p.Code == client.CodeValidationFailed:
		for _, f := range p.Errors {
			fmt.Printf("%s %s\n", f.Field, f.Message)
		}
	case err != nil:
		log.Fatal(err) // the error quotes the correlation id to give support
	default:
		fmt.Println(o.ID, o.Status, o.AmountUSD, "USD")
	}
}

// Page through a list: the iterator reads the next page when the loop needs it.
func ExampleClient_Orders() {
	c, err := client.New(os.Getenv("TREASURY_URL"), client.WithToken(os.Getenv("TREASURY_TOKEN")))
	if err != nil {
		log.Fatal(err)
	}
	yesterday := time.Now().Add(-24 * time.Hour)
	filter := client.OrderFilter{Status: "confirmed", CreatedAfter: yesterday, Limit: 200}
	for o, err := range c.Orders(context.Background(), client.DomainPayment, filter) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(o.ID, o.Amount, o.Asset, "to", o.Destination.Address)
	}
}

// Read one page at a time, keeping the cursor, e.g. to show pages in a user interface.
func ExampleClient_ListWallets() {
	c, err := client.New(os.Getenv("TREASURY_URL"), client.WithToken(os.Getenv("TREASURY_TOKEN")))
	if err != nil {
		log.Fatal(err)
	}
	page, err := c.ListWallets(context.Background(), client.ListOptions{Limit: 20})
	if err != nil {
		log.Fatal(err)
	}
	for _, w := range page.Data {
		fmt.Println(w.ID, w.Chain, w.USDValue)
	}
	if page.NextCursor != "" {
		next, err := c.ListWallets(context.Background(), client.ListOptions{Limit: 20, Cursor: string(page.NextCursor)})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(len(next.Data), "more")
	}
}

// An approvals bot: decide every pending payment item, approving small ones.
func ExampleClient_DecideApproval() {
	c, err := client.New(os.Getenv("TREASURY_URL"), client.WithToken(os.Getenv("TREASURY_APPROVE_TOKEN")))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	// Without a status the list is the approvers' queue: pending items only.
	pending := client.ApprovalFilter{Domain: client.DomainPayment}
	for item, err := range c.Approvals(ctx, pending) {
		if err != nil {
			log.Fatal(err)
		}
		// Money is a decimal string: compare it as a decimal, never as a float.
		worth, err := decimal.NewFromString(item.Order.AmountUSD)
		if err != nil {
			continue // no value to judge by: leave it to a person
		}
		d := client.Decision{Decision: client.Reject, Comment: "over the bot's limit"}
		if worth.LessThan(decimal.NewFromInt(10000)) {
			d = client.Decision{Decision: client.Approve, Comment: "under 10,000 USD"}
		}
		_, err = c.DecideApproval(ctx, item.Domain, item.ID, d)
		var p *client.Problem
		switch {
		case errors.As(err, &p) && (p.Code == client.CodeConflict || p.Code == client.CodeMakerChecker):
			fmt.Println(item.ID, "not decided:", p.Detail) // decided meanwhile, or this bot created the order
		case err != nil:
			log.Fatal(err)
		default:
			fmt.Println(item.ID, d.Decision)
		}
	}
}

// Authenticate as an OAuth client: the client fetches the access token, renews it before
// it expires, and fetches another if the API refuses it.
func ExampleWithClientCredentials() {
	c, err := client.New(os.Getenv("TREASURY_URL"),
		client.WithClientCredentials(os.Getenv("TREASURY_CLIENT_ID"), os.Getenv("TREASURY_CLIENT_SECRET"), "trade:read trade:write"))
	if err != nil {
		log.Fatal(err)
	}
	o, err := c.CreateOrder(context.Background(), client.TradeRequest{
		WalletID: "wal_01938f…", SellAsset: "ETH", BuyAsset: "USDC", SellAmount: "1.5", MaxSlippageBps: 50,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(o.ID, o.Legs[0].Leg)
}

// Follow a config's events with nothing missed: after a reconnection the client reads
// what happened meanwhile from GET /events, and hands each event over once. Keeping the
// last event's id lets the next run resume where this one stopped.
func ExampleClient_FollowEvents() {
	c, err := client.New(os.Getenv("TREASURY_URL"), client.WithToken(os.Getenv("TREASURY_TOKEN"))) // an sk_ key of the app
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	last := os.Getenv("LAST_EVENT_ID") // kept by an earlier run, or empty
	err = c.FollowEvents(ctx, "wsc_01938f…", func(ev client.Event) error {
		fmt.Println(ev.OccurredAt.Format(time.RFC3339), ev.Event, ev.OrderID, ev.OrderStatus, ev.Sequence)
		last = ev.ID // store it somewhere durable
		return nil
	}, &client.FollowOptions{
		After:   last,
		Options: client.Options{OnRetry: func(err error, wait time.Duration) { log.Printf("%v; reconnecting in %s", err, wait) }},
	})
	if err != nil {
		log.Fatal(err)
	}
}

// A person, signed in with their e-mail address and password, managing an app's
// WebSocket configs.
func ExampleWithSession() {
	c, err := client.New(os.Getenv("TREASURY_URL"),
		client.WithSession("owner@example.com", os.Getenv("TREASURY_PASSWORD")), client.WithApp("pay"))
	if err != nil {
		log.Fatal(err)
	}
	cfg, err := c.CreateWebSocketConfig(context.Background(), []string{"order.*"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cfg.ID, cfg.Events)
}
