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
	"github.com/opentreasury/treasury/events"
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

type payment struct {
	WalletID    string      `json:"walletId"`
	Asset       string      `json:"asset"`
	Amount      string      `json:"amount"`
	Destination destination `json:"destination"`
	Reference   string      `json:"reference,omitempty"`
}

type destination struct {
	Address string `json:"address"`
}

type order struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

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
		wallet   = fs.String("wallet", "", "the paying wallet (wal_…)")
		asset    = fs.String("asset", "USDC", "the asset to pay")
		amount   = fs.String("amount", "", "the amount, a decimal string such as 1250.50")
		to       = fs.String("to", "", "the destination address")
		ref      = fs.String("reference", "", "your own reference for the payment (optional)")
		idemKey  = fs.String("idempotency-key", "", "the key of this payout; rerun with the same key to resume it\nwithout paying twice (default: a fresh one, printed)")
		timeout  = fs.Duration("timeout", 2*time.Minute, "how long to wait for the outcome")
		hookAddr = fs.String("webhook-listen", "", "hear of the outcome from webhook messages received on this address (host:port),\nwhere a webhook of the pay app sends; instead of polling the events")
		hookKey  = fs.String("webhook-secret", "", "that webhook's signing secret, whsec_… (default $TREASURY_WEBHOOK_SECRET)")
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
	if *wallet == "" || *to == "" || *amount == "" {
		return usage("--wallet, --amount and --to are required")
	}
	// Checked here to fail early; the string itself is sent, so that a rerun with the
	// same key sends the very same body.
	if d, err := decimal.NewFromString(*amount); err != nil || !d.IsPositive() {
		return usage("--amount must be a positive decimal, e.g. 1250.50")
	}
	if *timeout <= 0 {
		return usage("--timeout must be positive")
	}
	if *idemKey == "" {
		buf := make([]byte, 16)
		_, _ = rand.Read(buf)
		*idemKey = "payout-" + hex.EncodeToString(buf)
	}
	c, err := client.New(*baseURL, cred)
	if err != nil {
		return usage(err.Error())
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }
	logf("idempotency key %s (rerun with --idempotency-key %s to resume this payout)", *idemKey, *idemKey)
	var messages <-chan event
	if *hookAddr != "" {
		// Listening before the payment exists: none of its messages can come too early.
		if messages, err = receiveWebhooks(ctx, *hookAddr, *hookKey, logf); err != nil {
			return usage(err.Error())
		}
	}

	var o order
	body := payment{WalletID: *wallet, Asset: *asset, Amount: *amount, Destination: destination{Address: *to}, Reference: *ref}
	// Create and submit are two writes, so each gets its own key derived from the job's.
	err = retried(ctx, logf, "create", func() error {
		return c.Do(ctx, "POST", "/payments", body, &o, client.WithIdempotencyKey(*idemKey+":create"))
	})
	if err != nil {
		return fail(ctx, logf, "create the payment", err)
	}
	logf("created %s (%s)", o.ID, o.Status)
	err = retried(ctx, logf, "submit", func() error {
		return c.Do(ctx, "POST", "/payments/"+url.PathEscape(o.ID)+"/submit", nil, &o,
			client.WithIdempotencyKey(*idemKey+":submit"))
	})
	var p *client.Problem
	switch {
	case errors.As(err, &p) && p.Code == "conflict":
		// Submitted by an earlier run whose stored answer has since expired: reconcile.
		logf("%s was submitted before; following it", o.ID)
	case err != nil:
		return fail(ctx, logf, "submit "+o.ID, err)
	default:
		logf("submitted %s (%s)", o.ID, o.Status)
	}
	if messages != nil {
		return reconcileFromWebhooks(ctx, c, o.ID, messages, stdout, logf)
	}
	return reconcile(ctx, c, o.ID, stdout, logf)
}

// outcome is the exit status an event of the order ends the job with; done is false for
// an event that is not the order's last.
func outcome(orderID string, ev event, stdout io.Writer, logf func(string, ...any)) (code int, done bool) {
	logf("%s  %-24s  %s", ev.OccurredAt, ev.Event, ev.OrderStatus)
	switch ev.Event {
	case events.OrderConfirmed:
		fmt.Fprintln(stdout, ev.TxHash)
		return exitConfirmed, true
	case events.OrderFailed:
		if ev.Failure != nil {
			logf("%s failed: %s (%s)", orderID, ev.Failure.Code, ev.Failure.Message)
		}
		return exitFailed, true
	case events.OrderRejected:
		logf("%s was rejected (%s)", orderID, ev.Reason)
		return exitFailed, true
	}
	return 0, false
}

// reconcile follows the order's stored events from the first one, so that a rerun (or a
// job that started late) sees the whole history, and returns the exit status.
func reconcile(ctx context.Context, c *client.Client, orderID string, stdout io.Writer, logf func(string, ...any)) int {
	after := ""
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		code, done, err := readEvents(ctx, c, orderID, &after, stdout, logf)
		if done {
			return code
		}
		if err != nil {
			return fail(ctx, logf, "read the events of "+orderID, err)
		}
		select {
		case <-ctx.Done():
			logf("no outcome for %s yet: %v; rerun with the same --idempotency-key to keep following it", orderID, context.Cause(ctx))
			return exitUnknown
		case <-tick.C:
		}
	}
}

// readEvents reads the order's stored events after *after, moving it on; done says an
// event ended the job, with its exit status. A temporary error is logged and left for
// the next read.
func readEvents(ctx context.Context, c *client.Client, orderID string, after *string, stdout io.Writer, logf func(string, ...any)) (int, bool, error) {
	for {
		q := url.Values{"orderId": {orderID}, "limit": {"200"}}
		if *after != "" {
			q.Set("after", *after)
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
				return 0, false, nil
			}
			return 0, false, err
		}
		for _, ev := range page.Data {
			*after = ev.ID
			if code, done := outcome(orderID, ev, stdout, logf); done {
				return code, true, nil
			}
		}
		if page.NextCursor == nil {
			return 0, false, nil
		}
	}
}

// reconcileFromWebhooks reads the order's stored events once, for what happened before
// the job listened (a rerun), then waits for its webhook messages.
func reconcileFromWebhooks(ctx context.Context, c *client.Client, orderID string, messages <-chan event, stdout io.Writer,
	logf func(string, ...any)) int {
	after := ""
	code, done, err := readEvents(ctx, c, orderID, &after, stdout, logf)
	if done {
		return code
	}
	if err != nil {
		return fail(ctx, logf, "read the events of "+orderID, err)
	}
	for {
		select {
		case ev := <-messages:
			if ev.OrderID != orderID {
				continue
			}
			if code, done := outcome(orderID, ev, stdout, logf); done {
				return code
			}
		case <-ctx.Done():
			logf("no outcome for %s yet: %v; rerun with the same --idempotency-key to keep following it", orderID, context.Cause(ctx))
			return exitUnknown
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

// retried resends a write whose answer was lost or temporary (a network error, 429,
// 5xx, or the same key still in flight); the idempotency key makes that safe.
func retried(ctx context.Context, logf func(string, ...any), what string, f func() error) error {
	wait := 500 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil || attempt == 5 || !temporary(err) || ctx.Err() != nil {
			return err
		}
		logf("%s: %v; retrying in %s", what, err, wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait *= 2
	}
}

func temporary(err error) bool {
	var p *client.Problem
	if errors.As(err, &p) {
		return p.Temporary()
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

func fail(ctx context.Context, logf func(string, ...any), what string, err error) int {
	logf("cannot %s: %v", what, err)
	if ctx.Err() != nil {
		return exitUnknown
	}
	return exitFailed
}

func envOr(name, def string) string { return cmp.Or(os.Getenv(name), def) }
