// Command approvals-bot records maker-checker decisions by a fixed rule: pending approval
// items of one app worth at most --approve-up-to USD are approved, the others rejected.
//
// Its key needs only the approve action on that app: it can neither create, submit nor
// sign an order, so a leaked bot key cannot move funds on its own. Given the private half
// of its key's approver key, it signs each decision over the item's statement, as a
// policy with signedApprovals requires and a verifying signer checks.
package main

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/client"
)

// domains maps each app with orders to the domain its approval items carry.
var domains = map[string]string{"pay": "payment", "trade": "trade", "earn": "earn", "borrow": "borrow"}

type item struct {
	ID                string `json:"id"`
	Domain            string `json:"domain"`
	OrderID           string `json:"orderId"`
	Status            string `json:"status"`
	RequiredApprovals int    `json:"requiredApprovals"`
	Reason            string `json:"reason"`
	// Statement is what an approver signs; absent on items made before statements.
	Statement *string `json:"statement"`
	Order     struct {
		AmountUSD string `json:"amountUsd"`
		Chain     string `json:"chain"`
		Details   struct {
			Asset       string `json:"asset"`
			Amount      string `json:"amount"`
			Destination struct {
				Address string `json:"address"`
			} `json:"destination"`
		} `json:"details"`
	} `json:"order"`
	ExpiresAt string `json:"expiresAt"`
}

type bot struct {
	c      *client.Client
	domain string
	limit  decimal.Decimal
	out    io.Writer
	// signer signs decisions when the bot holds an approver key; nil otherwise.
	signer *approverKey
	// handled are the items already decided (or skipped) while still pending, e.g.
	// waiting for a second approver: deciding again would change nothing.
	handled map[string]bool
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("approvals-bot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		baseURL  = fs.String("url", cmp.Or(os.Getenv("TREASURY_URL"), "http://127.0.0.1:8080"), "where the API answers ($TREASURY_URL)")
		token    = fs.String("token", "", "a tk_ key with only the approve action on --app (default $TREASURY_TOKEN)")
		app      = fs.String("app", "pay", "the app whose approvals to decide: pay, trade, earn or borrow")
		upTo     = fs.String("approve-up-to", "", "approve items worth at most this many USD (a decimal string); reject the rest")
		once     = fs.Bool("once", false, "decide what is pending now, then exit")
		interval = fs.Duration("interval", 2*time.Second, "how often to look for pending items")
		keyID    = fs.String("approver-key-id", os.Getenv("TREASURY_APPROVER_KEY_ID"), "the apk_ id of the token's approver key ($TREASURY_APPROVER_KEY_ID); with --approver-key, decisions are signed")
		keyText  = fs.String("approver-key", "", "the approver key's private half: ed25519 a base64 seed, secp256k1 32 bytes of hex (default $TREASURY_APPROVER_KEY)")
		scheme   = fs.String("approver-scheme", "ed25519", "the approver key's scheme: ed25519 or secp256k1")
	)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	usage := func(msg string) int {
		fmt.Fprintln(stderr, "approvals-bot:", msg)
		return 2
	}
	*token = strings.TrimSpace(cmp.Or(*token, os.Getenv("TREASURY_TOKEN")))
	if *token == "" {
		return usage("--token (or $TREASURY_TOKEN) is required")
	}
	domain, ok := domains[*app]
	if !ok {
		return usage("--app must be pay, trade, earn or borrow")
	}
	limit, err := decimal.NewFromString(strings.TrimSpace(*upTo))
	if err != nil || limit.IsNegative() {
		return usage("--approve-up-to must be a non-negative decimal number of USD, e.g. 50000")
	}
	if *interval <= 0 {
		return usage("--interval must be positive")
	}
	signer, err := loadApproverKey(*keyID, cmp.Or(*keyText, os.Getenv("TREASURY_APPROVER_KEY")), *scheme)
	if err != nil {
		return usage(err.Error())
	}
	c, err := client.New(*baseURL, client.WithToken(*token))
	if err != nil {
		return usage(err.Error())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	b := &bot{c: c, domain: domain, limit: limit, out: stdout, handled: map[string]bool{}, signer: signer}
	for {
		n, err := b.sweep(ctx)
		var p *client.Problem
		switch {
		case ctx.Err() != nil:
			return 0
		case err != nil && (*once || (errors.As(err, &p) && !p.Temporary())):
			// A refused key or a bad request will be refused again: stop rather than spin.
			fmt.Fprintln(stderr, "approvals-bot:", err)
			return 1
		case err != nil:
			fmt.Fprintln(stderr, "approvals-bot:", err, "(trying again)")
		}
		if *once {
			if n == 0 {
				fmt.Fprintln(stdout, "no pending approval items")
			}
			return 0
		}
		select {
		case <-ctx.Done():
			return 0
		case <-time.After(*interval):
		}
	}
}

// sweep reads every pending item first, then decides them: deciding while paging would
// not skip any (the cursor is an id), but a listing taken at one moment is easier to read.
func (b *bot) sweep(ctx context.Context) (int, error) {
	var pending []item
	cursor := ""
	for {
		// The list holds pending items unless another status is asked for.
		q := url.Values{"domain": {b.domain}, "limit": {"100"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page struct {
			Data       []item  `json:"data"`
			NextCursor *string `json:"nextCursor"`
		}
		if err := b.c.Do(ctx, "GET", "/approvals?"+q.Encode(), nil, &page); err != nil {
			return 0, fmt.Errorf("list pending approvals: %w", err)
		}
		pending = append(pending, page.Data...)
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	still := map[string]bool{}
	for _, it := range pending {
		still[it.ID] = true
		if b.handled[it.ID] {
			continue
		}
		if err := b.decide(ctx, it); err != nil {
			return 0, err
		}
		b.handled[it.ID] = true
	}
	// Forget the items that are no longer pending, so the set stays small.
	for id := range b.handled {
		if !still[id] {
			delete(b.handled, id)
		}
	}
	return len(pending), nil
}

func (b *bot) decide(ctx context.Context, it item) error {
	d := it.Order.Details
	fmt.Fprintf(b.out, "%s  %s  %s  %s USD  %s %s to %s  (%s)\n", it.ID, it.Domain, it.OrderID,
		cmp.Or(it.Order.AmountUSD, "?"), d.Amount, d.Asset, cmp.Or(d.Destination.Address, "-"), it.Reason)
	worth, err := decimal.NewFromString(it.Order.AmountUSD)
	if err != nil {
		// Without a value the rule cannot apply; a person should look at it.
		fmt.Fprintf(b.out, "  skipped: no USD value to compare\n")
		return nil
	}
	decision, comment := "APPROVE", fmt.Sprintf("approvals-bot: %s USD is at most %s USD", worth.StringFixedBank(2), b.limit)
	if worth.GreaterThan(b.limit) {
		decision, comment = "REJECT", fmt.Sprintf("approvals-bot: %s USD is over %s USD", worth.StringFixedBank(2), b.limit)
	}
	body := map[string]string{"decision": decision, "comment": comment}
	if b.signer != nil && it.Statement != nil && decision == "APPROVE" {
		// What gets signed is the statement, not the summary the rule read: approve only
		// a statement that says the same payment, or a signer would see a signature over
		// a transfer the rule never judged.
		if why := differs(*it.Statement, it); why != "" {
			fmt.Fprintf(b.out, "  skipped: the statement %s; a person should look at it\n", why)
			return nil
		}
	}
	if b.signer != nil && it.Statement != nil {
		// The signature covers the decision and the statement exactly as the item gives
		// it: the intent a verifying signer will hold the transaction to.
		sig, err := b.signer.key.Sign(client.DecisionDigest(decision, *it.Statement))
		if err != nil {
			return fmt.Errorf("sign the decision on %s: %w", it.ID, err)
		}
		body["keyId"], body["signature"] = b.signer.id, base64.StdEncoding.EncodeToString(sig)
	}
	// No Idempotency-Key: deciding is safe to repeat by itself (the same decision again
	// answers 202 as the first did), and a key shared by two bots would clash.
	var answer item
	err = b.c.Do(ctx, "POST", "/approvals/"+url.PathEscape(it.Domain)+"/"+url.PathEscape(it.ID)+"/decide", body, &answer)
	var p *client.Problem
	switch {
	case err == nil && body["signature"] != "":
		fmt.Fprintf(b.out, "  %s (signed with %s): item now %s\n", decision, b.signer.id, answer.Status)
	case err == nil:
		fmt.Fprintf(b.out, "  %s: item now %s\n", decision, answer.Status)
	case errors.As(err, &p) && p.Status == http.StatusConflict && p.Code == client.CodeConflict:
		// Decided by someone else or expired since it was listed: nothing left to do.
		fmt.Fprintf(b.out, "  not decided: %s\n", p.Detail)
	case errors.As(err, &p) && p.Code == client.CodeAlreadyDecided:
		// The person behind this bot's key decided it already, through another
		// credential: one person is one approver, and another must decide.
		fmt.Fprintf(b.out, "  not decided: %s\n", p.Detail)
	case errors.As(err, &p) && (p.Code == "maker_checker_violation" || p.Status == http.StatusNotFound):
		// Not this bot's to decide (it created the order, or cannot reach its wallet).
		fmt.Fprintf(b.out, "  not decided: %s\n", p.Detail)
	default:
		return fmt.Errorf("decide %s: %w", it.ID, err)
	}
	return nil
}

// approverKey is the private half of the approver key the bot's token carries.
type approverKey struct {
	id  string
	key *client.SigningKey
}

// loadApproverKey reads the approver key from the flags: none when neither is given.
func loadApproverKey(id, text, scheme string) (*approverKey, error) {
	id, text = strings.TrimSpace(id), strings.TrimSpace(text)
	if id == "" && text == "" {
		return nil, nil
	}
	if id == "" || text == "" {
		return nil, errors.New("--approver-key-id and --approver-key go together")
	}
	key, err := client.ParseSigningKey(scheme, text)
	if err != nil {
		return nil, fmt.Errorf("--approver-key: %w", err)
	}
	return &approverKey{id: id, key: key}, nil
}

// decimalsOf are the base units of the assets the bot checks statements of.
var decimalsOf = map[string]int32{"USDC": 6, "ETH": 18, "WBTC": 8, "MATIC": 18, "SOL": 9}

// differs says how a payment's statement differs from the item's order, "" when it says
// the same: the same order, one leg paying the destination exactly the amount.
func differs(statement string, it item) string {
	var st struct {
		OrderID string `json:"orderId"`
		Intent  []struct {
			To, Asset, Amount string
		} `json:"intent"`
	}
	if err := json.Unmarshal([]byte(statement), &st); err != nil {
		return "does not parse"
	}
	d := it.Order.Details
	decimals, known := decimalsOf[d.Asset]
	amount, err := decimal.NewFromString(d.Amount)
	switch {
	case st.OrderID != it.OrderID:
		return "is of another order"
	case it.Domain != "payment":
		return "is not of a payment, which alone the bot reads"
	case len(st.Intent) != 1 || !strings.EqualFold(st.Intent[0].To, d.Destination.Address) || st.Intent[0].Asset != d.Asset:
		return "pays another destination or asset"
	case !known || err != nil || amount.Shift(decimals).String() != st.Intent[0].Amount:
		return "moves another amount"
	}
	return ""
}
