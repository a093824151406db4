// Command httpcost measures what the API costs per request over plain HTTP: GET
// /api/v1/treasury/portfolio and POST /api/v1/payments (a new Idempotency-Key each time),
// served by the real router on a real store, beside a bare Gin engine in the same process
// that answers the same bytes, under the same closed-loop load. Machines of this kind
// differ by 2× from one to the next, so every figure is printed beside its reference from
// the same run, with the ratio.
//
//	go run ./bench/httpcost
//	go run ./bench/httpcost -store postgres -concurrency 64 -duration 20s -cpu-profile cpu.out
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/opentreasury/treasury/dev/bench/devbundle"
)

type options struct {
	concurrency int
	duration    time.Duration
	warmup      time.Duration
	rounds      int
	settle      time.Duration
	// maxConns is the store's pool size; 0 leaves the store's default, as production.
	maxConns int
	labels   bool
}

func main() {
	which := flag.String("store", "both", "sqlite, postgres or both")
	var o options
	flag.IntVar(&o.concurrency, "concurrency", 32, "requests in flight at once, each on a keep-alive connection of its own")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "measured time of each of the four loads, per store, split over -rounds runs")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured load on each side before its first run")
	flag.IntVar(&o.rounds, "rounds", 3, "runs of each side, alternating which side goes first; medians are reported")
	flag.DurationVar(&o.settle, "settle", 600*time.Millisecond, "pause after each run of ours, so that its last request-log batch (every 500 ms) is written before the other side runs")
	flag.IntVar(&o.maxConns, "max-conns", 0, "the store's connection pool (0: the store's default, as in production)")
	cpuProfile := flag.String("cpu-profile", "", "write a CPU profile of the whole run to this file; each server's work is labelled (pprof -tagfocus=req=ours-portfolio, bare-portfolio, ours-payments, bare-payments)")
	memProfile := flag.String("mem-profile", "", "write an allocation profile of the whole run to this file (go tool pprof -sample_index=alloc_space); sampling finely, it slows the run")
	flag.Parse()

	var stores []string
	switch *which {
	case "sqlite", "postgres":
		stores = []string{*which}
	case "both":
		stores = []string{"sqlite", "postgres"}
	default:
		fmt.Fprintln(os.Stderr, "-store: sqlite, postgres or both")
		os.Exit(2)
	}
	if o.rounds < 1 || o.concurrency < 1 || o.duration <= 0 {
		fmt.Fprintln(os.Stderr, "-rounds, -concurrency and -duration must be positive")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	if *memProfile != "" {
		// Finer sampling than the default 512 KiB, so that the small allocations every
		// request makes show up in proportion.
		runtime.MemProfileRate = 4096
	}
	if *cpuProfile != "" {
		o.labels = true
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fatal(err)
		}
		defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
	}

	fmt.Printf("httpcost %s: %s, GOMAXPROCS %d, %d connections, %d rounds of %v per side and load after a %v warm-up per side\n",
		time.Now().Format(time.RFC3339), runtime.Version(), runtime.GOMAXPROCS(0), o.concurrency, o.rounds,
		(o.duration / time.Duration(o.rounds)).Round(time.Millisecond), o.warmup)
	fmt.Println("The load generator, the API and the bare Gin engine share this process and its cores (the database server does not):")
	fmt.Println("the bare figures are as much the load generator's limit as the server's, and the same for both sides.")
	failed := false
	for _, kind := range stores {
		if err := runStore(ctx, kind, o); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", kind, err)
			failed = true
		}
		if ctx.Err() != nil {
			failed = true
			break
		}
	}
	if *memProfile != "" {
		if err := writeAllocs(*memProfile); err != nil {
			fmt.Fprintln(os.Stderr, err)
			failed = true
		}
	}
	if failed {
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("allocs").WriteTo(f, 0)
}

// runStore measures both loads on one store against their references and prints them.
func runStore(ctx context.Context, kind string, o options) error {
	// One transport for everything: both sides get the same client code, connection reuse
	// and buffers. The two servers are different hosts, so each has its own pool.
	tr := &http.Transport{
		MaxIdleConns:        4 * o.concurrency,
		MaxIdleConnsPerHost: 2 * o.concurrency,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}

	r, err := newRig(ctx, kind, client, o)
	if err != nil {
		return err
	}
	defer r.close()
	fmt.Printf("\n== %s ==\n", r.label)
	fmt.Printf("bare GET answers the captured %d (%s, %d bytes); bare POST reads the body and answers the captured %d (%s, %d bytes);\n",
		r.portfolio.status, r.portfolio.contentType, len(r.portfolio.body), r.payment.status, r.payment.contentType, len(r.payment.body))
	fmt.Printf("each also sends the real answer's other headers (GET: %s; POST: %s), so that both sides put the same bytes on the wire.\n",
		strings.Join(r.portfolio.headerNames(), ", "), strings.Join(r.payment.headerNames(), ", "))
	fmt.Printf("Payments: 500 USDC from autoSign wallet %s to %s, a new Idempotency-Key each; the same requests go to the bare engine.\n",
		r.walletID, destination)
	fmt.Printf("Runs alternate (round 1 ours first, round 2 bare first, …), a collection before each run and %v after each of ours; medians of the rounds.\n", o.settle)

	get := func(base string) load {
		return load{client: client, want: r.portfolio.status, build: func(ctx context.Context, _ int64) (*http.Request, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+portfolioPath, nil)
			if err == nil {
				req.Header.Set("Authorization", "Bearer "+r.readKey)
			}
			return req, err
		}}
	}
	body := paymentBody(r.walletID)
	prefix := "httpcost-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-"
	post := func(base string) load {
		return load{client: client, want: r.payment.status, build: func(ctx context.Context, seq int64) (*http.Request, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+paymentsPath, strings.NewReader(body))
			if err == nil {
				req.Header.Set("Authorization", "Bearer "+r.payKey)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", prefix+strconv.FormatInt(seq, 10))
			}
			return req, err
		}}
	}

	fmt.Printf("%-24s %9s %8s %8s %6s %8s %8s %9s   %s\n", "", "req/s", "p50", "p99", "errors", "CPU/req", "machine", "alloc/req", "req/s of each round")
	gOurs, gBare, err := compare(ctx, get(r.ours), get(r.bare), o)
	if err != nil {
		return err
	}
	printPair("GET portfolio", "bare GET", gOurs, gBare)
	pOurs, pBare, err := compare(ctx, post(r.ours), post(r.bare), o)
	if err != nil {
		return err
	}
	printPair("POST payments", "bare POST", pOurs, pBare)
	fmt.Println("CPU/req and alloc/req: this whole process (load generator, servers, logs, background work) over a run, per request;")
	fmt.Println("machine: every CPU of the machine per request (the database server and the kernel's loopback work too, and any other load).")

	gr := gOurs.rate / gBare.rate
	portfolioTarget := 0.5
	if r.short == "PostgreSQL" {
		portfolioTarget = 0.3
	}
	fmt.Printf("Targets on %s: portfolio ≥ %.0f %% of bare Gin: %.0f %%, %s; create payment ≥ 1,000 req/s: %s req/s, %s (%.1f %% of bare POST in this run)\n",
		r.short, 100*portfolioTarget, 100*gr, verdict(gr >= portfolioTarget), thousands(pOurs.rate), verdict(pOurs.rate >= 1000), 100*pOurs.rate/pBare.rate)
	devbundle.Summarize("GET /treasury/portfolio ÷ bare Gin, "+r.short, thousands(gOurs.rate)+" req/s", thousands(gBare.rate)+" req/s",
		ratio(gOurs.rate, gBare.rate), fmt.Sprintf("≥ %.2f", portfolioTarget), verdict(gr >= portfolioTarget))
	devbundle.Summarize("allocated per portfolio read (whole process), "+r.short, kib(gOurs.alloc), "bare "+kib(gBare.alloc),
		ratio(gOurs.alloc, gBare.alloc), "≤ 10 KiB", verdict(gOurs.alloc <= 10<<10))
	devbundle.Summarize("POST /payments, "+r.short, thousands(pOurs.rate)+" req/s, p99 "+ms(pOurs.p99), "bare "+thousands(pBare.rate)+" req/s",
		ratio(pOurs.rate, pBare.rate), "≥ 1,000 req/s", verdict(pOurs.rate >= 1000))
	devbundle.Summarize("allocated and CPU per create (whole process), "+r.short, kib(pOurs.alloc)+", "+us(pOurs.cpu), "bare "+kib(pBare.alloc)+", "+us(pBare.cpu),
		"", "≤ 60 KiB", verdict(pOurs.alloc <= 60<<10))
	return nil
}

func verdict(ok bool) string { return devbundle.Verdict(ok) }
