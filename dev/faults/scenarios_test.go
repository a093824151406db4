package faults

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentreasury/treasury/dev/cluster"
)

// 300 orders of all four domains in flight while the workers are killed with SIGKILL,
// one then the other, over and over: every order ends, each leg reaches the chain once,
// every order's events are gap-free and never repeated, every webhook message arrives.
func TestWorkersKilledWhileOrdersAreInFlight(t *testing.T) {
	c := startCluster(t, "workers")
	hooks := hookEveryApp(t, c)

	stop := make(chan struct{})
	kills := make(chan int, 1)
	go func() {
		n := 0
		defer func() { kills <- n }()
		tick := time.NewTicker(1500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if err := c.Kill(cluster.Worker(n%2 + 1)); err != nil {
				t.Errorf("kill: %v", err)
				return
			}
			n++
		}
	}()
	orders := placeOrders(t, c, 300)
	// Keep killing while the orders are worked on, then let the workers finish.
	ctx := context.Background()
	deadline := time.Now().Add(3 * time.Minute)
	for waitTerminal(ctx, c.Store(), orders, 0) < len(orders)*3/4 && time.Now().Before(deadline) {
		// Not wait.For: at the deadline the killing stops and the test goes on to account.
		time.Sleep(time.Second)
	}
	close(stop)
	n := <-kills
	r := row{scenario: "kill -9 a worker, then the other, every 1.5 s"}
	account(t, c, orders, hooks, &r)
	r.note = fmt.Sprintf("%d kills", n)
	if n < 4 {
		t.Errorf("only %d kills happened while the orders were in flight", n)
	}
	scrapeEveryProcess(t, c)
	report(r)
}

// An api process is killed with SIGKILL while live clients are on both: the killed
// one's clients reconnect to the other and recover what they missed from
// GET /api/v1/events?after=; then the other is stopped with SIGTERM and its clients are
// told 1001 (going away).
func TestAPIKilledWithLiveClients(t *testing.T) {
	c := startCluster(t, "api")
	pay := c.Credentials.Keys["pay"]
	r := send("POST", c.APIURLs[0]+"/developer/websockets", pay.SK, `{"events":["order.*"]}`)
	if r.status != 201 {
		t.Fatalf("websocket config: %d %s %v", r.status, r.raw, r.err)
	}
	configID := r.body["id"].(string)
	var clients []*liveClient
	for i := range 40 {
		clients = append(clients, dialLive(t, c.APIURLs[i%2], configID, pay.PK))
	}

	// Payments go on while api-1 dies and comes back; they are placed through api-2.
	wallet := c.Credentials.Wallets[0].ID
	var orders []placed
	killed := false
	for i := range 60 {
		if i == 20 {
			if err := c.Kill(cluster.API(1)); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
		base := c.APIURLs[1] + "/api/v1/payments"
		a, err := retried("POST", base, pay.SK, fmt.Sprintf(domains[0].body, wallet), fmt.Sprintf("live-%d", i), 201)
		if err != nil {
			t.Fatal(err)
		}
		id := a.body["id"].(string)
		if _, err := retried("POST", base+"/"+id+"/submit", pay.SK, "", "live-submit-"+id, 202); err != nil {
			t.Fatal(err)
		}
		orders = append(orders, placed{id: id, d: domains[0]})
		time.Sleep(100 * time.Millisecond) // the payments' pace, spread over the kill: the time is the point
	}
	if !killed {
		t.Fatal("api-1 was never killed")
	}
	rw := row{scenario: "kill -9 an api with 40 live clients on the two, then SIGTERM the other"}
	account(t, c, orders, nil, &rw)

	// Every event of those orders, as a client subscribed to order.* must end up with.
	want := map[string]bool{}
	for _, o := range orders {
		evs, err := eventsOf(c.APIURLs[1], pay.Read, o.id)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if name, _ := e["event"].(string); strings.HasPrefix(name, "Order.") {
				want[e["id"].(string)] = true
			}
		}
	}
	reconnected := 0
	for i, lc := range clients {
		if lc.dropped() {
			// The killed api's client: back on the other one, then catch up from the last
			// event it saw.
			reconnected++
			lc.reconnect(t, c.APIURLs[1], configID, pay.PK)
			if err := lc.catchUp(c.APIURLs[1], pay.Read); err != nil {
				t.Fatalf("client %d: %v", i, err)
			}
		}
	}
	if reconnected != 20 {
		t.Errorf("%d clients lost their connection, want the 20 of the killed api", reconnected)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, lc := range clients {
		for lc.missing(want) > 0 && time.Now().Before(deadline) {
			// Not wait.For: what is still missing at the deadline is counted and reported.
			time.Sleep(100 * time.Millisecond)
		}
		rw.eventsLost += lc.missing(want)
		rw.eventsRepeated += lc.repeats()
	}
	if rw.eventsLost != 0 || rw.eventsRepeated != 0 {
		t.Errorf("live clients: %d events lost, %d repeated over the live channel", rw.eventsLost, rw.eventsRepeated)
	}

	// SIGTERM on the other api: every client on it is told 1001.
	if err := c.Terminate(cluster.API(2)); err != nil {
		t.Fatal(err)
	}
	goingAway := 0
	for _, lc := range clients {
		if lc.closeCode(10*time.Second) == 1001 {
			goingAway++
		}
	}
	if goingAway != len(clients) {
		t.Errorf("%d of %d clients were closed with 1001 on SIGTERM", goingAway, len(clients))
	}
	rw.note = fmt.Sprintf("%d clients reconnected and caught up; %d of %d told 1001 on SIGTERM", reconnected, goingAway, len(clients))
	report(rw)
}

// PostgreSQL restarted under load: requests answer 503 unavailable while it is down
// (never 500), every write retried with its Idempotency-Key lands once, readiness flips
// and recovers, and no process restarts.
func TestPostgresRestartedUnderLoad(t *testing.T) {
	restart := os.Getenv("FAULTS_PG_RESTART")
	if restart == "" {
		restart = "pg_ctlcluster --skip-systemctl-redirect " + postgresVersion(t) + " main restart"
	}
	c := startCluster(t, "postgres")
	w := startWriter(c, "pg")
	readiness := watchReadiness(c)
	time.Sleep(3 * time.Second) // load before the restart: the time is the point
	if out, err := exec.Command("sh", "-c", restart).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", restart, err, out)
	}
	time.Sleep(5 * time.Second) // load after the restart: the time is the point
	orders := w.finish(t)
	flips := readiness.finish()
	r := row{scenario: "restart PostgreSQL under load"}
	account(t, c, orders, nil, &r)
	if got := countPayments(t, c); got != len(orders) {
		t.Errorf("%d payments in the store, %d placed: a write was lost or made twice", got, len(orders))
	}
	w.mu.Lock()
	for code, n := range w.codes {
		if !strings.HasPrefix(code, "503 unavailable") {
			t.Errorf("%d answers %s while PostgreSQL restarted; want only 503 unavailable", n, code)
		}
	}
	w.mu.Unlock()
	if !flips.wentDown || !flips.cameBack {
		t.Errorf("readiness: went down %v, came back %v", flips.wentDown, flips.cameBack)
	}
	var restarted []string
	for _, name := range c.Names() {
		if n := c.Crashes(name); n > 0 {
			restarted = append(restarted, fmt.Sprintf("%s %d", name, n))
		}
	}
	if len(restarted) > 0 {
		t.Errorf("processes exited while PostgreSQL restarted: %s", strings.Join(restarted, ", "))
	}
	r.note = fmt.Sprintf("answers %s; readiness went down and came back; no process restarted", w.tally())
	report(r)
}

// The Temporal server stopped for 30 s: submits are accepted all the same (202, the policy's
// decision pending), their workflows' starts queued in the database, and started by a
// worker once Temporal is back; nothing is refused, lost or made twice; every order then
// ends.
func TestTemporalStoppedFor30Seconds(t *testing.T) {
	c := startCluster(t, "temporal")
	w := startWriter(c, "temporal")
	time.Sleep(3 * time.Second) // load before the outage: the time is the point
	if err := c.Hold(cluster.Temporal); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Second) // the outage held for 30 s: the time is the point
	if err := c.Resume(cluster.Temporal); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second) // load after the outage: the time is the point
	orders := w.finish(t)
	r := row{scenario: "Temporal server stopped for 30 s"}
	account(t, c, orders, nil, &r)
	if got := countPayments(t, c); got != len(orders) {
		t.Errorf("%d payments in the store, %d placed: a write was lost or made twice", got, len(orders))
	}
	w.mu.Lock()
	for code, n := range w.codes {
		t.Errorf("%d answers %s while Temporal was down; want none: a submit is accepted and its start queued", n, code)
	}
	pending := w.pending
	w.mu.Unlock()
	if pending == 0 {
		t.Error("no submit was accepted with its decision pending while Temporal was down")
	}
	r.note = fmt.Sprintf("answers %s", w.tally())
	report(r)
}

// readinessWatch polls both APIs' /readyz.
type readinessWatch struct {
	mu                 sync.Mutex
	wentDown, cameBack bool
	stop, done         chan struct{}
}

func watchReadiness(c *cluster.Cluster) *readinessWatch {
	rw := &readinessWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(rw.done)
		for {
			select {
			case <-rw.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			for _, u := range c.APIURLs {
				r := send("GET", u+"/readyz", "", "")
				rw.mu.Lock()
				if r.status != 200 {
					rw.wentDown = true
				} else if rw.wentDown {
					rw.cameBack = true
				}
				rw.mu.Unlock()
			}
		}
	}()
	return rw
}

func (rw *readinessWatch) finish() *readinessWatch {
	close(rw.stop)
	<-rw.done
	return rw
}

// postgresVersion names the local PostgreSQL cluster's version (the directory under
// /etc/postgresql), for pg_ctlcluster.
func postgresVersion(t *testing.T) string {
	dirs, err := os.ReadDir("/etc/postgresql")
	if err != nil || len(dirs) == 0 {
		t.Skip("no local PostgreSQL cluster to restart (set FAULTS_PG_RESTART to the command that restarts yours)")
	}
	return dirs[len(dirs)-1].Name() // the newest, as .ci/run starts it
}

// scrapeEveryProcess reads /metrics of every api and worker: the apis have counted their
// requests, the workers (restarted by the kills, and working since) their Temporal tasks.
func scrapeEveryProcess(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	for name, url := range c.MetricsURLs {
		want := "treasury_http_requests_total{"
		if strings.HasPrefix(name, "worker") {
			want = "temporal_"
		}
		r := send("GET", url, "", "")
		if r.err != nil || r.status != 200 || !strings.Contains(r.raw, want) {
			t.Errorf("%s's /metrics (%s): %d %v, wants a series %s…", name, url, r.status, r.err, want)
		}
	}
	if len(c.MetricsURLs) != 4 {
		t.Errorf("metrics of %d processes, want 2 apis and 2 workers", len(c.MetricsURLs))
	}
}
