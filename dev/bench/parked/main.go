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
}

func main() {
	var o options
	flag.StringVar(&o.devBin, "dev-bin", "bin/treasury-dev", "the treasury-dev binary")
	flag.StringVar(&o.store, "store", "sqlite", "the bundle's store: sqlite, or postgres (a database made on the local server for the run, dropped after)")
	flag.StringVar(&o.bundleFlags, "bundle-flags", "", "more flags for treasury-dev, e.g. --worker-cache-size 25000")
	flag.IntVar(&o.orders, "orders", 20000, "orders parked on their approvers at once")
	flag.IntVar(&o.conc, "concurrency", 16, "creates and submits in flight at once")
	flag.Float64Var(&o.approveRate, "approve-rate", 50, "decisions a second: the approver's credential's rate limit (the default RATE_LIMIT)")
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

	// The bundle's memory and CPU with nothing waiting.
	time.Sleep(10 * time.Second)
	before, err := sample(b, o.idle)
	if err != nil {
		return err
	}

	began := time.Now()
	ids, err := park(c, pay.SK, wallets, o.orders, o.conc)
	if err != nil {
		return err
	}
	parkedIn := time.Since(began)
	if err := waitPending(c, pay.Read, o.orders, 10*time.Minute); err != nil {
		return err
	}
	time.Sleep(10 * time.Second)
	after, err := sample(b, o.idle)
	if err != nil {
		return err
	}

	// Listing orders while the approver works through the crowd.
	stop := make(chan struct{})
	listed := make(chan []time.Duration, 1)
	go func() { listed <- listWhile(c, pay.Read, stop) }()
	began = time.Now()
	if err := approveAll(c, pay.Approve, ids, o.approveRate); err != nil {
		close(stop)
		return err
	}
	approvedIn := time.Since(began)
	confirmed, other, err := c.Confirmations("pay", submitted(ids, began), 30*time.Minute)
	close(stop)
	lists := <-listed
	if err != nil {
		return err
	}
	allIn := time.Since(began)
	slices.Sort(lists)

	perOrder := float64(after.rss-before.rss) / float64(o.orders)
	fmt.Printf("\n| what | figure |\n|---|---:|\n")
	fmt.Printf("| created and submitted (%d at a time) | %d orders in %.0f s (%.0f a second) |\n", o.conc, o.orders, parkedIn.Seconds(), float64(o.orders)/parkedIn.Seconds())
	fmt.Printf("| resident memory, nothing waiting | %.0f MiB |\n", mib(before.rss))
	fmt.Printf("| resident memory, %d waiting | %.0f MiB |\n", o.orders, mib(after.rss))
	fmt.Printf("| memory per waiting order | %.1f KiB |\n", perOrder/1024)
	fmt.Printf("| CPU while idle, nothing waiting | %.1f %% of a core |\n", before.cpuShare*100)
	fmt.Printf("| CPU while idle, %d waiting | %.1f %% of a core |\n", o.orders, after.cpuShare*100)
	fmt.Printf("| all approved, at %.0f decisions a second | %.0f s |\n", o.approveRate, approvedIn.Seconds())
	fmt.Printf("| all ended, from the first decision | %.0f s (%d confirmed, %d otherwise) |\n", allIn.Seconds(), len(confirmed), other)
	fmt.Printf("| list orders meanwhile (first page of 50), p50 / p99 | %.1f / %.1f ms (%d requests) |\n",
		ms(devbundle.Percentile(lists, 0.5)), ms(devbundle.Percentile(lists, 0.99)), len(lists))
	devbundle.Summarize(fmt.Sprintf("memory per order waiting for approvers (%d waiting), %s", o.orders, o.store),
		fmt.Sprintf("%.1f KiB", perOrder/1024), fmt.Sprintf("%.0f MiB with none", mib(before.rss)), "", "report", "")
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

func mib(b int64) float64        { return float64(b) / (1 << 20) }
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func withFlags(f string) string {
	if f == "" {
		return ""
	}
	return ", treasury-dev " + f
}
