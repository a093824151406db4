package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/opentreasury/treasury/dev/bench/devbundle"
)

// read is one measured request shape: path (under /api/v1) for the i-th request, and
// the key that sends it.
type read struct {
	name string
	key  string
	path func(i int) string
}

// figure is what one shape measured at one size.
type figure struct {
	name     string
	p50, p99 time.Duration
	// perSecond is rows a second, for the export; 0 elsewhere.
	perSecond float64
	failed    int
}

// measure sends rounds of n requests of r, c at a time, after a warm-up of c, and returns
// the median round's latencies' median and 99th percentile. Any answer but 200 counts as
// failed.
func measure(client *http.Client, base string, r read, n, c, rounds int) figure {
	run := func(n int) ([]time.Duration, int) {
		lat := make([]time.Duration, n)
		var failed int
		var mu sync.Mutex
		var wg sync.WaitGroup
		next := make(chan int)
		for range c {
			wg.Go(func() {
				for i := range next {
					began := time.Now()
					status, err := get(client, base+r.path(i), r.key, io.Discard)
					lat[i] = time.Since(began)
					if err != nil || status != http.StatusOK {
						mu.Lock()
						failed++
						if failed == 1 {
							fmt.Printf("  %s: %s answered %d %v\n", r.name, r.path(i), status, err)
						}
						mu.Unlock()
					}
				}
			})
		}
		for i := range n {
			next <- i
		}
		close(next)
		wg.Wait()
		return lat, failed
	}
	run(c)
	// Rounds, and the median of their figures: one stray pause (a collection, the bundle's
	// price refresh) moves one round's p99, not the figure.
	var p50s, p99s []time.Duration
	failed := 0
	for range rounds {
		lat, f := run(n)
		slices.Sort(lat)
		p50s, p99s = append(p50s, devbundle.Percentile(lat, 0.5)), append(p99s, devbundle.Percentile(lat, 0.99))
		failed += f
	}
	slices.Sort(p50s)
	slices.Sort(p99s)
	return figure{name: r.name, p50: p50s[len(p50s)/2], p99: p99s[len(p99s)/2], failed: failed}
}

func get(client *http.Client, url, key string, into io.Writer) (int, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	_, err = io.Copy(into, res.Body)
	return res.StatusCode, err
}

// page reads one list page and returns its items' ids and its next cursor.
func page(client *http.Client, url, key string) (ids []string, next string, err error) {
	var b strings.Builder
	status, err := get(client, url, key, &b)
	if err != nil || status != http.StatusOK {
		return nil, "", fmt.Errorf("GET %s: %d %v %.300s", url, status, err, b.String())
	}
	var p struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
		NextCursor string `json:"nextCursor"`
	}
	if err := json.Unmarshal([]byte(b.String()), &p); err != nil {
		return nil, "", err
	}
	for _, d := range p.Data {
		ids = append(ids, d.ID)
	}
	return ids, p.NextCursor, nil
}

// cursorAt walks a list from its start, limit 100 a page, and returns the cursor that
// continues after the depth-th item and the ids it passed.
func cursorAt(client *http.Client, list, key string, depth int) (string, []string, error) {
	sep := "?"
	if strings.Contains(list, "?") {
		sep = "&"
	}
	cursor := ""
	var seen []string
	for len(seen) < depth {
		url := list + sep + "limit=100"
		if cursor != "" {
			url += "&cursor=" + cursor
		}
		ids, next, err := page(client, url, key)
		if err != nil {
			return "", nil, err
		}
		seen = append(seen, ids...)
		if next == "" {
			return "", nil, fmt.Errorf("%s ends after %d items, before %d", list, len(seen), depth)
		}
		cursor = next
	}
	return cursor, seen, nil
}

// exportRate reads the whole audit chain, 10,000 entries a request, and returns entries
// a second.
func exportRate(client *http.Client, base, key string) (figure, error) {
	began := time.Now()
	rows, cursor := 0, ""
	for {
		url := base + "/audit-logs/export?limit=10000"
		if cursor != "" {
			url += "&cursor=" + cursor
		}
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			return figure{}, err
		}
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := client.Do(req)
		if err != nil {
			return figure{}, err
		}
		n, err := countLines(res.Body)
		_ = res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK {
			return figure{}, fmt.Errorf("export: %d %v", res.StatusCode, err)
		}
		rows += n
		if cursor = res.Header.Get("Next-Cursor"); cursor == "" {
			break
		}
	}
	took := time.Since(began)
	return figure{name: fmt.Sprintf("audit export, the whole chain (%d entries)", rows), p50: took, p99: took,
		perSecond: float64(rows) / took.Seconds()}, nil
}

// countLines counts the export's entries, one a line.
func countLines(r io.Reader) (int, error) {
	buf := make([]byte, 64<<10)
	n := 0
	for {
		k, err := r.Read(buf)
		n += bytes.Count(buf[:k], []byte{'\n'})
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// reads are the shapes measured at every size. sample holds order ids from the whole
// history, deep the cursors 10,000 items into the orders and the events.
func reads(c *devbundle.Client, o options, depth int, sample []string, ordersDeep, eventsDeep string) []read {
	pay := c.Creds.Keys["pay"]
	pick := func(i int) string { return sample[rand.IntN(len(sample))] }
	fixed := func(p string) func(int) string { return func(int) string { return p } }
	return []read{
		{"orders: first page", pay.Read, fixed("/payments?limit=50")},
		{fmt.Sprintf("orders: a page %s deep (cursor)", grouped(int64(depth))), pay.Read, fixed("/payments?limit=50&cursor=" + ordersDeep)},
		{"orders: filtered by status (failed)", pay.Read, fixed("/payments?status=failed&limit=50")},
		{"order: get one", pay.Read, func(i int) string { return "/payments/" + pick(i) }},
		{fmt.Sprintf("approvals: pending (%s waiting)", grouped(o.pending)), pay.Approve, fixed("/approvals?status=pending&limit=50")},
		{fmt.Sprintf("events: a page %s deep (cursor)", grouped(int64(depth))), pay.Read, fixed("/events?limit=100&cursor=" + eventsDeep)},
		{"events: of one order", pay.Read, func(i int) string { return "/events?orderId=" + pick(i) }},
		{"request logs: first page", pay.SK, fixed("/developer/logs?limit=50")},
		{fmt.Sprintf("portfolio (%s wallets)", grouped(o.wallets)), c.Creds.Keys["treasury"].Read, fixed("/treasury/portfolio")},
	}
}

// writes creates and submits n payments, c at a time, and returns each step's figure and
// the payments' ids.
func writes(c *devbundle.Client, wallet string, n, conc int) ([]figure, []string, error) {
	create := make([]time.Duration, n)
	submit := make([]time.Duration, n)
	ids := make([]string, n)
	errs := make(chan error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	key := c.Creds.Keys["pay"].SK
	body := fmt.Sprintf(`{"walletId":%q,"asset":"USDC","amount":"5","destination":{"address":%q}}`, wallet, whitelisted)
	for range conc {
		wg.Go(func() {
			for i := range next {
				began := time.Now()
				status, out, err := c.Do("POST", "/payments", key, body)
				create[i] = time.Since(began)
				if err != nil || status != http.StatusCreated {
					errs <- fmt.Errorf("create: %d %v %v", status, out, err)
					continue
				}
				ids[i] = out["id"].(string)
				began = time.Now()
				status, out, err = c.Do("POST", "/payments/"+ids[i]+"/submit", key, "{}")
				submit[i] = time.Since(began)
				if err != nil || status/100 != 2 {
					errs <- fmt.Errorf("submit: %d %v %v", status, out, err)
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, nil, err
	}
	slices.Sort(create)
	slices.Sort(submit)
	return []figure{
		{name: "payment: create", p50: devbundle.Percentile(create, 0.5), p99: devbundle.Percentile(create, 0.99)},
		{name: "payment: submit", p50: devbundle.Percentile(submit, 0.5), p99: devbundle.Percentile(submit, 0.99)},
	}, ids, nil
}

// grouped writes n with thousands separated: 10,000.
func grouped(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
