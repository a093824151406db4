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
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/opentreasury/treasury/dev/bench/devbundle"
)

// scenarios each create their orders, then submit them all at once.
var scenarios = map[string]func(c *devbundle.Client, n int) ([]devbundle.Submitted, error){
	"payments": func(c *devbundle.Client, n int) ([]devbundle.Submitted, error) {
		ids, err := c.CreatePayments(n)
		if err != nil {
			return nil, err
		}
		return c.SubmitAll("pay", "/payments/", ids)
	},
	// The same payments on the dev Solana chain (Solana's own runtime, a child process).
	"solana-payments": func(c *devbundle.Client, n int) ([]devbundle.Submitted, error) {
		ids, err := c.CreatePaymentsOn("solana", n)
		if err != nil {
			return nil, err
		}
		return c.SubmitAll("pay", "/payments/", ids)
	},
}

// result is one measured run.
type result struct {
	orders, confirmed, other int
	span                     time.Duration
	latencies                []time.Duration
	// hooks are the webhook messages the receiver accepted during the run.
	hooks int
	// cpu is what the bundle's process spent from the first submit to the last
	// confirmation (zero when the bench did not start the bundle).
	cpu time.Duration
}

func (r result) cpuPerOrder() time.Duration {
	if r.orders == 0 {
		return 0
	}
	return r.cpu / time.Duration(r.orders)
}

func (r result) rate() float64 { return float64(len(r.latencies)) / r.span.Seconds() }

func (r result) print(label string) {
	fmt.Printf("%s: %d orders submitted at once, %d confirmed, %d ended otherwise\n", label, r.orders, r.confirmed, r.other)
	if len(r.latencies) == 0 {
		return
	}
	lat := r.latencies
	fmt.Printf("%s: throughput %.1f orders/s (first submit to last confirmation: %v)\n", label, r.rate(), r.span.Round(time.Millisecond))
	fmt.Printf("%s: submit->confirmed p50 %v  p90 %v  p99 %v  max %v\n", label, devbundle.Percentile(lat, .50).Round(time.Millisecond),
		devbundle.Percentile(lat, .90).Round(time.Millisecond), devbundle.Percentile(lat, .99).Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
}

// hookCounter is a webhook receiver on loopback that answers 204 and counts.
type hookCounter struct {
	*httptest.Server
	n atomic.Int64
}

func newHookCounter() *hookCounter {
	h := &hookCounter{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		h.n.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	return h
}

// measure runs a scenario on a bundle (started fresh unless credsPath names one), with
// webhooks configs of the scenario's app on every event, all sent to one receiver.
func measure(devBin, credsPath, extra, scenario string, n, webhooks int, timeout time.Duration) (result, error) {
	cpu := func() time.Duration { return 0 }
	if credsPath == "" {
		b, err := devbundle.Start(devBin, strings.Fields(extra))
		if err != nil {
			return result{}, fmt.Errorf("start treasury-dev: %w", err)
		}
		defer b.Stop()
		credsPath = b.CredentialsPath
		cpu = func() time.Duration { d, _ := b.CPU(); return d }
	}
	creds, err := devbundle.ReadCredentials(credsPath)
	if err != nil {
		return result{}, fmt.Errorf("credentials: %w", err)
	}
	c := devbundle.NewClient(creds)
	app := map[string]string{"payments": "pay", "solana-payments": "pay"}[scenario]
	var hooks *hookCounter
	if webhooks > 0 {
		hooks = newHookCounter()
		defer hooks.Close()
		for range webhooks {
			req, _ := http.NewRequest("POST", c.Creds.BaseURL+"/developer/webhooks",
				strings.NewReader(fmt.Sprintf(`{"url":%q,"events":["*"]}`, hooks.URL)))
			req.Header.Set("Authorization", "Bearer "+c.Creds.Keys[app].SK)
			req.Header.Set("Content-Type", "application/json")
			res, err := c.HTTP.Do(req)
			if err != nil || res.StatusCode != 201 {
				return result{}, fmt.Errorf("webhook: %v %v", res, err)
			}
			res.Body.Close()
		}
	}
	cpuBefore := cpu()
	orders, err := scenarios[scenario](c, n)
	if err != nil {
		return result{}, err
	}
	confirmed, other, err := c.Confirmations(app, orders, timeout)
	r := result{orders: len(orders), confirmed: len(confirmed), other: other, cpu: cpu() - cpuBefore}
	first, last := orders[0].SentAt, time.Time{}
	for _, o := range orders {
		if o.SentAt.Before(first) {
			first = o.SentAt
		}
		if at, ok := confirmed[o.ID]; ok {
			r.latencies = append(r.latencies, at.Sub(o.SentAt))
			if at.After(last) {
				last = at
			}
		}
	}
	slices.Sort(r.latencies)
	r.span = last.Sub(first)
	if hooks != nil {
		r.hooks = int(hooks.n.Load())
	}
	if err == nil && r.confirmed != r.orders {
		err = fmt.Errorf("%d of %d orders confirmed", r.confirmed, r.orders)
	}
	return r, err
}

// lone submits n payments one after another, each once the one before it is confirmed,
// and prints submit-to-confirmed latencies beside their physical floor: the chain's
// block time times its confirmations (given to the bundle in extra).
func lone(devBin, extra, scenario string, n int, floor time.Duration, timeout time.Duration) error {
	b, c, err := startLone(devBin, extra)
	if err != nil {
		return err
	}
	defer b.Stop()
	var lat []time.Duration
	for range n + 1 {
		orders, err := scenarios[scenario](c, 1)
		if err != nil {
			return err
		}
		confirmed, _, err := c.Confirmations("pay", orders, timeout)
		if err != nil {
			return err
		}
		lat = append(lat, confirmed[orders[0].ID].Sub(orders[0].SentAt))
	}
	lat = lat[1:] // the first warms the bundle up
	slices.Sort(lat)
	p50 := devbundle.Percentile(lat, .5)
	fmt.Printf("lone payment: %d one after another, submit->confirmed p50 %v  p90 %v  max %v\n", n,
		p50.Round(time.Millisecond), devbundle.Percentile(lat, .9).Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
	if scenario == "solana-payments" {
		// The dev Solana chain lands a transaction in the current slot; it is confirmed once
		// the next slot begins: between none and a whole slot after it lands.
		fmt.Printf("lone payment, dev Solana chain: a transaction waits 0 to %v for the next slot (mean %v); p50 above that mean %v\n",
			floor, floor/2, (p50 - floor/2).Round(time.Millisecond))
		devbundle.Summarize("a lone Solana payment, dev SVM", "p50 "+p50.Round(time.Millisecond).String(), "next slot, mean "+(floor/2).String(),
			"+"+(p50-floor/2).Round(time.Millisecond).String(), "report", "")
		return nil
	}
	// The in-process EVM chain seals a block every block time while transactions wait: a
	// lone transaction waits for the next one, between none and a whole block time.
	fmt.Printf("lone payment, in-process EVM: a transaction waits 0 to %v for its block (mean %v); p50 above that mean %v\n",
		floor, floor/2, (p50 - floor/2).Round(time.Millisecond))
	devbundle.Summarize("a lone payment, in-process EVM", "p50 "+p50.Round(time.Millisecond).String(), "next block, mean "+(floor/2).String(),
		"+"+(p50-floor/2).Round(time.Millisecond).String(), "report", "")
	return nil
}

// startLone starts a bundle for lone payments, and a client of its seeded credentials.
func startLone(devBin, extra string) (*devbundle.Bundle, *devbundle.Client, error) {
	b, err := devbundle.Start(devBin, strings.Fields(extra))
	if err != nil {
		return nil, nil, fmt.Errorf("start treasury-dev: %w", err)
	}
	creds, err := devbundle.ReadCredentials(b.CredentialsPath)
	if err != nil {
		b.Stop()
		return nil, nil, err
	}
	return b, devbundle.NewClient(creds), nil
}

func main() {
	devBin := flag.String("dev-bin", "bin/treasury-dev", "treasury-dev binary to start (ignored with -credentials)")
	credsPath := flag.String("credentials", "", "credentials.json of a running bundle, instead of starting one")
	scenario := flag.String("scenario", "payments", "what to submit")
	n := flag.Int("orders", 200, "orders submitted at once")
	timeout := flag.Duration("timeout", 5*time.Minute, "give up after")
	extra := flag.String("dev-args", "--rate-limit 100000 --rate-burst 100000", "flags for treasury-dev, space separated (the default lifts the per-key rate limit: one key drives the whole load)")
	webhooks := flag.Int("webhooks", 0, "with N > 0, compare runs on fresh bundles without webhooks and with N webhooks of the app on every event (one local receiver)")
	rounds := flag.Int("rounds", 3, "with -webhooks, how many times each kind runs, alternating")
	svm := flag.Bool("svm", false, "compare, on fresh bundles in alternating rounds, the lifecycle on the dev Solana chain (scenario solana-payments) with the same on the in-process EVM chain")
	loneN := flag.Int("lone", 0, "with N > 0, measure N payments submitted one at a time instead (a lone order's latency)")
	block := flag.Duration("block-time", 200*time.Millisecond, "with -lone: the chains' block time (passed to treasury-dev)")
	confs := flag.Int("confirmations", 1, "with -lone: the chains' confirmations (passed to treasury-dev)")
	signed := flag.Bool("signed", false, "with -lone: payments that need one approval, signed by treasury signer for the manual wallet, plain and then with signed approvals and the verifying signer")
	flag.Parse()

	if *loneN > 0 {
		args := fmt.Sprintf("%s --block-time %s --confirmations %d", *extra, *block, *confs)
		measure := func() error { return lone(*devBin, args, *scenario, *loneN, *block*time.Duration(*confs), *timeout) }
		if *signed {
			measure = func() error { return loneSigned(*devBin, args, *loneN, *timeout) }
		}
		if err := measure(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}

	if *svm {
		kinds := []chainKind{{"dev SVM", *extra, "solana-payments"}, {"in-process EVM", *extra, "payments"}}
		if err := compareChains(*devBin, kinds, *n, *rounds, *timeout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}

	if _, ok := scenarios[*scenario]; !ok {
		fmt.Fprintf(os.Stderr, "unknown scenario %q\n", *scenario)
		os.Exit(2)
	}
	if *webhooks <= 0 {
		r, err := measure(*devBin, *credsPath, *extra, *scenario, *n, 0, *timeout)
		r.print("scenario " + *scenario)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if len(r.latencies) > 0 {
			devbundle.Summarize(fmt.Sprintf("%d %s at once", *n, *scenario), fmt.Sprintf("%.1f orders/s", r.rate()), "",
				fmt.Sprintf("submit→confirmed p50 %v, p99 %v", devbundle.Percentile(r.latencies, .5).Round(time.Millisecond),
					devbundle.Percentile(r.latencies, .99).Round(time.Millisecond)), "report", "")
		}
		return
	}
	// Runs on this machine differ by 10 % and more from one to the next: the two kinds
	// alternate, and the ratio is of their medians.
	var bare, hooked []float64
	label := fmt.Sprintf("with %d webhooks", *webhooks)
	for round := range *rounds {
		for _, w := range []int{0, *webhooks} {
			r, err := measure(*devBin, *credsPath, *extra, *scenario, *n, w, *timeout)
			name := fmt.Sprintf("round %d, without webhooks", round+1)
			if w > 0 {
				name = fmt.Sprintf("round %d, %s", round+1, label)
			}
			r.print(name)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			if w == 0 {
				bare = append(bare, r.rate())
				continue
			}
			hooked = append(hooked, r.rate())
			// Each payment commits 6 events, each sent to every webhook. Messages may still
			// be on their way when the last order is confirmed.
			fmt.Printf("%s: the receiver accepted %d of %d webhook messages by the last confirmation\n", name, r.hooks, *n*6*w)
		}
	}
	slices.Sort(bare)
	slices.Sort(hooked)
	mb, mh := bare[len(bare)/2], hooked[len(hooked)/2]
	fmt.Printf("lifecycle %s / without, medians of %d alternating rounds: %.2f (orders/s %.1f / %.1f)\n", label, *rounds, mh/mb, mh, mb)
	devbundle.Summarize("lifecycle "+label+" ÷ without", fmt.Sprintf("%.1f orders/s", mh), fmt.Sprintf("%.1f orders/s", mb),
		fmt.Sprintf("%.2f", mh/mb), "≥ 0.90", devbundle.Verdict(mh/mb >= 0.9))
}

// chainKind is one side of a comparison: the bundle's flags and the scenario it runs.
type chainKind struct{ label, args, scenario string }

// compareChains measures the lifecycle on two kinds of chain (the dev Solana chain beside
// the in-process EVM one), alternating fresh bundles, and prints the ratio of their median
// throughputs and their CPU per order.
func compareChains(devBin string, kinds []chainKind, n, rounds int, timeout time.Duration) error {
	rates, cpus := [2][]float64{}, [2][]time.Duration{}
	for round := range rounds {
		for k, kind := range kinds {
			r, err := measure(devBin, "", kind.args, kind.scenario, n, 0, timeout)
			name := fmt.Sprintf("round %d, %s", round+1, kind.label)
			r.print(name)
			if err != nil {
				return err
			}
			fmt.Printf("%s: CPU per order %v (the treasury-dev process: Temporal, worker, API and its in-process EVM chains; not the dev Solana chain, a child process)\n", name, r.cpuPerOrder().Round(10*time.Microsecond))
			rates[k], cpus[k] = append(rates[k], r.rate()), append(cpus[k], r.cpuPerOrder())
		}
	}
	for k := range kinds {
		slices.Sort(rates[k])
		slices.Sort(cpus[k])
	}
	aRate, bRate := rates[0][rounds/2], rates[1][rounds/2]
	aCPU, bCPU := cpus[0][rounds/2], cpus[1][rounds/2]
	a, b := kinds[0].label, kinds[1].label
	fmt.Printf("lifecycle on the %s / on the %s, medians of %d alternating rounds: %.2f (orders/s %.1f / %.1f)\n",
		a, b, rounds, aRate/bRate, aRate, bRate)
	fmt.Printf("CPU per order on the %s / on the %s: %.2fx (%v / %v)\n",
		a, b, float64(aCPU)/float64(bCPU), aCPU.Round(10*time.Microsecond), bCPU.Round(10*time.Microsecond))
	devbundle.Summarize("lifecycle on the "+a+" ÷ on the "+b, fmt.Sprintf("%.1f orders/s", aRate), fmt.Sprintf("%.1f orders/s", bRate),
		fmt.Sprintf("%.2f (CPU %.2fx)", aRate/bRate, float64(aCPU)/float64(bCPU)), "report", "")
	return nil
}
