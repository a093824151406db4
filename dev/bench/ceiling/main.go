// Command ceiling measures the order lifecycle against what its Temporal server can do at
// all: in one process, it starts the dev bundle (embedded Temporal server, API, worker,
// dev signer, store) and, beside it on the same server, a worker of a bare workflow of the
// same shape as an order's — one Update-with-Start, the same local and regular
// activities, the same signal and timer wait — whose activities do nothing. One load
// program starts N of each at once; the ratio of their throughputs is how close the
// lifecycle comes to the engine's ceiling on this machine.
//
//	go run ./bench/ceiling -orders 200 -rounds 3 [-store postgres]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"slices"
	"sync"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/opentreasury/treasury/dev/bench/devbundle"
	"github.com/opentreasury/treasury/dev/devstack"
)

// bareQueue is the task queue of the bare workflow, apart from the orders'.
const bareQueue = "ceiling-bare"

// bareOrder has an order's shape with nothing in it: an update answered after the first
// two local activities (mark submitted, evaluate the policy), a local activity that asks
// for the signature, a durable wait for the signature's signal, a local activity that
// records it, the two regular activities of a leg (broadcast, check), and a local
// activity that confirms.
func bareOrder(ctx workflow.Context) error {
	decided, signed := false, false
	if err := workflow.SetUpdateHandler(ctx, "decision", func(ctx workflow.Context) (bool, error) {
		return true, workflow.Await(ctx, func() bool { return decided })
	}); err != nil {
		return err
	}
	signatures := workflow.GetSignalChannel(ctx, "signature")
	workflow.Go(ctx, func(ctx workflow.Context) {
		signatures.Receive(ctx, nil)
		signed = true
	})
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 10 * time.Second})
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond}})
	local := func() error { return workflow.ExecuteLocalActivity(lctx, noop).Get(ctx, nil) }
	for range 2 {
		if err := local(); err != nil {
			return err
		}
	}
	decided = true
	if err := local(); err != nil {
		return err
	}
	if _, err := workflow.AwaitWithTimeout(ctx, 24*time.Hour, func() bool { return signed }); err != nil {
		return err
	}
	if err := local(); err != nil {
		return err
	}
	for range 2 {
		if err := workflow.ExecuteActivity(actx, noop).Get(ctx, nil); err != nil {
			return err
		}
	}
	if err := local(); err != nil {
		return err
	}
	return workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
}

func noop(context.Context) error { return nil }

// run is one measured burst.
type run struct {
	n    int
	span time.Duration
	cpu  time.Duration
}

func (r run) rate() float64 { return float64(r.n) / r.span.Seconds() }

func (r run) cpuPerOrder() time.Duration { return r.cpu / time.Duration(r.n) }

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var u syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// lifecycle creates n payments, then submits them all at once through the API, and times
// the first submit to the last Order.Confirmed.
func lifecycle(c *devbundle.Client, n int) (run, error) {
	ids, err := c.CreatePayments(n)
	if err != nil {
		return run{}, err
	}
	cpu := processCPU()
	orders, err := c.SubmitAll("pay", "/payments/", ids)
	if err != nil {
		return run{}, err
	}
	confirmed, other, err := c.Confirmations("pay", orders, 5*time.Minute)
	if err != nil || other > 0 {
		return run{}, fmt.Errorf("%d confirmed, %d otherwise: %v", len(confirmed), other, err)
	}
	first, last := orders[0].SentAt, time.Time{}
	for _, o := range orders {
		if o.SentAt.Before(first) {
			first = o.SentAt
		}
		if at := confirmed[o.ID]; at.After(last) {
			last = at
		}
	}
	return run{n: n, span: last.Sub(first), cpu: processCPU() - cpu}, nil
}

// bare starts n bare workflows at once with Update-with-Start, sends each its signal as
// soon as its update is answered (as the dev signer would once asked), and times the
// first start to the last completion.
func bare(ctx context.Context, tc client.Client, n int, round int) (run, error) {
	cpu := processCPU()
	start := time.Now()
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprintf("bare-%d-%d", round, i)
			op := tc.NewWithStartWorkflowOperation(client.StartWorkflowOptions{ID: id, TaskQueue: bareQueue,
				WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL}, bareOrder)
			h, err := tc.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{StartWorkflowOperation: op,
				UpdateOptions: client.UpdateWorkflowOptions{UpdateName: "decision", WaitForStage: client.WorkflowUpdateStageCompleted}})
			if err == nil {
				err = h.Get(ctx, nil)
			}
			if err == nil {
				err = tc.SignalWorkflow(ctx, id, "", "signature", nil)
			}
			if err == nil {
				err = tc.GetWorkflow(ctx, id, "").Get(ctx, nil)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return run{}, err
	}
	return run{n: n, span: time.Since(start), cpu: processCPU() - cpu}, nil
}

func median(runs []run, f func(run) float64) float64 {
	v := make([]float64, len(runs))
	for i, r := range runs {
		v[i] = f(r)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func main() {
	n := flag.Int("orders", 200, "orders (and bare workflows) started at once per round")
	rounds := flag.Int("rounds", 3, "rounds; the two kinds alternate within each")
	storeKind := flag.String("store", "sqlite", "the treasury store: sqlite, or postgres (a database made for the run)")
	pgServer := flag.String("postgres", "postgres://postgres@127.0.0.1:5432/?sslmode=disable", "with -store postgres, the server to make the database on")
	cpuProfile := flag.String("cpu-profile", "", "write a CPU profile of the measured rounds to this file")
	allocProfile := flag.String("alloc-profile", "", "write an allocation profile of the measured rounds to this file (go tool pprof -sample_index=alloc_space)")
	flag.Parse()
	if err := measure(*n, *rounds, *storeKind, *pgServer, *cpuProfile, *allocProfile); err != nil {
		fmt.Fprintln(os.Stderr, "ceiling:", err)
		os.Exit(1)
	}
}

func measure(n, rounds int, storeKind, pgServer, cpuProfile, allocProfile string) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "treasury-ceiling-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	c, tc, stop, err := startRig(ctx, dir, storeKind, pgServer)
	if err != nil {
		return err
	}
	defer stop()

	// A warm-up of each, unmeasured: the first workflows of a queue pay for its setup.
	if _, err := lifecycle(c, 20); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if _, err := bare(ctx, tc, 20, -1); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	stopProfiles, err := profile(cpuProfile, allocProfile)
	if err != nil {
		return err
	}
	defer stopProfiles()
	var ours, ceiling []run
	for round := range rounds {
		o, err := lifecycle(c, n)
		if err != nil {
			return fmt.Errorf("lifecycle round %d: %w", round+1, err)
		}
		e, err := bare(ctx, tc, n, round)
		if err != nil {
			return fmt.Errorf("bare round %d: %w", round+1, err)
		}
		ours, ceiling = append(ours, o), append(ceiling, e)
		fmt.Printf("round %d: lifecycle %.1f orders/s (%v CPU per order), bare workflow %.1f/s (%v CPU each)\n", round+1,
			o.rate(), o.cpuPerOrder().Round(10*time.Microsecond), e.rate(), e.cpuPerOrder().Round(10*time.Microsecond))
	}
	rate := func(r run) float64 { return r.rate() }
	cpu := func(r run) float64 { return float64(r.cpuPerOrder()) }
	mo, mc := median(ours, rate), median(ceiling, rate)
	co, cc := time.Duration(median(ours, cpu)), time.Duration(median(ceiling, cpu))
	fmt.Printf("store %s, %d at once, medians of %d rounds:\n", storeKind, n, rounds)
	fmt.Printf("  throughput: lifecycle %.1f orders/s, same-shape bare workflow %.1f/s: %.0f%% of the ceiling\n", mo, mc, 100*mo/mc)
	fmt.Printf("  CPU per order (whole process: server, worker, API, load): lifecycle %v, bare %v: %.2fx\n",
		co.Round(10*time.Microsecond), cc.Round(10*time.Microsecond), float64(co)/float64(cc))
	name := map[string]string{"sqlite": "SQLite", "postgres": "PostgreSQL"}[storeKind]
	devbundle.Summarize("lifecycle ÷ same-shape bare workflow, "+name, fmt.Sprintf("%.1f orders/s", mo), fmt.Sprintf("%.1f/s", mc),
		fmt.Sprintf("%.2f", mo/mc), "≥ 0.80", devbundle.Verdict(mo/mc >= 0.8))
	devbundle.Summarize("CPU per order ÷ the bare workflow's, "+name, co.Round(100*time.Microsecond).String(), cc.Round(100*time.Microsecond).String(),
		fmt.Sprintf("%.2fx", float64(co)/float64(cc)), "≤ 1.25x", devbundle.Verdict(float64(co) <= 1.25*float64(cc)))
	return nil
}

// startRig starts the dev bundle (its store of the kind asked for) and, beside it on the
// same Temporal server, a worker of the bare same-shape workflow; stop ends both.
func startRig(ctx context.Context, dir, storeKind, pgServer string) (*devbundle.Client, client.Client, func(), error) {
	var undo []func()
	stop := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	fail := func(err error) (*devbundle.Client, client.Client, func(), error) { stop(); return nil, nil, nil, err }
	opts := devstack.Options{DataDir: dir, HTTPAddr: "127.0.0.1:0", UIPort: -1, DevSigner: true, RateLimit: 1e6, RateBurst: 1 << 20,
		BalanceSyncInterval: time.Hour, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if storeKind == "postgres" {
		dsn, drop, err := devbundle.CreateDatabase(ctx, pgServer, "ceiling")
		if err != nil {
			return fail(err)
		}
		undo = append(undo, drop)
		opts.DatabaseURL = dsn
	}
	b, err := devstack.Start(ctx, opts)
	if err != nil {
		return fail(err)
	}
	undo = append(undo, func() { _ = b.Shutdown() })
	// Uncompressed, as the bundle's own client: the reference pays no more than ours.
	tc, err := client.Dial(client.Options{HostPort: b.TemporalAddr, Namespace: b.Namespace,
		ConnectionOptions: client.ConnectionOptions{GrpcCompression: &client.GrpcCompressionNone{}},
		Logger:            sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))})
	if err != nil {
		return fail(err)
	}
	undo = append(undo, tc.Close)
	w := sdkworker.New(tc, bareQueue, sdkworker.Options{})
	w.RegisterWorkflow(bareOrder)
	w.RegisterActivity(noop)
	if err := w.Start(); err != nil {
		return fail(err)
	}
	undo = append(undo, w.Stop)
	creds, err := devbundle.ReadCredentials(b.CredentialsPath)
	if err != nil {
		return fail(err)
	}
	return devbundle.NewClient(creds), tc, stop, nil
}

// profile starts the profiles asked for; stop writes them.
func profile(cpuProfile, allocProfile string) (stop func(), err error) {
	var undo []func()
	stop = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return stop, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			_ = f.Close()
			return stop, err
		}
		undo = append(undo, func() { pprof.StopCPUProfile(); _ = f.Close() })
	}
	if allocProfile != "" {
		// The allocs profile counts from process start; the measured rounds
		// (hundreds of orders of each kind) dominate start-up and warm-up.
		undo = append(undo, func() {
			if f, err := os.Create(allocProfile); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
				_ = f.Close()
			}
		})
	}
	return stop, nil
}
