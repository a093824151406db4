package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/opentreasury/treasury/dev/bench/devbundle"
)

// seq numbers every request of the process, so that no two carry the same
// Idempotency-Key, warm-ups included.
var seq atomic.Int64

// load is one kind of request to one server.
type load struct {
	client *http.Client
	build  func(ctx context.Context, seq int64) (*http.Request, error)
	// want is the status every answer must have; any other counts as an error.
	want int
}

func (l load) do(ctx context.Context) error {
	req, err := l.build(ctx, seq.Add(1))
	if err != nil {
		return err
	}
	res, err := l.client.Do(req)
	if err != nil {
		return err
	}
	// Read to the end, or the connection is not reused.
	_, err = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	if err != nil {
		return err
	}
	if res.StatusCode != l.want {
		return fmt.Errorf("status %d", res.StatusCode)
	}
	return nil
}

// result is one run of a load.
type result struct {
	requests, errors int
	firstError       string
	rate             float64
	p50, p99         time.Duration
	// cpu and alloc are the process's, over the run, per request; machine is the CPU of
	// the whole machine (the database server, the kernel's loopback work and whatever
	// else runs there) per request.
	cpu, machine time.Duration
	alloc        float64
}

// run drives l from concurrency goroutines, each sending its next request as soon as the
// previous one is answered, until d has passed; every latency is kept. CPU and allocations
// are counted until the last answer, and divided by every request.
func run(ctx context.Context, l load, concurrency int, d time.Duration) result {
	type worker struct {
		lat []time.Duration
		// inWindow counts the answers that came before the end: the rate is those over
		// d, so that the last, slowest answers do not stretch the run they end.
		inWindow int
		errors   int
		firstErr string
	}
	workers := make([]worker, concurrency)
	for i := range workers {
		// Sized for the fastest side, so that appends do not allocate during the run.
		workers[i].lat = make([]time.Duration, 0, 1024+int(d.Seconds()*40000)/concurrency)
	}
	var mem0, mem1 runtime.MemStats
	runtime.ReadMemStats(&mem0)
	cpu0, machine0 := processCPU(), machineCPU()
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for i := range workers {
		w := &workers[i]
		wg.Go(func() {
			for ctx.Err() == nil {
				t := time.Now()
				if t.After(end) {
					return
				}
				err := l.do(ctx)
				done := time.Now()
				w.lat = append(w.lat, done.Sub(t))
				if !done.After(end) {
					w.inWindow++
				}
				if err != nil {
					if w.errors == 0 {
						w.firstErr = err.Error()
					}
					w.errors++
				}
			}
		})
	}
	wg.Wait()
	var r result
	cpu, machine := processCPU()-cpu0, machineCPU()-machine0
	runtime.ReadMemStats(&mem1)
	var all []time.Duration
	inWindow := 0
	for _, w := range workers {
		all = append(all, w.lat...)
		inWindow += w.inWindow
		r.errors += w.errors
		if r.firstError == "" {
			r.firstError = w.firstErr
		}
	}
	slices.Sort(all)
	r.requests = len(all)
	if r.requests == 0 {
		return r
	}
	r.rate = float64(inWindow) / d.Seconds()
	r.p50, r.p99 = devbundle.Percentile(all, 0.50), devbundle.Percentile(all, 0.99)
	r.cpu = cpu / time.Duration(r.requests)
	r.machine = machine / time.Duration(r.requests)
	r.alloc = float64(mem1.TotalAlloc-mem0.TotalAlloc) / float64(r.requests)
	return r
}

// processCPU is the user and system time of the whole process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// machineCPU is the time all CPUs have spent busy since boot, from /proc/stat (0 where
// there is none). USER_HZ is 100 on every Linux this runs on.
func machineCPU() time.Duration {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	fields := strings.Fields(line)
	if len(fields) < 5 || fields[0] != "cpu" {
		return 0
	}
	var busy int64
	for i, f := range fields[1:] {
		n, _ := strconv.ParseInt(f, 10, 64)
		// idle and iowait are the 4th and 5th; guest time is already in user.
		if i != 3 && i != 4 && i < 8 {
			busy += n
		}
	}
	return time.Duration(busy) * 10 * time.Millisecond
}

// summary is the medians of one side's runs.
type summary struct {
	runs     []result
	rate     float64
	p50, p99 time.Duration
	cpu      time.Duration
	machine  time.Duration
	alloc    float64
	errors   int
	firstErr string
}

func summarize(runs []result) summary {
	s := summary{runs: runs}
	pick := func(f func(r result) float64) float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = f(r)
		}
		return median(v)
	}
	s.rate = pick(func(r result) float64 { return r.rate })
	s.p50 = time.Duration(pick(func(r result) float64 { return float64(r.p50) }))
	s.p99 = time.Duration(pick(func(r result) float64 { return float64(r.p99) }))
	s.cpu = time.Duration(pick(func(r result) float64 { return float64(r.cpu) }))
	s.machine = time.Duration(pick(func(r result) float64 { return float64(r.machine) }))
	s.alloc = pick(func(r result) float64 { return r.alloc })
	for _, r := range runs {
		s.errors += r.errors
		if s.firstErr == "" {
			s.firstErr = r.firstError
		}
	}
	return s
}

func median(v []float64) float64 {
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// compare warms both sides up, then runs them in turn for o.rounds rounds, the side that
// goes first alternating, so that drift in the machine's load (and what one run leaves
// behind for the next) falls on both sides alike.
func compare(ctx context.Context, ours, bare load, o options) (summary, summary, error) {
	run(ctx, ours, o.concurrency, o.warmup)
	run(ctx, bare, o.concurrency, o.warmup)
	per := o.duration / time.Duration(o.rounds)
	var oursRuns, bareRuns []result
	for i := range o.rounds {
		order := []bool{true, false} // true: ours
		if i%2 == 1 {
			order = []bool{false, true}
		}
		for _, isOurs := range order {
			// One side's garbage is not collected in the other's time.
			runtime.GC()
			if isOurs {
				oursRuns = append(oursRuns, run(ctx, ours, o.concurrency, per))
				time.Sleep(o.settle)
			} else {
				bareRuns = append(bareRuns, run(ctx, bare, o.concurrency, per))
			}
			if ctx.Err() != nil {
				return summary{}, summary{}, ctx.Err()
			}
		}
	}
	return summarize(oursRuns), summarize(bareRuns), nil
}

func printPair(oursName, bareName string, ours, bare summary) {
	line := func(name string, s summary) {
		var rounds []string
		for _, r := range s.runs {
			rounds = append(rounds, thousands(r.rate))
		}
		fmt.Printf("%-24s %9s %8s %8s %6d %8s %8s %9s   %s\n", name, thousands(s.rate), ms(s.p50), ms(s.p99), s.errors,
			us(s.cpu), us(s.machine), kib(s.alloc), strings.Join(rounds, ", "))
		if s.errors > 0 {
			fmt.Printf("%-24s first error: %s\n", "", s.firstErr)
		}
	}
	line(oursName, ours)
	line(bareName, bare)
	fmt.Printf("%-24s %9s %8s %8s %6s %8s %8s %9s\n", "  ours / bare", ratio(ours.rate, bare.rate),
		ratio(float64(ours.p50), float64(bare.p50)), ratio(float64(ours.p99), float64(bare.p99)), "",
		ratio(float64(ours.cpu), float64(bare.cpu)), ratio(float64(ours.machine), float64(bare.machine)), ratio(ours.alloc, bare.alloc))
}

func ratio(a, b float64) string {
	if b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }
func us(d time.Duration) string { return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond)) }
func kib(b float64) string      { return fmt.Sprintf("%.1fKiB", b/1024) }

// thousands renders n rounded, with a comma between each group of three digits.
func thousands(n float64) string {
	s := strconv.FormatInt(int64(n+0.5), 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
