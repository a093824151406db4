// Command wsfanout measures the live WebSocket channel of the dev bundle: how much server
// memory an idle connection costs, and how long an Order.Created event takes to reach N
// connected clients.
//
//	go run ./bench/wsfanout -dev-bin bin/treasury-dev -clients 1000,10000 -events 50
//
// The clients' sockets are read by a few epoll loops rather than a goroutine each (see
// receiver.go): the load generator shares the server's cores and should take as little
// of them as it can.
//
// Each client count gets its own treasury-dev, started on free ports in a fresh data
// directory: memory the previous run's connections freed would otherwise be reused and
// understate the next run's cost per connection.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/opentreasury/treasury/dev/bench/devbundle"
	"github.com/opentreasury/treasury/dev/seed"
)

// bundle is a treasury-dev child process and the API client that talks to it.
type bundle struct {
	*devbundle.Bundle
	creds *seed.Credentials
	http  *http.Client
}

// startBundle runs treasury-dev and reads its credentials.
func startBundle(bin string, extra []string) (*bundle, error) {
	dev, err := devbundle.Start(bin, extra)
	if err != nil {
		return nil, err
	}
	b := &bundle{Bundle: dev, http: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}}
	if b.creds, err = devbundle.ReadCredentials(dev.CredentialsPath); err != nil {
		dev.Stop()
		return nil, fmt.Errorf("credentials: %w", err)
	}
	return b, nil
}

// do sends an API request as the pay app and returns the status and body.
func (b *bundle) do(method, path, correlationID, body string) (int, []byte, error) {
	req, err := http.NewRequest(method, b.creds.BaseURL+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+b.creds.Keys["pay"].SK)
	req.Header.Set("Content-Type", "application/json")
	if correlationID != "" {
		req.Header.Set("X-Correlation-Id", correlationID)
	}
	resp, err := b.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, raw, err
}

// vmRSS reads the resident memory of the bundle, in KiB.
func (b *bundle) vmRSS() (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", b.Cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(raw)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}

// cpuTime reads the CPU time (user + system) the bundle has used, from /proc/<pid>/stat.
func (b *bundle) cpuTime() (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", b.Cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; the fields after its closing ")" do not.
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	if len(fields) < 13 {
		return 0, errors.New("short /proc stat")
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond, nil
}

// ownCPUTime is the CPU time this process (the load generator) has used.
func ownCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// machineBusy is the CPU time every core of the machine has spent on anything but idling,
// from /proc/stat: it also counts the kernel's work that no process is charged for, such
// as network receive processing run by ksoftirqd.
func machineBusy() (time.Duration, error) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	fields := strings.Fields(line)
	if len(fields) < 8 || fields[0] != "cpu" {
		return 0, errors.New("no cpu line in /proc/stat")
	}
	// user, nice, system, irq, softirq: not idle or iowait, nor steal (another guest's
	// time) or guest (already in user).
	var busy int64
	for _, i := range []int{1, 2, 3, 6, 7} {
		n, err := strconv.ParseInt(fields[i], 10, 64)
		if err != nil {
			return 0, err
		}
		busy += n
	}
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(busy) * time.Second / ticksPerSecond, nil
}

// openFDs counts the bundle's open file descriptors: each live connection holds one.
func (b *bundle) openFDs() (int, error) {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", b.Cmd.Process.Pid))
	return len(entries), err
}

func main() {
	devBin := flag.String("dev-bin", "", "treasury-dev binary to start (required)")
	clientList := flag.String("clients", "1000,10000", "client counts to measure, comma separated")
	events := flag.Int("events", 50, "events sent per client count")
	interval := flag.Duration("interval", 200*time.Millisecond, "gap between events")
	extra := flag.String("dev-args", "--rate-limit 100000 --rate-burst 100000 --balance-sync-interval 1h",
		"flags for treasury-dev, space separated (the default lifts the per-key rate limit, since one key opens every connection, and keeps the minutely balance-sync workflow out of the measurement)")
	dialConcurrency := flag.Int("dial-concurrency", 200, "WebSocket handshakes in flight at once")
	receivers := flag.Int("receivers", runtime.NumCPU(), "epoll loops reading the clients' sockets")
	poll := flag.Duration("poll", 500*time.Microsecond,
		"how long a receiver with no socket ready sleeps before it looks again; 0 waits in epoll_wait instead, and has the server's writes wake the receivers")
	perEvent := flag.Bool("per-event", false, "print, on stderr, how long each event took to reach its last client")
	runs := flag.Int("runs", 1, "runs per client count, each on a fresh treasury-dev")
	target := flag.Duration("p99-target", 150*time.Millisecond, "a run meets the target when its commit-to-client p99 is at most this and it lost nothing")
	flag.Parse()

	if *devBin == "" {
		fmt.Fprintln(os.Stderr, "wsfanout: -dev-bin is required")
		os.Exit(2)
	}
	var counts []int
	for f := range strings.SplitSeq(*clientList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "wsfanout: bad client count %q\n", f)
			os.Exit(2)
		}
		counts = append(counts, n)
	}
	if *events <= 0 || *dialConcurrency <= 0 || *receivers <= 0 {
		fmt.Fprintln(os.Stderr, "wsfanout: -events, -dial-concurrency and -receivers must be positive")
		os.Exit(2)
	}

	var lim syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	fmt.Printf("wsfanout: a fresh treasury-dev per client count; RLIMIT_NOFILE of this process: soft %d, hard %d\n", lim.Cur, lim.Max)
	fmt.Println("note: the load generator (this process) runs on the same machine as the server and shares its cores")
	if *poll > 0 {
		fmt.Printf("note: %d receivers read every socket through epoll, looking again every %v when none is ready (up to that much is added to a latency)\n", *receivers, *poll)
	} else {
		fmt.Printf("note: %d receivers read every socket through epoll, waking when one is ready (the wake-ups cost the server's writes)\n", *receivers)
	}
	fmt.Println("note: commit-to-client runs from the event's occurredAt (stamped in its transaction, to the ms) to the frame read by the client; POST-start-to-client also counts the HTTP request")

	failed := false
	for _, n := range counts {
		p := params{clients: n, events: *events, interval: *interval, dialConcurrency: *dialConcurrency, receivers: *receivers, poll: *poll, perEvent: *perEvent}
		met := 0
		var p99s []string
		for range *runs {
			res, o, err := measure(*devBin, strings.Fields(*extra), p)
			if err != nil {
				fmt.Printf("clients %d: FAILED: %v\n", n, err)
				failed = true
				continue
			}
			fmt.Println(res)
			if o.p99 <= *target && o.lost == 0 {
				met++
			}
			p99s = append(p99s, o.p99.Round(time.Millisecond).String())
		}
		if *runs > 1 {
			fmt.Printf("clients %d: %d of %d runs met p99 <= %v with nothing lost (p99s: %s)\n", n, met, *runs, *target, strings.Join(p99s, ", "))
		}
		devbundle.Summarize(fmt.Sprintf("live fan-out, %d clients", n), fmt.Sprintf("%d of %d runs met", met, *runs), "", "p99s "+strings.Join(p99s, ", "),
			fmt.Sprintf("p99 ≤ %v, nothing lost, 9 runs in 10", *target), devbundle.Verdict(met*10 >= 9*(*runs)))
	}
	if failed {
		os.Exit(1)
	}
}

// measure starts a bundle, runs one client count against it and stops it.
func measure(devBin string, extra []string, p params) (string, outcome, error) {
	fmt.Fprintf(os.Stderr, "clients %d: starting treasury-dev\n", p.clients)
	b, err := startBundle(devBin, extra)
	if err != nil {
		return "", outcome{}, err
	}
	defer b.Stop()
	return run(b, p)
}
