// Package devbundle starts treasury-dev for the load programs under bench/ and holds the
// arithmetic they share.
package devbundle

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/opentreasury/treasury/dev/seed"
)

// Bundle is a treasury-dev child process on free ports with a data directory of its own.
type Bundle struct {
	Cmd *exec.Cmd
	// CredentialsPath is the bundle's credentials.json.
	CredentialsPath string
	// TemporalAddr and Namespace are the embedded Temporal server's frontend and the
	// namespace of the order workflows, as the banner names them.
	TemporalAddr, Namespace string
	// DatabaseURL is the store's PostgreSQL database, when StartOn put it there.
	DatabaseURL string
	// Creds are the bundle's credentials, read by StartOn.
	Creds *seed.Credentials
	dir   string
	drop  func()
}

// ReadCredentials reads a bundle's credentials.json.
func ReadCredentials(path string) (*seed.Credentials, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c seed.Credentials
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &c, nil
}

// Start runs bin with extra flags and returns once it has printed its banner.
func Start(bin string, extra []string) (*Bundle, error) {
	dir, err := os.MkdirTemp("", "treasury-bench-")
	if err != nil {
		return nil, err
	}
	args := append([]string{"--data-dir", dir, "--http-addr", "127.0.0.1:0", "--temporal-port", "0", "--ui-port", "-1", "--log-level", "warn"}, extra...)
	b := &Bundle{Cmd: exec.Command(bin, args...), CredentialsPath: filepath.Join(dir, "credentials.json"), dir: dir}
	var stderr bytes.Buffer
	b.Cmd.Stderr = &stderr
	stdout, err := b.Cmd.StdoutPipe()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := b.Cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		// "  Temporal      127.0.0.1:7233 (namespace default)"
		if f := strings.Fields(lines.Text()); len(f) == 4 && f[0] == "Temporal" && f[2] == "(namespace" {
			b.TemporalAddr, b.Namespace = f[1], strings.TrimSuffix(f[3], ")")
		}
		if strings.HasPrefix(lines.Text(), "Press Ctrl-C") {
			// The bundle blocks on a full stdout pipe if nobody drains it.
			go func() { _, _ = io.Copy(io.Discard, stdout) }()
			return b, nil
		}
	}
	b.Stop()
	return nil, fmt.Errorf("treasury-dev ended before it was ready: %s", stderr.String())
}

// LoadFlags start a bundle for a load: the API's rate limit lifted (a bench paces its
// own clients where a limit is the point), wallet balances synced hourly, quiet logs.
var LoadFlags = []string{"--rate-limit", "1000000", "--rate-burst", "1000000", "--balance-sync-interval", "1h", "--log-level", "error"}

// StartOn runs bin as Start does, with its store on kind: "sqlite" (in the bundle's data
// directory) or "postgres" (a database made on server for the run, dropped by Stop), and
// reads its credentials.
func StartOn(bin, kind, server, prefix string, extra []string) (*Bundle, error) {
	// treasury-dev puts its store on PostgreSQL when DATABASE_URL is set in its environment.
	_ = os.Unsetenv("DATABASE_URL")
	drop := func() {}
	url := ""
	switch kind {
	case "sqlite":
	case "postgres":
		var err error
		if url, drop, err = CreateDatabase(context.Background(), server, prefix); err != nil {
			return nil, err
		}
		_ = os.Setenv("DATABASE_URL", url)
		defer os.Unsetenv("DATABASE_URL")
	default:
		return nil, fmt.Errorf("unknown store %q", kind)
	}
	b, err := Start(bin, extra)
	if err != nil {
		drop()
		return nil, err
	}
	b.DatabaseURL, b.drop = url, drop
	if b.Creds, err = ReadCredentials(b.CredentialsPath); err != nil {
		b.Stop()
		return nil, err
	}
	return b, nil
}

// Dir is the bundle's data directory: its SQLite store is treasury.db there.
func (b *Bundle) Dir() string { return b.dir }

// CPU is the CPU time, user and system, the bundle's process has used so far (Linux: it
// reads /proc/<pid>/stat, in clock ticks of 10 ms).
func (b *Bundle) CPU() (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", b.Cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces: count from after it.
	fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("devbundle: /proc stat of %d has %d fields", b.Cmd.Process.Pid, len(fields))
	}
	var utime, stime int64
	if _, err := fmt.Sscan(fields[11], &utime); err != nil {
		return 0, err
	}
	if _, err := fmt.Sscan(fields[12], &stime); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// Stop interrupts the bundle as Ctrl-C would, waits for it, and removes its data.
func (b *Bundle) Stop() {
	_ = b.Cmd.Process.Signal(syscall.SIGINT)
	_ = b.Cmd.Wait()
	_ = os.RemoveAll(b.dir)
	if b.drop != nil {
		b.drop()
	}
}

// Percentile returns the p-th (0 to 1) of sorted durations, 0 for none.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(float64(len(sorted)-1)*p)]
}

// SummaryEnv names the file each bench program adds its headline figures to, so that
// `make bench` ends with one table of every target beside its figure (dev/bench/summary
// prints it). Unset, Summarize does nothing.
const SummaryEnv = "BENCH_SUMMARY"

// Summarize adds one row to the run's summary: what was measured, the figure, its
// reference from the same run ("" for none), the ratio or comparison that the target
// reads, the target ("report" for none) and the verdict.
func Summarize(what, figure, reference, ratio, target, verdict string) {
	path := os.Getenv(SummaryEnv)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench summary:", err)
		return
	}
	defer f.Close()
	clean := func(s string) string { return strings.NewReplacer("\t", " ", "\n", " ").Replace(s) }
	if _, err := fmt.Fprintf(f, "%s\t%s\t%s\t%s\t%s\t%s\n", clean(what), clean(figure), clean(reference), clean(ratio), clean(target), clean(verdict)); err != nil {
		fmt.Fprintln(os.Stderr, "bench summary:", err)
	}
}

// Verdict is "met" or "missed".
func Verdict(met bool) string {
	if met {
		return "met"
	}
	return "missed"
}
