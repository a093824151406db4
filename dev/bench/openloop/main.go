// Command openloop measures latency curves of the order lifecycle on the dev bundle under
// an open-loop load: payments are sent at a fixed rate for a fixed time, rate after rate,
// until the bundle saturates, whatever the answers take. For each rate it reports the
// submit call's latency, submit to Order.Confirmed, and an approval decision to the
// order's Wallet.SigningRequested, prints a table and draws the curves as an SVG.
//
//	go run ./bench/openloop -dev-bin bin/treasury-dev [-rates 5,10,20,30,40,60] [-step 20s]
//	    [-store sqlite|postgres] [-svg docs/bench/openloop-sqlite.svg]
//
// Figures differ 2x between machines; read each against the saturation rate the same run
// measured.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"math"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/opentreasury/treasury/dev/bench/devbundle"
	"github.com/opentreasury/treasury/internal/events"
)

// The targets of the issue, at 50 % of the saturation rate.
const (
	submitTarget   = 50 * time.Millisecond
	decisionTarget = 60 * time.Millisecond
)

// The saturation criterion: a step is saturated when it completed orders clearly slower
// than they were offered, or when its confirmation p99 exploded against the lowest rate's.
const (
	achievedFloor = 0.9
	p99Explosion  = 5.0
)

// lateSend is how far behind its schedule a send counts as late.
const lateSend = 5 * time.Millisecond

type result struct {
	offered  float64
	achieved float64
	sent     int
	late     int
	maxLag   time.Duration
	// Sorted latencies.
	create, submit, confirmed, decision, decideCall, followLag []time.Duration
	// The submit call split at Order.Submitted's commit (inside the first workflow task),
	// and the decision split at Order.Approved's.
	toSubmitted, afterSubmitted, toApproved, afterApproved []time.Duration
	// errors counts orders that did not end confirmed, by what went wrong.
	errors     map[string]int
	errorCount int
	// missed counts orders whose end the live channel did not bring but GET /events had.
	missed int
	// drain is from the last send to the last order ended.
	drain                         time.Duration
	serverCPU, ownCPU, machineCPU float64 // cores busy, on average over the step
	saturated                     bool
	why                           string
	// orders are the step's, for reading their workflows' histories afterwards.
	orders []*order
}

func pct(s []time.Duration, p float64) time.Duration { return devbundle.Percentile(s, p) }

// runStep sends rate orders a second for dur and waits for them to end (drainMax at most
// after the last send). Every approvalEvery-th order needs an approval.
func runStep(ctx context.Context, r *runner, pid int, rate float64, dur time.Duration, approvalEvery int, label string, drainMax time.Duration) result {
	n := max(int(math.Round(rate*dur.Seconds())), 1)
	orders := make([]*order, 0, n)
	r.t.mu.Lock()
	lagFrom := len(r.t.lag)
	r.t.mu.Unlock()
	cpu0 := readCPU(pid)
	start := time.Now().Add(20 * time.Millisecond)
	// The schedule is computed, not read from a time.Ticker: a Ticker drops the ticks its
	// reader was too late for, and a late send must be sent and counted, never skipped.
	for i := range n {
		due := start.Add(time.Duration(float64(i) * float64(time.Second) / rate))
		if d := time.Until(due); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
		if ctx.Err() != nil {
			break
		}
		o := &order{approval: approvalEvery > 0 && i%approvalEvery == approvalEvery-1, due: due, lag: time.Since(due)}
		orders = append(orders, o)
		go r.send(ctx, o, i, label)
	}
	lastSend := time.Now()

	deadline := lastSend.Add(drainMax)
	for ctx.Err() == nil && time.Now().Before(deadline) && !allFinished(r.t, orders) {
		time.Sleep(50 * time.Millisecond)
	}
	missed := 0
	if !allFinished(r.t, orders) {
		missed = r.sweep(ctx, orders)
	}
	end := time.Now()
	cpu1 := readCPU(pid)

	res := result{offered: rate, sent: len(orders), missed: missed, errors: map[string]int{}, orders: orders}
	wall := end.Sub(start).Seconds()
	res.serverCPU = (cpu1.server - cpu0.server).Seconds() / wall
	res.ownCPU = (cpu1.own - cpu0.own).Seconds() / wall
	res.machineCPU = (cpu1.machine - cpu0.machine).Seconds() / wall

	r.t.mu.Lock()
	defer r.t.mu.Unlock()
	res.followLag = slices.Clone(r.t.lag[lagFrom:])
	var ends []time.Time
	lastEnd := lastSend
	for _, o := range orders {
		res.maxLag = max(res.maxLag, o.lag)
		if o.lag > lateSend {
			res.late++
		}
		if o.createLat > 0 {
			res.create = append(res.create, o.createLat)
		}
		if o.submitted {
			res.submit = append(res.submit, o.submitLat)
			if !o.submittedAt.IsZero() {
				res.toSubmitted = append(res.toSubmitted, o.submittedAt.Sub(o.submitSent))
				res.afterSubmitted = append(res.afterSubmitted, o.submitSent.Add(o.submitLat).Sub(o.submittedAt))
			}
		}
		if o.decideLat > 0 {
			res.decideCall = append(res.decideCall, o.decideLat)
		}
		if o.approval && !o.decideSent.IsZero() && !o.signReqAt.IsZero() {
			res.decision = append(res.decision, o.signReqAt.Sub(o.decideSent))
			if !o.approvedAt.IsZero() {
				res.toApproved = append(res.toApproved, o.approvedAt.Sub(o.decideSent))
				res.afterApproved = append(res.afterApproved, o.signReqAt.Sub(o.approvedAt))
			}
		}
		switch {
		case o.err != "":
			kind, _, _ := strings.Cut(o.err, ":")
			res.errors[kind+" failed"]++
		case o.endAt.IsZero():
			res.errors["not ended"]++
		case o.endEvent != events.OrderConfirmed:
			res.errors[o.endEvent]++
		default:
			ends = append(ends, o.endAt)
			// Approval orders wait for this program's approver, whose reaction is not the
			// service's: they count for the achieved rate, not for the confirmed curve.
			if !o.approval {
				res.confirmed = append(res.confirmed, o.endAt.Sub(o.submitSent))
			}
		}
		if o.endAt.After(lastEnd) {
			lastEnd = o.endAt
		}
	}
	for _, c := range res.errors {
		res.errorCount += c
	}
	res.drain = lastEnd.Sub(lastSend)
	// Completions a second, between the first and the last: in a step the bundle keeps up
	// with, they come as the sends went, whatever the latency; past saturation, the
	// backlog drains after the last send at the rate the bundle manages.
	slices.SortFunc(ends, func(a, b time.Time) int { return a.Compare(b) })
	if len(ends) >= 2 {
		res.achieved = float64(len(ends)-1) / ends[len(ends)-1].Sub(ends[0]).Seconds()
	}
	for _, s := range [][]time.Duration{res.create, res.submit, res.confirmed, res.decision, res.decideCall, res.followLag,
		res.toSubmitted, res.afterSubmitted, res.toApproved, res.afterApproved} {
		slices.Sort(s)
	}
	return res
}

func allFinished(t *tracker, orders []*order) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, o := range orders {
		if !o.finished() {
			return false
		}
	}
	return true
}

// ms prints a latency for a table: milliseconds below 10 s.
func ms(d time.Duration) string {
	switch {
	case d <= 0:
		return "–"
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	case d < 10*time.Second:
		return fmt.Sprintf("%.0f ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

func rateString(r float64) string { return strconv.FormatFloat(r, 'f', -1, 64) }

func (res result) print(label string) {
	fmt.Printf("%s: %d sent (late > %v: %d, latest %s), last ended %.1f s after the last send; achieved %.1f/s\n",
		label, res.sent, lateSend, res.late, ms(res.maxLag), res.drain.Seconds(), res.achieved)
	fmt.Printf("  p50/p99: create %s / %s; submit sent -> Order.Submitted %s / %s, then -> its answer %s / %s; decide call %s / %s; decide sent -> Order.Approved %s / %s, then -> SigningRequested %s / %s\n",
		ms(pct(res.create, .5)), ms(pct(res.create, .99)),
		ms(pct(res.toSubmitted, .5)), ms(pct(res.toSubmitted, .99)), ms(pct(res.afterSubmitted, .5)), ms(pct(res.afterSubmitted, .99)),
		ms(pct(res.decideCall, .5)), ms(pct(res.decideCall, .99)),
		ms(pct(res.toApproved, .5)), ms(pct(res.toApproved, .99)), ms(pct(res.afterApproved, .5)), ms(pct(res.afterApproved, .99)))
	fmt.Printf("  follower lag (occurredAt -> here) p50/p99/max %s / %s / %s; CPU in cores: treasury-dev %.2f, this program %.2f, whole machine %.2f of %d\n",
		ms(pct(res.followLag, .5)), ms(pct(res.followLag, .99)), ms(pct(res.followLag, 1)), res.serverCPU, res.ownCPU, res.machineCPU, runtime.NumCPU())
	if res.errorCount > 0 || res.missed > 0 {
		fmt.Printf("  errors %v; ends the live channel missed and GET /events had: %d\n", res.errors, res.missed)
	}
}

func printTable(results []result) {
	fmt.Println()
	fmt.Println("| offered /s | achieved /s | late sends | submit p50 | submit p99 | confirmed p50 | confirmed p99 | decision→SigningRequested p50 | p99 | errors |")
	fmt.Println("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range results {
		mark := ""
		if r.saturated {
			mark = " (saturated)"
		}
		fmt.Printf("| %s%s | %.1f | %d | %s | %s | %s | %s | %s | %s | %d of %d |\n", rateString(r.offered), mark, r.achieved, r.late,
			ms(pct(r.submit, .5)), ms(pct(r.submit, .99)),
			fmt.Sprintf("%s (n %d)", ms(pct(r.confirmed, .5)), len(r.confirmed)), ms(pct(r.confirmed, .99)),
			fmt.Sprintf("%s (n %d)", ms(pct(r.decision, .5)), len(r.decision)), ms(pct(r.decision, .99)),
			r.errorCount, r.sent)
	}
	fmt.Println()
}

func parseRates(s string) ([]float64, error) {
	var out []float64
	for f := range strings.SplitSeq(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("-rates: %q is not a positive number", f)
		}
		out = append(out, v)
	}
	if !slices.IsSorted(out) {
		return nil, fmt.Errorf("-rates must rise")
	}
	return out, nil
}

func main() { os.Exit(run()) }

func run() int {
	devBin := flag.String("dev-bin", "bin/treasury-dev", "treasury-dev binary to start")
	ratesFlag := flag.String("rates", "5,10,20,30,40,60", "offered rates (orders/s), rising; past the last, x1.5 steps until saturation")
	step := flag.Duration("step", 20*time.Second, "how long each rate is offered")
	store := flag.String("store", "sqlite", "the treasury store: sqlite, or postgres (a fresh database, dropped at the end)")
	pgServer := flag.String("postgres", "postgres://postgres@127.0.0.1:5432/?sslmode=disable", "with -store postgres, the server to make the database on")
	svgPath := flag.String("svg", "", "where to draw the curves (default docs/bench/openloop-<store>.svg; - for none)")
	approvalEvery := flag.Int("approval-every", 5, "every n-th order is 20,000 USDC and needs one approval (0: none)")
	warmup := flag.Duration("warmup", 3*time.Second, "unmeasured load at the first rate before the first step")
	maxRate := flag.Float64("max-rate", 400, "stop raising the rate past this one even if unsaturated")
	drainMax := flag.Duration("drain", time.Minute, "how long after a step's last send its orders may take to end")
	halfStep := flag.Bool("half-step", true, "once saturated, offer half the saturation rate for one more step, where the targets are read (unless a step already ran within 10 % of it)")
	explain := flag.Bool("explain", true, "after each step, read the orders' workflow histories and print where the submit calls' time went")
	poll := flag.Duration("approver-poll", 50*time.Millisecond, "how often the approver lists pending items while approval orders wait")
	extra := flag.String("dev-args", "--rate-limit 100000 --rate-burst 100000 --balance-sync-interval 1h",
		"flags for treasury-dev, space separated (the default lifts the per-key rate limit, since one key sends the whole load, and keeps the minutely balance sync out of the measurement)")
	flag.Parse()

	rates, err := parseRates(*ratesFlag)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if *svgPath == "" {
		*svgPath = "docs/bench/openloop-" + *store + ".svg"
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// treasury-dev puts its store on PostgreSQL when DATABASE_URL is set in its
	// environment, which it inherits from this process.
	switch *store {
	case "sqlite":
		_ = os.Unsetenv("DATABASE_URL")
	case "postgres":
		dsn, drop, err := devbundle.CreateDatabase(ctx, *pgServer, "openloop")
		if err != nil {
			fmt.Fprintln(os.Stderr, "postgres:", err)
			return 1
		}
		defer drop()
		_ = os.Setenv("DATABASE_URL", dsn)
		u, _ := url.Parse(dsn)
		fmt.Printf("store: PostgreSQL, fresh database %s (dropped at the end); the embedded Temporal server stays on SQLite\n", strings.TrimPrefix(u.Path, "/"))
	default:
		fmt.Fprintln(os.Stderr, "-store must be sqlite or postgres")
		return 2
	}

	b, err := devbundle.Start(*devBin, strings.Fields(*extra))
	if err != nil {
		fmt.Fprintln(os.Stderr, "start treasury-dev:", err)
		return 1
	}
	defer b.Stop()
	creds, err := devbundle.ReadCredentials(b.CredentialsPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "credentials:", err)
		return 1
	}
	r, err := newRunner(creds, *poll)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var histories *explainer
	if *explain {
		if histories, err = newExplainer(b.TemporalAddr, b.Namespace); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer histories.close()
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := r.follow(runCtx, creds.BaseURL); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var bg sync.WaitGroup
	bg.Go(func() { r.approver(runCtx) })
	defer bg.Wait()
	defer cancel()

	machine := machineName()
	fmt.Printf("openloop: %s, %d cores, store %s, %v per rate, one order in %d of 20,000 USDC, with one approval; load generator on the same machine\n",
		machine, runtime.NumCPU(), *store, *step, *approvalEvery)
	fmt.Printf("saturated: achieved completions < %.0f %% of the offered rate, or confirmed p99 > %.0fx the lowest rate's; saturation rate: the highest achieved rate of any step\n",
		achievedFloor*100, p99Explosion)
	fmt.Println("confirmed: submit sent -> Order.Confirmed occurredAt, orders without approval only; decision: decide sent -> Wallet.SigningRequested occurredAt")
	if *warmup > 0 {
		w := runStep(runCtx, r, b.Cmd.Process.Pid, rates[0], *warmup, *approvalEvery, "warmup", *drainMax)
		w.print("warm-up (not measured)")
	}

	var results []result
	for i, rate := 0, rates[0]; ctx.Err() == nil; i++ {
		if i < len(rates) {
			rate = rates[i]
		} else {
			rate = math.Round(rate * 1.5)
		}
		if rate > *maxRate {
			break
		}
		res := runStep(runCtx, r, b.Cmd.Process.Pid, rate, *step, *approvalEvery, rateString(rate), *drainMax)
		if ctx.Err() != nil {
			break // an interrupted step measured nothing worth a row
		}
		if res.achieved < achievedFloor*rate {
			res.saturated, res.why = true, fmt.Sprintf("achieved %.1f/s < %.0f %% of %s/s", res.achieved, achievedFloor*100, rateString(rate))
		} else if len(results) > 0 {
			if base := pct(results[0].confirmed, .99); base > 0 && float64(pct(res.confirmed, .99)) > p99Explosion*float64(base) {
				res.saturated, res.why = true, fmt.Sprintf("confirmed p99 %s > %.0fx %s at %s/s", ms(pct(res.confirmed, .99)), p99Explosion, ms(base), rateString(results[0].offered))
			}
		}
		res.print(fmt.Sprintf("rate %s/s", rateString(rate)))
		if histories != nil {
			explainSubmits(runCtx, histories, r.t, res.orders)
		}
		results = append(results, res)
		if res.saturated {
			fmt.Printf("rate %s/s is saturated: %s\n", rateString(rate), res.why)
			break
		}
	}
	r.t.mu.Lock()
	if r.reconnects > 0 {
		fmt.Printf("the event follower lost its connection %d times (each followed by a catch-up from GET /events)\n", r.reconnects)
	}
	r.t.mu.Unlock()
	if len(results) == 0 {
		fmt.Fprintln(os.Stderr, "no step measured")
		return 1
	}
	if sat, saturated := saturationOf(results); saturated && *halfStep && ctx.Err() == nil {
		half := math.Round(sat*5) / 10 // one decimal
		if !slices.ContainsFunc(results, func(r result) bool { return math.Abs(r.offered-half) <= 0.1*half }) {
			res := runStep(runCtx, r, b.Cmd.Process.Pid, half, *step, *approvalEvery, rateString(half), *drainMax)
			res.print(fmt.Sprintf("rate %s/s (half the saturation rate)", rateString(half)))
			if histories != nil {
				explainSubmits(runCtx, histories, r.t, res.orders)
			}
			results = append(results, res)
			slices.SortFunc(results, func(a, b result) int { return cmp.Compare(a.offered, b.offered) })
		}
	}
	printTable(results)

	sat, reached := summarize(results)
	if *svgPath != "-" {
		title := fmt.Sprintf("Open-loop latency, treasury-dev on %s: %d cores (%s), %s", *store, runtime.NumCPU(), machine, time.Now().Format("2006-01-02"))
		sub := fmt.Sprintf("%v per rate; one order in %d needs an approval; the load generator shares the machine", *step, *approvalEvery)
		if err := writeSVG(*svgPath, title, sub, results, sat, reached); err != nil {
			fmt.Fprintln(os.Stderr, "svg:", err)
			return 1
		}
		fmt.Println("curves:", *svgPath)
	}
	return 0
}

// saturationOf is the highest achieved rate of any step, and whether a step saturated.
func saturationOf(results []result) (sat float64, saturated bool) {
	for _, r := range results {
		sat = max(sat, r.achieved)
		saturated = saturated || r.saturated
	}
	return sat, saturated
}

// summarize prints the saturation rate, and the p99s at the measured rate nearest half of
// it against the targets; it returns the saturation rate and whether a step reached it.
func summarize(results []result) (float64, bool) {
	sat, saturated := saturationOf(results)
	if saturated {
		fmt.Printf("saturation rate: %.1f orders/s (the highest achieved rate)\n", sat)
	} else {
		fmt.Printf("saturation rate: not reached; at least %.1f orders/s (raise -max-rate or -rates)\n", sat)
	}
	near := results[0]
	for _, r := range results {
		if math.Abs(r.offered-sat/2) < math.Abs(near.offered-sat/2) {
			near = r
		}
	}
	verdict := func(d, target time.Duration) string {
		if d <= 0 {
			return "no sample"
		}
		if d <= target {
			return "met"
		}
		return "MISSED"
	}
	sp, dp := pct(near.submit, .99), pct(near.decision, .99)
	fmt.Printf("50 %% of saturation is %.1f/s; the nearest measured rate is %s/s (%.0f %% of saturation):\n", sat/2, rateString(near.offered), 100*near.offered/sat)
	fmt.Printf("  submit p99 %s, target <= %s: %s\n", ms(sp), ms(submitTarget), verdict(sp, submitTarget))
	fmt.Printf("  decision -> Wallet.SigningRequested p99 %s (n %d), target <= %s: %s\n", ms(dp), len(near.decision), ms(decisionTarget), verdict(dp, decisionTarget))
	at := fmt.Sprintf("at %s/s of %.1f/s saturation", rateString(near.offered), sat)
	devbundle.Summarize("submit p99 at about half of saturation", ms(sp), at, "", "≤ "+ms(submitTarget), strings.ToLower(verdict(sp, submitTarget)))
	devbundle.Summarize("approval decision → Wallet.SigningRequested p99, same load", fmt.Sprintf("%s (n %d)", ms(dp), len(near.decision)), at, "",
		"≤ "+ms(decisionTarget), strings.ToLower(verdict(dp, decisionTarget)))
	return sat, saturated
}
