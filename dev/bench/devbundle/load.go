package devbundle

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/internal/events"
)

// Client drives a bundle's API with its seeded credentials.
type Client struct {
	API   string // {base}/api/v1
	Creds *seed.Credentials
	HTTP  *http.Client
}

// NewClient is a client of the bundle whose credentials are creds, with connections
// enough for a burst of hundreds of requests.
func NewClient(creds *seed.Credentials) *Client {
	return &Client{API: creds.BaseURL + "/api/v1", Creds: creds,
		HTTP: &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}
}

// Do sends a request under /api/v1 and decodes a JSON object answer.
func (c *Client) Do(method, path, token, body string) (int, map[string]any, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.API+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out, nil
}

// Submitted is one order in flight: when its submit was sent.
type Submitted struct {
	ID     string
	SentAt time.Time
}

// CreatePayments creates n drafts of 500 USDC from the auto-signed ethereum wallets.
func (c *Client) CreatePayments(n int) ([]string, error) { return c.CreatePaymentsOn("ethereum", n) }

// CreatePaymentsOn creates n draft USDC payments of 500 from the autoSign wallets of a
// chain (ethereum or solana), in turn, to a whitelisted payee of that chain.
func (c *Client) CreatePaymentsOn(chainName string, n int) ([]string, error) {
	var wallets []string
	for _, w := range c.Creds.Wallets {
		if w.AutoSign && w.Chain == chainName {
			wallets = append(wallets, w.ID)
		}
	}
	if len(wallets) == 0 {
		return nil, fmt.Errorf("no autoSign wallet on %s", chainName)
	}
	payee := "0x1111111111111111111111111111111111111111"
	if chainName == "solana" {
		payee = seed.SolanaPayees[0]
	}
	ids := make([]string, n)
	for i := range ids {
		body := fmt.Sprintf(`{"walletId":%q,"asset":"USDC","amount":"500","destination":{"address":%q}}`, wallets[i%len(wallets)], payee)
		status, out, err := c.Do("POST", "/payments", c.Creds.Keys["pay"].SK, body)
		if err != nil || status != 201 {
			return nil, fmt.Errorf("create: %d %v %v", status, out, err)
		}
		ids[i] = out["id"].(string)
	}
	return ids, nil
}

// SubmitAll submits every order at once, each from a goroutine of its own.
func (c *Client) SubmitAll(app, collection string, ids []string) ([]Submitted, error) {
	out := make([]Submitted, len(ids))
	errs := make(chan error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			out[i] = Submitted{ID: id, SentAt: time.Now()}
			status, body, err := c.Do("POST", collection+id+"/submit", c.Creds.Keys[app].SK, "{}")
			if err != nil || status != 202 {
				errs <- fmt.Errorf("submit %s: %d %v %v", id, status, body, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	return out, <-errs
}

// Confirmations follows the event stream until every order has ended, and returns when
// each was confirmed (by the server's clock) and how many ended otherwise.
func (c *Client) Confirmations(app string, orders []Submitted, timeout time.Duration) (map[string]time.Time, int, error) {
	want := map[string]bool{}
	for _, o := range orders {
		want[o.ID] = true
	}
	confirmed := map[string]time.Time{}
	other := 0
	after := ""
	deadline := time.Now().Add(timeout)
	for len(confirmed)+other < len(orders) {
		if time.Now().After(deadline) {
			return confirmed, other, fmt.Errorf("timed out with %d of %d orders ended%s", len(confirmed)+other, len(orders),
				c.standing(app, orders, confirmed))
		}
		path := "/events?limit=200"
		if after != "" {
			path += "&after=" + after
		}
		status, page, err := c.Do("GET", path, c.Creds.Keys[app].Read, "")
		if err != nil || status != 200 {
			return confirmed, other, fmt.Errorf("events: %d %v", status, err)
		}
		data, _ := page["data"].([]any)
		for _, e := range data {
			ev := e.(map[string]any)
			after = ev["id"].(string)
			id, _ := ev["orderId"].(string)
			if !want[id] {
				continue
			}
			switch ev["event"] {
			case events.OrderConfirmed:
				at, _ := time.Parse(time.RFC3339Nano, ev["occurredAt"].(string))
				confirmed[id] = at
			case events.OrderFailed, events.OrderRejected:
				other++
			}
		}
		if len(data) < 200 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	return confirmed, other, nil
}

// standing reads the orders the stream did not end, to tell a stuck order from a missed
// event.
func (c *Client) standing(app string, orders []Submitted, ended map[string]time.Time) string {
	out := ""
	for _, o := range orders {
		if _, ok := ended[o.ID]; ok {
			continue
		}
		status, body, err := c.Do("GET", "/payments/"+o.ID, c.Creds.Keys[app].Read, "")
		out += fmt.Sprintf("; %s: %d %v %v", o.ID, status, body["status"], err)
		if len(out) > 2000 {
			break
		}
	}
	return out
}
