// Command scale measures how the cost of the API's reads and writes grows with the data:
// the dev bundle (treasury-dev) is grown to N orders of history, with everything a real
// history leaves beside them (status history, legs, signing requests, approval items,
// events, webhook deliveries and their attempts, request logs, audit entries), plus
// 10,000 orders waiting for approvers and 1,000 wallets, and at each N the same requests
// are measured at a fixed concurrency: p50 and p99, one table for every N.
//
// The history is copied from real orders: one of each domain and ending is run through
// the bundle first (templates.go), then their rows are copied in the database by
// statements (grow.go). The bundle keeps running throughout, so the reads go through
// the real API, and creating and submitting a payment starts its real workflow.
//
//	go run ./dev/bench/scale -dev-bin bin/treasury-dev
//	go run ./dev/bench/scale -dev-bin bin/treasury-dev -store postgres -sizes 10000,100000,1000000 -explain
package main

import (
	"cmp"
	"context"
	"database/sql"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/opentreasury/treasury/dev/bench/devbundle"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
	"github.com/opentreasury/treasury/migrations"
)

type options struct {
	devBin, databaseURL string
	bundleFlags         string
	sizes               []int64
	pending, wallets    int64
	requests, conc      int
	rounds              int
	writes              int
	explain             bool
	spacing             time.Duration
}

func main() {
	var o options
	which := flag.String("store", "both", "sqlite, postgres or both")
	sqliteSizes := flag.String("sqlite-sizes", "10000,100000", "orders of history measured on SQLite, ascending")
	pgSizes := flag.String("postgres-sizes", "10000,100000,1000000", "orders of history measured on PostgreSQL, ascending")
	flag.StringVar(&o.devBin, "dev-bin", "bin/treasury-dev", "the treasury-dev binary")
	flag.StringVar(&o.bundleFlags, "bundle-flags", "", "more flags for treasury-dev, e.g. --cpu-profile scale.cpu")
	flag.StringVar(&o.databaseURL, "database-url", storetest.PostgresURL(), "PostgreSQL server the run makes a database of its own on (and drops after)")
	flag.Int64Var(&o.pending, "pending", 10000, "orders waiting for approvers, beside the history")
	flag.Int64Var(&o.wallets, "wallets", 1000, "wallets of the organisation (the seed's and copies)")
	flag.IntVar(&o.requests, "requests", 400, "requests per read, per size")
	flag.IntVar(&o.conc, "concurrency", 8, "requests in flight at once")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds of -requests per read; the median round's figures are reported")
	flag.IntVar(&o.writes, "writes", 200, "payments created and submitted per size")
	flag.DurationVar(&o.spacing, "spacing", time.Minute, "time between two orders of the history (0s: the whole history today, in every wallet's daily volume)")
	flag.BoolVar(&o.explain, "explain", false, "print the PostgreSQL plans of the list queries at every size")
	flag.Parse()
	if o.requests < 1 || o.conc < 1 || o.rounds < 1 || o.writes < 1 {
		fmt.Fprintln(os.Stderr, "-requests, -concurrency, -rounds and -writes must be at least 1")
		os.Exit(2)
	}
	stores := map[string]string{"sqlite": *sqliteSizes, "postgres": *pgSizes}
	kinds := []string{*which}
	if *which == "both" {
		kinds = []string{"sqlite", "postgres"}
	}
	for _, kind := range kinds {
		sizes, err := parseSizes(stores[kind])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		o.sizes = sizes
		if err := run(kind, o); err != nil {
			fmt.Fprintln(os.Stderr, kind+":", err)
			os.Exit(1)
		}
	}
}

func parseSizes(s string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil || n < 100 || (len(out) > 0 && n <= out[len(out)-1]) {
			return nil, fmt.Errorf("sizes %q: each at least 100, ascending", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func run(kind string, o options) error {
	ctx := context.Background()
	b, err := devbundle.StartOn(o.devBin, kind, o.databaseURL, "treasury_bench_scale",
		slices.Concat(devbundle.LoadFlags, strings.Fields(o.bundleFlags)))
	if err != nil {
		return err
	}
	defer b.Stop()
	c := devbundle.NewClient(b.Creds)
	// The bundle's own database, opened beside it: raw for the copies, as a store for the
	// audit chain's import.
	name, dialect, driver, dsn := "SQLite", migrations.SQLite, "sqlite", store.SQLiteDSN(filepath.Join(b.Dir(), "treasury.db"))
	cfg := store.Config{SQLitePath: filepath.Join(b.Dir(), "treasury.db")}
	if b.DatabaseURL != "" {
		name, dialect, driver, dsn = "PostgreSQL", migrations.Postgres, "pgx", b.DatabaseURL
		cfg = store.Config{DatabaseURL: b.DatabaseURL}
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	s, err := store.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Close()

	fmt.Printf("\n%s: the dev bundle grown to each size; %d rounds of %d requests a read at %d in flight (the median round), %d payments created and submitted\n",
		name, o.rounds, o.requests, o.conc, o.writes)
	g, err := prepare(ctx, c, db, s, dialect, o)
	if err != nil {
		return err
	}
	defer g.stopReceiver()
	var results []sizeResult
	for _, n := range o.sizes {
		r, err := g.growAndMeasure(ctx, n)
		if err != nil {
			return fmt.Errorf("at %d orders: %w", n, err)
		}
		results = append(results, r)
	}
	report(name, results)
	return nil
}

// grower holds what one store's run has made so far.
type grower struct {
	c          *devbundle.Client
	db         *sql.DB
	s          *store.Store
	copier     *copier
	o          options
	ts         []*template
	logIDs     []string
	auditModel []store.AuditLog
	wallet     string
	// orders and logs are the copies made so far.
	orders, logs, audit int64
	rows                map[string]int64
	stopReceiver        func()
}

// prepare runs the templates and makes the parts of the data that do not grow: the
// wallets and the crowd waiting for approvers. The webhooks' receiver stays up until the
// grower's stopReceiver: a receiver gone would leave every later event's delivery failing
// and retried beside the measurements, more of them at each size.
func prepare(ctx context.Context, c *devbundle.Client, db *sql.DB, s *store.Store, dialect migrations.Dialect, o options) (_ *grower, err error) {
	ts, err := templates(c.Creds)
	if err != nil {
		return nil, err
	}
	head, err := s.AuditHead(ctx, c.Creds.OrgID)
	if err != nil {
		return nil, err
	}
	began := time.Now().Add(-time.Second)
	closeReceiver, err := runTemplates(c, ts)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			closeReceiver()
		}
	}()
	// Copies of a delivery still due would all be sent: wait until the templates' are done.
	if err := deliveriesDone(ctx, db, ts); err != nil {
		return nil, err
	}
	g := &grower{c: c, db: db, s: s, o: o, ts: ts, rows: map[string]int64{}, stopReceiver: closeReceiver}
	if g.logIDs, err = requestLogIDs(ctx, db, dialect, c.Creds.OrgID, began); err != nil {
		return nil, err
	}
	entries, err := s.AuditChain(ctx, c.Creds.OrgID, head.Seq, head.Seq+1000, 1000)
	if err != nil {
		return nil, err
	}
	// The orders' entries: not the webhooks' the run began with.
	for _, a := range entries {
		if !strings.HasPrefix(a.Action, "webhook") {
			g.auditModel = append(g.auditModel, a)
		}
	}
	for _, w := range c.Creds.Wallets {
		if w.Chain == "ethereum" && w.AutoSign {
			g.wallet = w.ID
			break
		}
	}
	if g.copier, err = newCopier(ctx, db, dialect, o.spacing); err != nil {
		return nil, err
	}
	began = time.Now()
	if err := g.copier.copyWallets(ctx, g.wallet, o.wallets-int64(len(c.Creds.Wallets))); err != nil {
		return nil, err
	}
	pending := ts[len(ts)-1]
	rows, err := g.copier.copyPending(ctx, pending, o.pending)
	if err != nil {
		return nil, err
	}
	for k, v := range rows {
		g.rows[k] += v
	}
	actions := map[string]int64{}
	for _, a := range g.auditModel {
		actions[a.Action]++
	}
	fmt.Printf("templates: %d orders run; copied from: %d audit entries (%s) and %d request logs; %d wallets and %d orders waiting for approvers made in %.1f s\n",
		len(ts), len(g.auditModel), rowCounts(actions), len(g.logIDs), o.wallets, o.pending, time.Since(began).Seconds())
	return g, nil
}

// sizeResult is one size's figures.
type sizeResult struct {
	orders        int64
	grew, measure time.Duration
	figures       []figure
	rows          map[string]int64
}

// logsPerOrder and the audit's share follow what the templates' run wrote per order.
const logsPerOrder = 3

// growOrders copies the history's orders, with their rows, and request logs up to n orders.
func (g *grower) growOrders(ctx context.Context, n int64) error {
	rows, err := g.copier.copyOrders(ctx, g.ts, g.orders, n)
	if err != nil {
		return err
	}
	for k, v := range rows {
		g.rows[k] += v
	}
	logs, err := g.copier.copyRequestLogs(ctx, g.c.Creds.OrgID, g.logIDs, g.logs/int64(len(g.logIDs)), (n-g.orders)*logsPerOrder)
	g.logs += logs
	g.rows["request_logs"] = g.logs
	return err
}

// growAudit chains audit entries up to as many an order, for n orders, as the templates'
// run recorded for its orders.
func (g *grower) growAudit(ctx context.Context, n int64) error {
	perOrder := float64(len(g.auditModel)) / float64(len(g.ts))
	want := int64(float64(n) * perOrder)
	// Whole copies of the model, so that each copy's number is used once.
	per := int64(len(g.auditModel))
	for g.audit < want {
		copies := min(50000/per, (want-g.audit+per-1)/per)
		if err := g.s.ImportAudit(ctx, g.c.Creds.OrgID, auditCopies(g.auditModel, g.audit/per, copies*per)); err != nil {
			return err
		}
		g.audit += copies * per
	}
	return nil
}

func (g *grower) growAndMeasure(ctx context.Context, n int64) (sizeResult, error) {
	began := time.Now()
	var phases []string
	phase := func(name string, took time.Duration) {
		phases = append(phases, fmt.Sprintf("%s %.0f s", name, took.Seconds()))
	}
	// Where writers go side by side (PostgreSQL) the audit chain is written beside the
	// orders' copies: the copies are the server's work, the chain's hashes the bench's.
	var (
		ordersErr, auditErr error
		auditTook           time.Duration
	)
	orders := func() {
		ordersErr = g.growOrders(ctx, n)
		phase("orders and request logs", time.Since(began))
	}
	audit := func() {
		at := time.Now()
		auditErr = g.growAudit(ctx, n)
		auditTook = time.Since(at)
	}
	if g.copier.concurrent() {
		var auditing sync.WaitGroup
		auditing.Go(audit)
		orders()
		auditing.Wait()
		phase("audit chain (beside them)", auditTook)
	} else {
		orders()
		if ordersErr == nil {
			audit()
			phase("audit chain", auditTook)
		}
	}
	err := cmp.Or(ordersErr, auditErr)
	if err != nil {
		return sizeResult{}, err
	}
	g.rows["audit_logs"] = g.audit
	g.orders = n
	at := time.Now()
	if err := g.copier.settle(ctx); err != nil {
		return sizeResult{}, err
	}
	phase("settled", time.Since(at))
	grew := time.Since(began)
	fmt.Printf("\n%d orders of history: grown in %.1f s (%s; %s)\n", n, grew.Seconds(), strings.Join(phases, ", "), rowCounts(g.rows))

	began = time.Now()
	client := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	base := g.c.API
	pay := g.c.Creds.Keys["pay"]
	// 10,000 deep, or half way through a smaller list (a short trial run).
	depth := int(min(10000, (n+g.o.pending)/2))
	ordersDeep, sample, err := cursorAt(client, base+"/payments", pay.Read, depth)
	if err != nil {
		return sizeResult{}, err
	}
	eventsDeep, _, err := cursorAt(client, base+"/events", pay.Read, depth)
	if err != nil {
		return sizeResult{}, err
	}
	// Orders from all through the history, not only its newest: the deep page's too.
	tail, _, err := page(client, base+"/payments?limit=100&cursor="+ordersDeep, pay.Read)
	if err != nil {
		return sizeResult{}, err
	}
	sample = append(sample, tail...)
	var figs []figure
	for _, r := range reads(g.c, g.o, depth, sample, ordersDeep, eventsDeep) {
		f := measure(client, base, r, g.o.requests, g.o.conc, g.o.rounds)
		fmt.Printf("  %-40s p50 %7.2f ms  p99 %7.2f ms%s\n", f.name, ms(f.p50), ms(f.p99), failures(f.failed))
		figs = append(figs, f)
	}
	export, err := exportRate(client, base, g.c.Creds.Keys["treasury"].Read)
	if err != nil {
		return sizeResult{}, err
	}
	fmt.Printf("  %-40s %.0f entries/s\n", export.name, export.perSecond)
	figs = append(figs, export)
	w, ids, err := writes(g.c, g.wallet, g.o.writes, g.o.conc)
	if err != nil {
		return sizeResult{}, err
	}
	for _, f := range w {
		fmt.Printf("  %-40s p50 %7.2f ms  p99 %7.2f ms\n", f.name, ms(f.p50), ms(f.p99))
	}
	figs = append(figs, w...)
	measured := time.Since(began)
	// Payments still signing, broadcasting or confirming would work beside the next
	// size's growth and measurement: at the next size the writes would compete with this
	// size's, and the growth with both (on SQLite, starving them of the write lock).
	ended, err := paymentsEnded(ctx, g.db, ids)
	if err != nil {
		return sizeResult{}, err
	}
	fmt.Printf("  (the %d payments ended %.1f s after the last submit)\n", len(ids), ended.Seconds())
	if g.o.explain && g.copier.dialect == migrations.Postgres {
		if err := explain(ctx, g.db, g.c.Creds.OrgID, ordersDeep, eventsDeep); err != nil {
			return sizeResult{}, err
		}
	}
	return sizeResult{orders: n, grew: grew, measure: measured, figures: figs, rows: maps.Clone(g.rows)}, nil
}

func rowCounts(m map[string]int64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func failures(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("  (%d failed)", n)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
