package wshub_test

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/opentreasury/treasury/api"
	"github.com/opentreasury/treasury/internal/assemble"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

// The clients of BenchmarkIdleConnectionMemory run in a child process (this test binary
// started again with these variables), so that the server's memory is measured alone.
const (
	clientURLEnv   = "WSHUB_BENCH_CLIENT_URL"
	clientCountEnv = "WSHUB_BENCH_CLIENT_COUNT"
)

// plainSendsEnv set runs the suite with the send ring switched off.
const plainSendsEnv = "WSHUB_PLAIN_SENDS"

// TestMain runs the suite twice: as deployed, with sends batched through io_uring where
// the kernel has it, and again with every frame written by a system call of its own
// (NoSendRing). Both ways of writing must behave the same. A fuzzing run (go test -fuzz)
// runs once: its workers are this binary too, and the fuzz target writes without the ring.
func TestMain(m *testing.M) {
	if url := os.Getenv(clientURLEnv); url != "" {
		n, _ := strconv.Atoi(os.Getenv(clientCountEnv))
		os.Exit(holdClients(url, n))
	}
	code := m.Run()
	if code == 0 && os.Getenv(plainSendsEnv) == "" && flag.Lookup("test.bench").Value.String() == "" &&
		flag.Lookup("test.fuzz").Value.String() == "" {
		fmt.Println("wshub: the suite again, every frame written by a system call of its own (" + plainSendsEnv + "=1)")
		cmd := exec.Command(os.Args[0], os.Args[1:]...)
		cmd.Env = append(os.Environ(), plainSendsEnv+"=1")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			code = 1
		}
	}
	os.Exit(code)
}

// holdClients opens n connections, waits for each one's connection.ready, says "ready"
// and holds them idle until its stdin closes.
func holdClients(url string, n int) int {
	dialer := websocket.Dialer{HandshakeTimeout: 30 * time.Second, ReadBufferSize: 512, WriteBufferSize: 512}
	conns := make([]*websocket.Conn, 0, n)
	for i := 0; i < n; i++ {
		ws, _, err := dialer.Dial(url, nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, "dial:", err)
			return 1
		}
		if _, _, err := ws.ReadMessage(); err != nil {
			fmt.Fprintln(os.Stderr, "ready:", err)
			return 1
		}
		conns = append(conns, ws)
	}
	fmt.Println("ready")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	for _, ws := range conns {
		_ = ws.Close()
	}
	return 0
}

// BenchmarkIdleConnectionMemory reports the server's memory per idle connection: Go heap
// and goroutine stacks in use, after a collection, with and without the connections.
// WSHUB_BENCH_CONNECTIONS sets how many (default 5000).
func BenchmarkIdleConnectionMemory(b *testing.B) {
	n := 5000
	if v, err := strconv.Atoi(os.Getenv("WSHUB_BENCH_CONNECTIONS")); err == nil && v > 0 {
		n = v
	}
	s := storetest.NewSQLite(b)
	creds := seedStore(b, s)
	// Logs are discarded: a buffer of them would be counted as the connections' memory.
	r := startReplica(b, s, assemble.LiveOptions{}, api.Config{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	pay := creds.Keys["pay"]
	cfg := r.createConfig(b, pay.SK, "*")

	for i := 0; i < b.N; i++ {
		before := inUse()
		stop := startClients(b, r.wsURL(cfg, pay.PK), n)
		time.Sleep(time.Second)
		after := inUse()
		goroutines := runtime.NumGoroutine()
		stop()
		b.ReportMetric(float64(after.heap-before.heap)/float64(n), "heapB/conn")
		b.ReportMetric(float64(after.stack-before.stack)/float64(n), "stackB/conn")
		b.ReportMetric(float64(after.heap+after.stack-before.heap-before.stack)/float64(n), "B/conn")
		b.ReportMetric(float64(goroutines)/float64(n), "goroutines/conn")
	}
}

type memInUse struct{ heap, stack uint64 }

func inUse() memInUse {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return memInUse{heap: m.HeapInuse, stack: m.StackInuse}
}

// startClients opens n idle connections to url from a child process and returns once all
// are ready; stop closes them.
func startClients(b *testing.B, url string, n int) (stop func()) {
	b.Helper()
	child := exec.Command(os.Args[0], "-test.run", "^$")
	child.Env = append(os.Environ(), clientURLEnv+"="+url, clientCountEnv+"="+strconv.Itoa(n))
	child.Stderr = os.Stderr
	stdin, _ := child.StdinPipe()
	stdout, _ := child.StdoutPipe()
	if err := child.Start(); err != nil {
		b.Fatal(err)
	}
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
		_ = child.Process.Kill()
		b.Fatalf("clients: %q %v", line, err)
	}
	return func() { _ = stdin.Close(); _ = child.Wait() }
}
