// Command payout-job pays one payout and waits for its outcome: it creates a payment,
// submits it and follows the order's stored events until Order.Confirmed (exit 0, the
// transaction hash on stdout), Order.Failed or Order.Rejected (exit 1). With
// --webhook-listen it hears of the outcome from the pay app's webhook instead, and reads
// the stored events once, for what happened before it listened.
//
// It needs only read and write on the pay app: approvals and the signature are other
// people's (or devices') business, and the job merely waits for them.
package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/client"
)

// Exit statuses.
const (
	exitConfirmed = 0
	exitFailed    = 1 // the payment failed or was rejected, or the job could not do its work
	exitUsage     = 2
	exitUnknown   = 3 // timed out or interrupted: the order may still complete
)

const pollInterval = 500 * time.Millisecond

// scope is all the job asks of an OAuth client, even one allowed more.
const scope = "pay:read pay:write"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// payment is what the job pays: the create body of a payment.
type payment = client.PaymentRequest

// event is what the job reads of an event's data.
type event struct {
	ID          string `json:"id"`
	OrderID     string `json:"orderId"`
	Event       string `json:"event"`
	OrderStatus string `json:"orderStatus"`
	OccurredAt  string `json:"occurredAt"`
	TxHash      string `json:"txHash"`
	Reason      string `json:"reason"`
	Failure     *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"failure"`
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("payout-job", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		baseURL  = fs.String("url", envOr("TREASURY_URL", "http://127.0.0.1:8080"), "where the API answers ($TREASURY_URL)")
		token    = fs.String("token", "", "a pay sk_ key, or a tk_ key with read and write on pay (default $TREASURY_TOKEN)")
		clientID = fs.String("client-id", "", "an OAuth client of pay with pay:read pay:write (default $TREASURY_CLIENT_ID)")
		secret   = fs.String("client-secret", "", "its secret (default $TREASURY_CLIENT_SECRET)")
		wallet   = fs.String("wallet", "", "the paying wallet: its id (wal_…), address or label, as GET /api/v1/wallets lists\nthem (default: the organisation's first wallet on --chain)")
		chain    = fs.String("chain", "ethereum", "the chain of the paying wallet, when --wallet does not name one")
		asset    = fs.String("asset", "USDC", "the asset to pay")
		amount   = fs.String("amount", "", "the amount, a decimal string such as 1250.50")
		to       = fs.String("to", "", "the destination address")
		ref      = fs.String("reference", "", "your own reference for the payment (optional)")
		idemKey  = fs.String("idempotency-key", "", "the key of this payout; rerun with the same key to resume it\nwithout paying twice (default: a fresh one, printed)")
		timeout  = fs.Duration("timeout", 2*time.Minute, "how long to wait for the outcome")
		hookAddr = fs.String("webhook-listen", "", "hear of the outcome from webhook messages received on this address (host:port),\nwhere a webhook of the pay app sends; instead of polling the events")
		hookKey  = fs.String("webhook-secret", "", "that webhook's signing secret, whsec_… (default $TREASURY_WEBHOOK_SECRET)")
		csvPath  = fs.String("csv", "", "pay every payout of this CSV file (columns reference, wallet, asset, amount, to) and\nprint a reconciliation report; each row's idempotency key derives from its reference")
		parallel = fs.Int("concurrency", 4, "with --csv: requests in flight at once")
		batched  = fs.Bool("batch", false, "with --csv: pay the rows of each wallet and asset as batch payments, one order of up\nto 500 recipients each, and reconcile each row from its recipient's status")
	)
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	usage := func(msg string) int {
		fmt.Fprintln(stderr, "payout-job:", msg)
		return exitUsage
	}
	// Secrets come from the environment when not given, and never appear as a flag's
	// default: -h would print them.
	*token = strings.TrimSpace(cmp.Or(*token, os.Getenv("TREASURY_TOKEN")))
	*clientID = strings.TrimSpace(cmp.Or(*clientID, os.Getenv("TREASURY_CLIENT_ID")))
	*secret = strings.TrimSpace(cmp.Or(*secret, os.Getenv("TREASURY_CLIENT_SECRET")))
	*hookKey = strings.TrimSpace(cmp.Or(*hookKey, os.Getenv("TREASURY_WEBHOOK_SECRET")))
	if *hookAddr != "" && *hookKey == "" {
		return usage("--webhook-secret (or $TREASURY_WEBHOOK_SECRET) is required with --webhook-listen")
	}
	var cred client.Option
	switch {
	case *clientID != "" && *token != "":
		return usage("give either a token or an OAuth client, not both")
	case *clientID != "" && *secret == "":
		return usage("--client-secret (or $TREASURY_CLIENT_SECRET) is required with --client-id")
	case *clientID != "":
		cred = client.WithClientCredentials(*clientID, *secret, scope)
	case *token != "":
		cred = client.WithToken(*token)
	default:
		return usage("a credential is required: --token / $TREASURY_TOKEN, or --client-id and --client-secret")
	}
	if *batched && *csvPath == "" {
		return usage("--batch pays the rows of a file: give --csv")
	}
	if *timeout <= 0 || *parallel < 1 {
		return usage("--timeout and --concurrency must be positive")
	}
	batch := *csvPath != ""
	switch {
	case batch && (*wallet != "" || *amount != "" || *to != "" || *idemKey != "" || *ref != "" || *hookAddr != ""):
		return usage("--csv takes the payouts from the file: leave out --wallet, --amount, --to, --reference, --idempotency-key and --webhook-listen")
	case !batch && (*to == "" || *amount == ""):
		return usage("--amount and --to are required (or --csv)")
	}
	// Checked here to fail early; the string itself is sent, so that a rerun with the
	// same key sends the very same body.
	if d, err := decimal.NewFromString(*amount); !batch && (err != nil || !d.IsPositive()) {
		return usage("--amount must be a positive decimal, e.g. 1250.50")
	}
	if *idemKey == "" {
		buf := make([]byte, 16)
		_, _ = rand.Read(buf)
		*idemKey = "payout-" + hex.EncodeToString(buf)
	}
	// Patient retries: a payout job runs unattended, and every write carries its key.
	c, err := client.New(*baseURL, cred, client.WithRetryPolicy(client.RetryPolicy{Attempts: 6, MaxBackoff: 10 * time.Second}))
	if err != nil {
		return usage(err.Error())
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }
	// The job finds its wallet itself, as its pay credential lists the organisation's.
	wallets, err := listWallets(ctx, c)
	if err != nil {
		return fail(ctx, logf, "find the wallet", err)
	}
	if batch {
		return runCSV(ctx, c, wallets, csvRun{path: *csvPath, asset: *asset, concurrency: *parallel, batched: *batched}, stdout, logf)
	}
	from, err := wallets.find(*wallet, *chain)
	if err != nil {
		return usage(err.Error())
	}
	logf("paying from %s (%s, %s %s)", from.ID, from.Label, from.Chain, from.Address)
	logf("idempotency key %s (rerun with --idempotency-key %s to resume this payout)", *idemKey, *idemKey)
	var messages <-chan event
	if *hookAddr != "" {
		// Listening before the payment exists: none of its messages can come too early.
		if messages, err = receiveWebhooks(ctx, *hookAddr, *hookKey, logf); err != nil {
			return usage(err.Error())
		}
	}

	body := payment{WalletID: from.ID, Asset: *asset, Amount: *amount, Destination: client.Destination{Address: *to}, Reference: *ref}
	orderID, err := pay(ctx, c, body, *idemKey, logf)
	if err != nil {
		return fail(ctx, logf, "pay", err)
	}
	var r result
	if messages != nil {
		r = reconcileFromWebhooks(ctx, c, orderID, messages, logf)
	} else {
		r = reconcile(ctx, c, orderID, logf)
	}
	if r.code == exitConfirmed {
		fmt.Fprintln(stdout, r.txHash)
	}
	return r.code
}

// pay creates the payment and submits it, each write under its own key derived from key,
// and returns the order's id. Run again with the same key and body, it finds the same
// order and submits it at most once: the server answers a repeated key with its first
// answer.
func pay(ctx context.Context, c *client.Client, body payment, key string, logf func(string, ...any)) (string, error) {
	// The client resends a write whose answer was lost or temporary (a network error,
	// 429, 5xx, the same key still in flight); the idempotency key makes that safe.
	var created, submit client.Answer
	o, err := c.CreateOrder(ctx, body, client.WithIdempotencyKey(key+":create"), client.WithAnswer(&created))
	if err != nil {
		return "", fmt.Errorf("create the payment: %w", err)
	}
	if created.Replayed {
		// The first answer, as it was then: the order has moved on since.
		logf("replayed: %s was created by an earlier run with this key", o.ID)
	} else {
		logf("created %s (%s)", o.ID, o.Status)
	}
	submitted, err := c.SubmitOrder(ctx, o.Domain, o.ID, client.WithIdempotencyKey(key+":submit"), client.WithAnswer(&submit))
	var p *client.Problem
	switch {
	case errors.As(err, &p) && p.Code == client.CodeConflict:
		// Submitted by an earlier run whose stored answer has since expired: reconcile.
		logf("%s was submitted before; following it", o.ID)
	case err != nil:
		return o.ID, fmt.Errorf("submit %s: %w", o.ID, err)
	case submit.Replayed:
		logf("replayed: %s was submitted by an earlier run with this key; following it", o.ID)
	default:
		logf("submitted %s (%s)", o.ID, submitted.Status)
	}
	return o.ID, nil
}

// result is how a payout ended, or that it has not yet.
type result struct {
	code   int
	done   bool
	status string
	txHash string
	detail string
}

// outcome reads an event of the order: the result it ends the payout with, or one not done.
func outcome(orderID string, ev event, logf func(string, ...any)) result {
	logf("%s  %s  %-24s  %s", ev.OccurredAt, orderID, ev.Event, ev.OrderStatus)
	switch ev.Event {
	case client.EventOrderConfirmed:
		return result{code: exitConfirmed, done: true, status: ev.OrderStatus, txHash: ev.TxHash}
	case client.EventOrderFailed:
		r := result{code: exitFailed, done: true, status: ev.OrderStatus}
		if ev.Failure != nil {
			r.detail = ev.Failure.Code + ": " + ev.Failure.Message
			logf("%s failed: %s", orderID, r.detail)
		}
		return r
	case client.EventOrderRejected:
		logf("%s was rejected (%s)", orderID, ev.Reason)
		return result{code: exitFailed, done: true, status: ev.OrderStatus, detail: ev.Reason}
	}
	return result{status: ev.OrderStatus}
}

// reconcile follows the order's stored events from the first one, so that a rerun (or a
// job that started late) sees the whole history, until its outcome or ctx's end.
func reconcile(ctx context.Context, c *client.Client, orderID string, logf func(string, ...any)) result {
	after, last := "", ""
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		r, err := readEvents(ctx, c, orderID, &after, logf)
		if r.done {
			return r
		}
		last = cmp.Or(r.status, last)
		if err != nil {
			return failed(ctx, logf, "read the events of "+orderID, err, last)
		}
		select {
		case <-ctx.Done():
			logf("no outcome for %s yet: %v; rerun with the same --idempotency-key to keep following it", orderID, context.Cause(ctx))
			return result{code: exitUnknown, status: last, detail: "no outcome yet"}
		case <-tick.C:
		}
	}
}

// readEvents reads the order's stored events after *after (an event id, which is this
// list's cursor), moving it on. A temporary error is logged and left for the next read.
func readEvents(ctx context.Context, c *client.Client, orderID string, after *string, logf func(string, ...any)) (result, error) {
	var last result
	for {
		q := url.Values{"orderId": {orderID}, "limit": {"200"}}
		if *after != "" {
			q.Set("cursor", *after)
		}
		var page struct {
			Data       []event `json:"data"`
			NextCursor *string `json:"nextCursor"`
		}
		err := c.Do(ctx, "GET", "/events?"+q.Encode(), nil, &page)
		if err != nil {
			if ctx.Err() != nil || temporary(err) {
				if ctx.Err() == nil {
					logf("events: %v; trying again", err)
				}
				return last, nil
			}
			return last, err
		}
		for _, ev := range page.Data {
			*after = ev.ID
			if last = outcome(orderID, ev, logf); last.done {
				return last, nil
			}
		}
		if page.NextCursor == nil {
			return last, nil
		}
	}
}

// reconcileFromWebhooks reads the order's stored events once, for what happened before
// the job listened (a rerun), then waits for its webhook messages.
func reconcileFromWebhooks(ctx context.Context, c *client.Client, orderID string, messages <-chan event, logf func(string, ...any)) result {
	after := ""
	r, err := readEvents(ctx, c, orderID, &after, logf)
	if r.done {
		return r
	}
	if err != nil {
		return failed(ctx, logf, "read the events of "+orderID, err, r.status)
	}
	for {
		select {
		case ev := <-messages:
			if ev.OrderID != orderID {
				continue
			}
			if r := outcome(orderID, ev, logf); r.done {
				return r
			}
		case <-ctx.Done():
			logf("no outcome for %s yet: %v; rerun with the same --idempotency-key to keep following it", orderID, context.Cause(ctx))
			return result{code: exitUnknown, detail: "no outcome yet"}
		}
	}
}

// receiveWebhooks serves the pay app's webhook on addr until ctx ends: each message is
// verified against the secret, handed on once (a retried or redelivered message has the
// same webhook-id), and answered 204.
func receiveWebhooks(ctx context.Context, addr, secret string, logf func(string, ...any)) (<-chan event, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--webhook-listen %s: %w", addr, err)
	}
	out := make(chan event, 64)
	var mu sync.Mutex
	seen := map[string]bool{}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			if err != nil || client.VerifyWebhook(secret, r.Header, body) != nil {
				http.Error(w, "the signature does not verify", http.StatusUnauthorized)
				return
			}
			mu.Lock()
			first := !seen[r.Header.Get("webhook-id")]
			seen[r.Header.Get("webhook-id")] = true
			mu.Unlock()
			var ev event
			if first && json.Unmarshal(body, &ev) == nil {
				select {
				case out <- ev:
				case <-r.Context().Done():
					http.Error(w, "busy", http.StatusServiceUnavailable)
					return
				}
			}
			w.WriteHeader(http.StatusNoContent)
		})}
	go func() { _ = srv.Serve(ln) }()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	logf("listening for webhook messages on %s", ln.Addr())
	return out, nil
}

func temporary(err error) bool {
	var p *client.Problem
	if errors.As(err, &p) {
		return p.Temporary()
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

func fail(ctx context.Context, logf func(string, ...any), what string, err error) int {
	return failed(ctx, logf, what, err, "").code
}

// failed is the result of a payout the job could not carry on with: unknown when ctx
// ended (the order may still complete), failed otherwise.
func failed(ctx context.Context, logf func(string, ...any), what string, err error, status string) result {
	logf("cannot %s: %v", what, err)
	if ctx.Err() != nil {
		return result{code: exitUnknown, done: true, status: status, detail: "interrupted: " + err.Error()}
	}
	return result{code: exitFailed, done: true, status: status, detail: err.Error()}
}

func envOr(name, def string) string { return cmp.Or(os.Getenv(name), def) }
