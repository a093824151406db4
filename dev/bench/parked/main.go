// Command parked measures a crowd of orders waiting for their approvers: N payments are
// created and submitted at once, and each order's workflow parks on its approval signal.
// It then measures the dev bundle's resident memory and CPU while they wait (against the
// same figures before the crowd), an approver deciding them all at a credential's rate
// limit, every one of them confirming on the dev chain, and listing orders meanwhile.
//
// The dev bundle is one process (Temporal's server, the worker and the api), so its
// memory per parked order holds the server's share as well as the worker's cached
// workflows.
//
//	go run ./dev/bench/parked -dev-bin bin/treasury-dev -orders 20000
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opentreasury/treasury/dev/bench/devbundle"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

type options struct {
	devBin, store string
	bundleFlags   string
	orders, conc  int
	approveRate   float64
	idle          time.Duration
	confirmWithin time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.devBin, "dev-bin", "bin/treasury-dev", "the treasury-dev binary")
	flag.StringVar(&o.store, "store", "sqlite", "the bundle's store: sqlite, or postgres (a database made on the local server for the run, dropped after)")
	flag.StringVar(&o.bundleFlags, "bundle-flags", "", "more flags for treasury-dev, e.g. --worker-cache-size 25000")
	flag.IntVar(&o.orders, "orders", 20000, "orders parked on their approvers at once")
	flag.IntVar(&o.conc, "concurrency", 16, "creates and submits in flight at once")
	flag.Float64Var(&o.approveRate, "approve-rate", 50, "decisions a second: the approver's credential's rate limit (the default RATE_LIMIT)")
	flag.DurationVar(&o.confirmWithin, "confirm-within", 30*time.Minute, "how long every order has, from the first decision, to end")
	flag.DurationVar(&o.idle, "idle", time.Minute, "how long the bundle's idle CPU is measured, before and after the crowd")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "parked:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	// The API's own limit is lifted for the load; the approver is paced at its rate limit
	// here instead, as its credential's limit would pace it.
	b, err := devbundle.StartOn(o.devBin, o.store, storetest.PostgresURL(), "treasury_bench_parked",
		slices.Concat(devbundle.LoadFlags, strings.Fields(o.bundleFlags)))
	if err != nil {
		return err
	}
	defer b.Stop()
	creds := b.Creds
	c := devbundle.NewClient(creds)
	pay := creds.Keys["pay"]
	// Every payment of 100 USDC or more waits for one approver.
	if err := approvalFrom(c, pay.SK, "100"); err != nil {
		return err
	}
	var wallets []string
	for _, w := range creds.Wallets {
		if w.Chain == "ethereum" && w.AutoSign {
			wallets = append(wallets, w.ID)
		}
	}
	fmt.Printf("%s store%s; %d payments of 100 USDC from %d wallets, each waiting for one approver\n", o.store, withFlags(o.bundleFlags), o.orders, len(wallets))

	// Each figure is printed as soon as it is measured: the last phase can take long.
	row := func(what, format string, args ...any) {
		fmt.Printf("| %s | %s |\n", what, fmt.Sprintf(format, args...))
	}
	fmt.Printf("\n| what | figure |\n|---|---:|\n")

	// The bundle's memory and CPU with nothing waiting.
	time.Sleep(10 * time.Second)
	before, err := sample(b, o.idle)
	if err != nil {
		return err
	}
	row("resident memory, nothing waiting", "%.0f MiB", mib(before.rss))
	row("CPU while idle, nothing waiting", "%.1f %% of a core", before.cpuShare*100)

	began := time.Now()
	ids, err := park(c, pay.SK, wallets, o.orders, o.conc)
	if err != nil {
		return err
	}
	parkedIn := time.Since(began)
	row(fmt.Sprintf("created and submitted (%d at a time)", o.conc), "%d orders in %.0f s (%.0f a second)", o.orders, parkedIn.Seconds(), float64(o.orders)/parkedIn.Seconds())
	if err := waitPending(c, pay.Read, o.orders, 10*time.Minute); err != nil {
		return err
	}
	time.Sleep(10 * time.Second)
	after, err := sample(b, o.idle)
	if err != nil {
		return err
	}
	perOrder := float64(after.rss-before.rss) / float64(o.orders)
	row(fmt.Sprintf("resident memory, %d waiting", o.orders), "%.0f MiB", mib(after.rss))
	row("memory per waiting order", "%.1f KiB", perOrder/1024)
	row(fmt.Sprintf("CPU while idle, %d waiting", o.orders), "%.1f %% of a core", after.cpuShare*100)
	parkedCache, err := stickyCache(c.Creds.BaseURL)
	if err != nil {
		return err
	}
	row("worker's cache while they parked", "%s", parkedCache)
	devbundle.Summarize(fmt.Sprintf("memory per order waiting for approvers (%d waiting), %s", o.orders, o.store),
		fmt.Sprintf("%.1f KiB", perOrder/1024), fmt.Sprintf("%.0f MiB with none", mib(before.rss)), "", "report", "")

	// Listing orders while the approver works through the crowd.
	stop := make(chan struct{})
	listed := make(chan []time.Duration, 1)
	go func() { listed <- listWhile(c, pay.Read, stop) }()
	began = time.Now()
	if err := approveAll(c, pay.Approve, ids, o.approveRate); err != nil {
		close(stop)
		return err
	}
	row(fmt.Sprintf("all approved, paced at %.0f decisions a second", o.approveRate), "%.0f s", time.Since(began).Seconds())
	confirmed, other, err := c.Confirmations("pay", submitted(ids, began), o.confirmWithin)
	close(stop)
	lists := <-listed
	slices.Sort(lists)
	row("list orders meanwhile (first page of 50), p50 / p99", "%.1f / %.1f ms (%d requests)",
		ms(devbundle.Percentile(lists, 0.5)), ms(devbundle.Percentile(lists, 0.99)), len(lists))
	if err != nil {
		return err
	}
	row("all ended, from the first decision", "%.0f s (%d confirmed, %d otherwise)", time.Since(began).Seconds(), len(confirmed), other)
	endedCache, err := stickyCache(c.Creds.BaseURL)
	if err != nil {
		return err
	}
	row("worker's cache from the start to the end", "%s", endedCache)
	if len(confirmed)+other != o.orders {
		return fmt.Errorf("%d of %d orders ended", len(confirmed)+other, o.orders)
	}
	return nil
}

// approvalFrom puts the pay app's policy in force with one approver for every order of
// at least minUSD, its other rules unchanged.
func approvalFrom(c *devbundle.Client, key, minUSD string) error {
	status, out, err := c.Do("GET", "/policies/pay", key, "")
	if err != nil || status != http.StatusOK {
		return fmt.Errorf("policy: %d %v %v", status, out, err)
	}
	rules, _ := out["rules"].(map[string]any)
	if rules == nil {
		return fmt.Errorf("policy: no rules in %v", out)
	}
	rules["approvalTiers"] = []map[string]any{{"minUsd": minUSD, "quorum": 1}}
	body, err := json.Marshal(rules)
	if err != nil {
		return err
	}
	if status, out, err = c.Do("PUT", "/policies/pay", key, string(body)); err != nil || status != http.StatusOK {
		return fmt.Errorf("put policy: %d %v %v", status, out, err)
	}
	return nil
}

// park creates and submits n payments, conc at a time, and returns their ids.
func park(c *devbundle.Client, key string, wallets []string, n, conc int) ([]string, error) {
	ids := make([]string, n)
	var failed atomic.Value
	next := make(chan int)
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for i := range next {
				body := fmt.Sprintf(`{"walletId":%q,"asset":"USDC","amount":"100","destination":{"address":"0x1111111111111111111111111111111111111111"}}`, wallets[i%len(wallets)])
				status, out, err := c.Do("POST", "/payments", key, body)
				if err != nil || status != http.StatusCreated {
					failed.CompareAndSwap(nil, fmt.Errorf("create: %d %v %v", status, out, err))
					continue
				}
				id := out["id"].(string)
				if status, out, err = c.Do("POST", "/payments/"+id+"/submit", key, "{}"); err != nil || status/100 != 2 {
					failed.CompareAndSwap(nil, fmt.Errorf("submit: %d %v %v", status, out, err))
					continue
				}
				ids[i] = id
			}
		})
	}
	for i := range n {
		next <- i
		if i > 0 && i%5000 == 0 {
			fmt.Printf("  %d submitted\n", i)
		}
	}
	close(next)
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		return nil, err
	}
	return ids, nil
}

// waitPending waits until n approval items are pending: every workflow has parked.
func waitPending(c *devbundle.Client, key string, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		count, err := countPending(c, key)
		if err != nil {
			return err
		}
		if count >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d approval items pending after %v", count, n, timeout)
		}
		time.Sleep(2 * time.Second)
	}
}

func countPending(c *devbundle.Client, key string) (int, error) {
	count, cursor := 0, ""
	for {
		path := "/approvals?status=pending&limit=100"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		status, out, err := c.Do("GET", path, key, "")
		if err != nil || status != http.StatusOK {
			return 0, fmt.Errorf("approvals: %d %v %v", status, out, err)
		}
		data, _ := out["data"].([]any)
		count += len(data)
		cursor, _ = out["nextCursor"].(string)
		if cursor == "" {
			return count, nil
		}
	}
}

// approveAll approves each order's item, rate decisions a second, as one approver whose
// credential's rate limit paces it. An item stays listed as pending until its decision
// is recorded; one decided already is passed over.
func approveAll(c *devbundle.Client, key string, ids []string, rate float64) error {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	done := map[string]bool{}
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	for len(done) < len(ids) {
		<-tick.C
		status, out, err := c.Do("GET", "/approvals?status=pending&limit=100", key, "")
		if err != nil || status != http.StatusOK {
			return fmt.Errorf("approvals: %d %v %v", status, out, err)
		}
		data, _ := out["data"].([]any)
		fresh := 0
		for _, d := range data {
			it := d.(map[string]any)
			id := it["id"].(string)
			if !want[fmt.Sprint(it["orderId"])] || done[id] {
				continue
			}
			fresh++
			<-tick.C
			status, out, err := c.Do("POST", "/approvals/payment/"+id+"/decide", key, `{"decision":"APPROVE"}`)
			if err != nil || status/100 != 2 {
				return fmt.Errorf("decide: %d %v %v", status, out, err)
			}
			done[id] = true
			if len(done)%5000 == 0 {
				fmt.Printf("  %d approved\n", len(done))
			}
		}
		if fresh == 0 && len(data) == 0 {
			return fmt.Errorf("no pending items left after %d decisions of %d", len(done), len(ids))
		}
	}
	return nil
}

// listWhile reads the first page of orders five times a second until stop, and returns
// each read's latency.
func listWhile(c *devbundle.Client, key string, stop chan struct{}) []time.Duration {
	var out []time.Duration
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return out
		case <-t.C:
			began := time.Now()
			status, _, err := c.Do("GET", "/payments?limit=50", key, "")
			if err == nil && status == http.StatusOK {
				out = append(out, time.Since(began))
			}
		}
	}
}

func submitted(ids []string, at time.Time) []devbundle.Submitted {
	out := make([]devbundle.Submitted, len(ids))
	for i, id := range ids {
		out[i] = devbundle.Submitted{ID: id, SentAt: at}
	}
	return out
}

// usage is the bundle's resident memory and its share of a core over a while.
type usage struct {
	rss      int64
	cpuShare float64
}

func sample(b *devbundle.Bundle, d time.Duration) (usage, error) {
	cpu0, err := b.CPU()
	if err != nil {
		return usage{}, err
	}
	time.Sleep(d)
	cpu1, err := b.CPU()
	if err != nil {
		return usage{}, err
	}
	rss, err := residentBytes(b.Cmd.Process.Pid)
	if err != nil {
		return usage{}, err
	}
	return usage{rss: rss, cpuShare: (cpu1 - cpu0).Seconds() / d.Seconds()}, nil
}

// residentBytes reads VmRSS from /proc/<pid>/status.
func residentBytes(pid int) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS for %d", pid)
}

// stickyCache reads the worker's sticky cache counters from the bundle's /metrics, as the
// SDK reports them: a hit is a workflow task run on the workflow held in memory, a miss a
// replay of its history, a forced eviction a workflow dropped to make room.
func stickyCache(baseURL string) (cacheCounts, error) {
	resp, err := http.Get(baseURL + "/metrics")
	if err != nil {
		return cacheCounts{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return cacheCounts{}, fmt.Errorf("metrics: %d %v", resp.StatusCode, err)
	}
	var c cacheCounts
	for _, line := range strings.Split(string(raw), "\n") {
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			continue
		}
		switch name {
		case "temporal_sticky_cache_hit_total":
			c.hits += v
		case "temporal_sticky_cache_miss_total":
			c.misses += v
		case "temporal_sticky_cache_total_forced_eviction_total":
			c.evictions += v
		}
	}
	return c, nil
}

type cacheCounts struct{ hits, misses, evictions float64 }

func (c cacheCounts) String() string {
	share := 0.0
	if c.hits+c.misses > 0 {
		share = c.misses / (c.hits + c.misses) * 100
	}
	return fmt.Sprintf("%.0f hits, %.0f misses (%.0f %%), %.0f forced evictions", c.hits, c.misses, share, c.evictions)
}

func mib(b int64) float64        { return float64(b) / (1 << 20) }
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func withFlags(f string) string {
	if f == "" {
		return ""
	}
	return ", treasury-dev " + f
}
