// Package faults holds the fault tests: the production topology on this machine (the
// cluster package: Temporal on PostgreSQL, two api and two worker processes, a
// PostgreSQL store) is run while processes are killed, stopped and restarted under load,
// and every order, event, broadcast and webhook message is accounted for afterwards.
//
// They drive built binaries: make test-faults builds them and sets TREASURY_BIN and
// TREASURY_DEV_BIN. Each scenario prints one row of the table at the end.
package faults

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentreasury/treasury/dev/cluster"
	"github.com/opentreasury/treasury/dev/freeport"
)

// row is one line of the table the suite prints.
type row struct {
	scenario                   string
	orders, terminal           int
	transactionsPerLeg         string
	eventsLost, eventsRepeated int
	webhookLost                int
	notOnChain                 int // confirmed legs whose transaction the chain does not have
	note                       string
}

var (
	tableMu sync.Mutex
	table   []row
)

func report(r row) {
	tableMu.Lock()
	defer tableMu.Unlock()
	table = append(table, r)
}

func TestMain(m *testing.M) {
	if os.Getenv("TREASURY_BIN") == "" || os.Getenv("TREASURY_DEV_BIN") == "" {
		fmt.Println("faults: set TREASURY_BIN and TREASURY_DEV_BIN (make test-faults does); skipping")
		os.Exit(0)
	}
	code := m.Run()
	tableMu.Lock()
	defer tableMu.Unlock()
	if len(table) > 0 {
		fmt.Println()
		fmt.Println("| scenario | orders | terminal | transactions per leg | events lost | events repeated | webhook messages lost | confirmed legs not on the chain | note |")
		fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
		for _, r := range table {
			fmt.Printf("| %s | %d | %d | %s | %d | %d | %d | %d | %s |\n", r.scenario, r.orders, r.terminal,
				r.transactionsPerLeg, r.eventsLost, r.eventsRepeated, r.webhookLost, r.notOnChain, r.note)
		}
	}
	os.Exit(code)
}

// startCluster starts a cluster of its own (databases named after the test, dropped
// before and after) on free ports.
func startCluster(t *testing.T, name string, env ...string) *cluster.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	server := os.Getenv("FAULTS_POSTGRES")
	if server == "" {
		server = "postgres://postgres@127.0.0.1:5432/?sslmode=disable"
	}
	name = "treasury_faults_" + name
	if err := cluster.DropDatabases(ctx, server, name); err != nil {
		t.Fatal(err)
	}
	ports := make([]int, 4)
	for i := range ports {
		p, err := freeport.OrFree("127.0.0.1", 0)
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = p
	}
	dir := t.TempDir()
	c, err := cluster.Start(ctx, cluster.Options{
		TreasuryBin: os.Getenv("TREASURY_BIN"), DevBin: os.Getenv("TREASURY_DEV_BIN"),
		Postgres: server, Name: name, DataDir: dir,
		APIPorts: ports[:2], TemporalPort: ports[2], UIPort: ports[3],
		Env: append([]string{"RATE_LIMIT=100000", "RATE_BURST=100000", "BALANCE_SYNC_INTERVAL=1h",
			// Webhook retries in milliseconds to seconds instead of 5 s to 10 h.
			"WEBHOOK_BACKOFF_SCALE=0.001", "LOG_LEVEL=warn"}, env...),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		dumpLogs(t, dir)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, dir)
		}
		if err := c.Shutdown(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = cluster.DropDatabases(ctx, server, name)
	})
	return c
}

// dumpLogs prints the tail of every process's log, for a failed run.
func dumpLogs(t *testing.T, dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) > 15 {
			lines = lines[len(lines)-15:]
		}
		for i, l := range lines {
			if len(l) > 400 {
				lines[i] = l[:400] + "…"
			}
		}
		t.Logf("== %s\n%s", filepath.Base(f), strings.Join(lines, "\n"))
	}
}
