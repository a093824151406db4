// Command lifecycle measures the order lifecycle on the dev bundle: it starts treasury-dev
// on free ports with a fresh data directory (or uses a running one), submits N payments
// at once, and reports orders per second and submit-to-confirmed latency percentiles.
//
//	go run ./bench/lifecycle -dev-bin bin/treasury-dev -orders 200
//
// A scenario is a function from a client to the orders it submitted; add one to the
// scenarios map to measure another path.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/opentreasury/treasury/bench/devbundle"
	"github.com/opentreasury/treasury/events"
	"github.com/opentreasury/treasury/seed"
)

type client struct {
	api   string
	creds *seed.Credentials
	http  *http.Client
}

func (c *client) do(method, path, token, body string) (int, map[string]any, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.api+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out, nil
}

// submitted is one order in flight: when its submit was sent.
type submitted struct {
	id     string
	sentAt time.Time
}

// scenarios each create their orders, then submit them all at once.
var scenarios = map[string]func(c *client, n int) ([]submitted, error){
	"payments": func(c *client, n int) ([]submitted, error) {
		var wallets []string
		for _, w := range c.creds.Wallets {
			if w.AutoSign && w.Chain == "ethereum" {
				wallets = append(wallets, w.ID)
			}
		}
		ids := make([]string, n)
		for i := range ids {
			body := fmt.Sprintf(`{"walletId":%q,"asset":"USDC","amount":"500","destination":{"address":"0x1111111111111111111111111111111111111111"}}`, wallets[i%len(wallets)])
			status, out, err := c.do("POST", "/payments", c.creds.Keys["pay"].SK, body)
			if err != nil || status != 201 {
				return nil, fmt.Errorf("create: %d %v %v", status, out, err)
			}
			ids[i] = out["id"].(string)
		}
		return submitAll(c, "pay", "/payments/", ids)
	},
}

func submitAll(c *client, app, collection string, ids []string) ([]submitted, error) {
	out := make([]submitted, len(ids))
	errs := make(chan error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = submitted{id: id, sentAt: time.Now()}
			status, body, err := c.do("POST", collection+id+"/submit", c.creds.Keys[app].SK, "{}")
			if err != nil || status != 202 {
				errs <- fmt.Errorf("submit %s: %d %v %v", id, status, body, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	return out, <-errs
}

// confirmations follows the event stream until every order has ended, and returns when
// each was confirmed (by the server's clock) and how many ended otherwise.
func confirmations(c *client, app string, orders []submitted, timeout time.Duration) (map[string]time.Time, int, error) {
	want := map[string]bool{}
	for _, o := range orders {
		want[o.id] = true
	}
	confirmed := map[string]time.Time{}
	other := 0
	after := ""
	deadline := time.Now().Add(timeout)
	for len(confirmed)+other < len(orders) {
		if time.Now().After(deadline) {
			return confirmed, other, fmt.Errorf("timed out with %d of %d orders ended", len(confirmed)+other, len(orders))
		}
		path := "/events?limit=200"
		if after != "" {
			path += "&after=" + after
		}
		status, page, err := c.do("GET", path, c.creds.Keys[app].Read, "")
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

func main() {
	devBin := flag.String("dev-bin", "bin/treasury-dev", "treasury-dev binary to start (ignored with -credentials)")
	credsPath := flag.String("credentials", "", "credentials.json of a running bundle, instead of starting one")
	scenario := flag.String("scenario", "payments", "what to submit")
	n := flag.Int("orders", 200, "orders submitted at once")
	timeout := flag.Duration("timeout", 5*time.Minute, "give up after")
	extra := flag.String("dev-args", "--rate-limit 100000 --rate-burst 100000", "flags for treasury-dev, space separated (the default lifts the per-key rate limit: one key drives the whole load)")
	flag.Parse()

	run, ok := scenarios[*scenario]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown scenario %q\n", *scenario)
		os.Exit(2)
	}
	c := &client{http: &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}
	path := *credsPath
	if path == "" {
		b, err := devbundle.Start(*devBin, strings.Fields(*extra))
		if err != nil {
			fmt.Fprintln(os.Stderr, "start treasury-dev:", err)
			os.Exit(1)
		}
		defer b.Stop()
		path = b.CredentialsPath
	}
	var err error
	if c.creds, err = devbundle.ReadCredentials(path); err != nil {
		fmt.Fprintln(os.Stderr, "credentials:", err)
		os.Exit(1)
	}
	c.api = c.creds.BaseURL + "/api/v1"

	orders, err := run(c, *n)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	app := map[string]string{"payments": "pay"}[*scenario]
	confirmed, other, err := confirmations(c, app, orders, *timeout)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	var lat []time.Duration
	first, last := orders[0].sentAt, time.Time{}
	for _, o := range orders {
		if o.sentAt.Before(first) {
			first = o.sentAt
		}
		if at, ok := confirmed[o.id]; ok {
			lat = append(lat, at.Sub(o.sentAt))
			if at.After(last) {
				last = at
			}
		}
	}
	slices.Sort(lat)
	span := last.Sub(first)
	fmt.Printf("scenario %s: %d orders submitted at once, %d confirmed, %d ended otherwise\n", *scenario, len(orders), len(confirmed), other)
	if len(lat) > 0 {
		fmt.Printf("throughput %.1f orders/s (first submit to last confirmation: %v)\n", float64(len(lat))/span.Seconds(), span.Round(time.Millisecond))
		fmt.Printf("submit->confirmed p50 %v  p90 %v  p99 %v  max %v\n", devbundle.Percentile(lat, .50).Round(time.Millisecond),
			devbundle.Percentile(lat, .90).Round(time.Millisecond), devbundle.Percentile(lat, .99).Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
	}
	if err != nil || len(confirmed) != len(orders) {
		os.Exit(1)
	}
}
