package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"

	"github.com/opentreasury/treasury/dev/bench/devbundle"
)

// params are one measurement's settings.
type params struct {
	clients, events int
	interval        time.Duration
	dialConcurrency int
	// receivers is how many epoll loops read the clients' sockets.
	receivers int
	poll      time.Duration
	// perEvent prints each event's latency to its last client.
	perEvent bool
}

const (
	idleSettle   = 2 * time.Second  // before the memory reading without connections
	connSettle   = 3 * time.Second  // after the last connection, before the second reading
	deliveryWait = 10 * time.Second // after the last event, for the frames still on their way
)

// receipt is one event frame a client read: which of our events it carried, and when,
// since the run's clock base.
type receipt struct {
	event int32
	at    time.Duration
}

// dial opens one connection and waits for connection.ready.
func dial(d *websocket.Dialer, target, configID string) (*websocket.Conn, error) {
	conn, resp, err := d.Dial(target, nil)
	if err != nil {
		if resp != nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			return nil, fmt.Errorf("%w: %s %s", err, resp.Status, strings.TrimSpace(string(body)))
		}
		return nil, err
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, msg, err := conn.ReadMessage()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("waiting for connection.ready: %w", err)
	}
	var ready struct {
		Type     string `json:"type"`
		ConfigID string `json:"configId"`
	}
	if json.Unmarshal(msg, &ready) != nil || ready.Type != "connection.ready" || ready.ConfigID != configID {
		conn.Close()
		return nil, fmt.Errorf("first frame is not connection.ready of %s: %.200s", configID, msg)
	}
	_ = conn.SetReadDeadline(time.Time{})
	return conn, nil
}

// connectAll opens n connections, dialConcurrency at a time. On any failure it closes
// those it opened and reports how many failed and the first error.
func connectAll(n, dialConcurrency int, target, configID string) ([]*websocket.Conn, error) {
	// Small buffers: the frames are a few hundred bytes, and at 10k clients the
	// default 4 KiB buffers would make this process, not the server, the memory hog.
	d := &websocket.Dialer{ReadBufferSize: 1024, WriteBufferSize: 256, HandshakeTimeout: 15 * time.Second}
	conns := make([]*websocket.Conn, n)
	next := atomic.Int64{}
	var (
		mu       sync.Mutex
		failures int
		firstErr error
		wg       sync.WaitGroup
	)
	for range min(dialConcurrency, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				conn, err := dial(d, target, configID)
				if err != nil {
					mu.Lock()
					failures++
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				conns[i] = conn
			}
		})
	}
	wg.Wait()
	if failures > 0 {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
		return nil, fmt.Errorf("%d of %d connections failed; first error: %v", failures, n, firstErr)
	}
	return conns, nil
}

// closeAll says goodbye to every connection still open, gives the server a moment to
// answer, then stops the receivers and closes the sockets.
func closeAll(clients []*wsClient, stopReceivers func()) {
	for _, c := range clients {
		if !c.ended() {
			_ = writeClientFrame(c.fd, websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
		}
	}
	deadline := time.After(3 * time.Second)
	for _, c := range clients {
		select {
		case <-c.done:
		case <-deadline:
		}
	}
	stopReceivers()
	closeSockets(clients)
}

func closeSockets(clients []*wsClient) {
	for _, c := range clients {
		_ = syscall.Close(c.fd)
	}
}

// run measures one client count on a running bundle and returns its result line.
// outcome is what a run is judged by: the commit-to-client p99 and the frames lost.
type outcome struct {
	p99  time.Duration
	lost int
}

func run(b *bundle, p params) (string, outcome, error) {
	wallet := ""
	for _, w := range b.creds.Wallets {
		if w.AutoSign && w.Chain == "ethereum" {
			wallet = w.ID
			break
		}
	}
	if wallet == "" {
		return "", outcome{}, errors.New("credentials.json has no autoSign ethereum wallet")
	}

	status, raw, err := b.do("POST", "/developer/websockets", "", `{"events":["order.created"]}`)
	var cfg struct {
		ID string `json:"id"`
	}
	if err == nil {
		err = json.Unmarshal(raw, &cfg)
	}
	if err != nil || status != 201 || cfg.ID == "" {
		return "", outcome{}, fmt.Errorf("create WebSocket config: %d %.300s %v", status, raw, err)
	}

	time.Sleep(idleSettle)
	rssBefore, err := b.vmRSS()
	if err != nil {
		return "", outcome{}, err
	}
	fdsBefore, err := b.openFDs()
	if err != nil {
		return "", outcome{}, err
	}

	target := b.creds.WSURL + "/api/v1/ws?id=" + url.QueryEscape(cfg.ID) + "&token=" + url.QueryEscape(b.creds.Keys["pay"].PK)
	fmt.Fprintf(os.Stderr, "clients %d: config %s; connecting\n", p.clients, cfg.ID)
	dialStart := time.Now()
	conns, err := connectAll(p.clients, p.dialConcurrency, target, cfg.ID)
	if err != nil {
		return "", outcome{}, err
	}
	dialTook := time.Since(dialStart)

	// Correlation ids are the prefix and the event's index, so a reader maps a frame to
	// its event by parsing, without a shared map.
	base := time.Now()
	prefix := fmt.Sprintf("wsfanout-%d-%d-", p.clients, base.UnixNano())
	clients := make([]*wsClient, 0, len(conns))
	for i, conn := range conns {
		fd, err := detach(conn)
		if err != nil {
			for _, c := range conns[i:] {
				c.Close()
			}
			closeSockets(clients)
			return "", outcome{}, fmt.Errorf("taking over a socket: %w", err)
		}
		// Twice the events leaves room to see duplicates without allocating per frame.
		recv := make([]receipt, 2*p.events)
		// Touched now: fresh pages from the OS would otherwise fault on the first event's
		// frames and charge this process's page faults to that event's latency.
		for i := range recv {
			recv[i].event = -1
		}
		clients = append(clients, &wsClient{fd: fd, recv: recv, done: make(chan struct{})})
	}
	stamps := make([]atomic.Int64, p.events)
	stopReceivers, err := startReceivers(p.receivers, p.poll, clients, base, prefix, stamps)
	if err != nil {
		closeSockets(clients)
		return "", outcome{}, err
	}
	var closeOnce sync.Once
	// Covers the early returns; the normal path closes before it reads the results.
	defer closeOnce.Do(func() { closeAll(clients, stopReceivers) })

	time.Sleep(connSettle)
	rssAfter, err := b.vmRSS()
	if err != nil {
		return "", outcome{}, err
	}
	fdsAfter, err := b.openFDs()
	if err != nil {
		return "", outcome{}, err
	}
	perConn := float64(rssAfter-rssBefore) / float64(p.clients)
	fmt.Fprintf(os.Stderr, "clients %d: connected in %v; server VmRSS %d -> %d KiB, fds %d -> %d; sending %d events\n",
		p.clients, dialTook.Round(time.Millisecond), rssBefore, rssAfter, fdsBefore, fdsAfter, p.events)

	// Events go one at a time: each POST's start is its event's t0, and a second
	// request in flight would only blur it.
	body := fmt.Sprintf(`{"walletId":%q,"asset":"USDC","amount":"1.00","destination":{"address":"0x1111111111111111111111111111111111111111"}}`, wallet)
	sent := make([]time.Duration, p.events)
	created := make([]bool, p.events)
	var postTook []time.Duration
	var postErr error
	postFailures := 0
	serverCPUBefore, _ := b.cpuTime()
	ownCPUBefore := ownCPUTime()
	machineBefore, _ := machineBusy()
	ticker := time.NewTicker(p.interval)
	for i := range p.events {
		if i > 0 {
			<-ticker.C
		}
		sent[i] = time.Since(base)
		status, raw, err := b.do("POST", "/api/v1/payments", prefix+strconv.Itoa(i), body)
		postTook = append(postTook, time.Since(base)-sent[i])
		if err != nil || status != 201 {
			postFailures++
			if postErr == nil {
				postErr = fmt.Errorf("POST /payments: %d %.300s %v", status, raw, err)
			}
			continue
		}
		created[i] = true
	}
	ticker.Stop()
	sendSpan := time.Since(base) - sent[0]
	expected := p.events - postFailures

	deadline := time.Now().Add(deliveryWait)
	for time.Now().Before(deadline) {
		pending := false
		for _, c := range clients {
			if int(c.n.Load()) < expected && !c.ended() {
				pending = true
				break
			}
		}
		if !pending {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	serverCPUAfter, _ := b.cpuTime()
	serverCPU := (serverCPUAfter - serverCPUBefore) / time.Duration(p.events)
	ownCPU := (ownCPUTime() - ownCPUBefore) / time.Duration(p.events)
	machineAfter, _ := machineBusy()
	machineCPU := (machineAfter - machineBefore) / time.Duration(p.events)

	// The server closed these before we began closing: read now, before closeAll.
	serverClosed := map[string]int{}
	closedCount := 0
	for _, c := range clients {
		if !c.ended() {
			continue
		}
		closedCount++
		if c.closeCode != 0 {
			serverClosed[strconv.Itoa(c.closeCode)]++
		} else {
			serverClosed["no close frame ("+c.err.Error()+")"]++
		}
	}
	closeOnce.Do(func() { closeAll(clients, stopReceivers) })

	var (
		latencies              []time.Duration
		received, dups, strays int
		overflow, foreign      int
		lastClient             = make([]time.Duration, p.events)
		seen                   = make([]bool, p.events)
	)
	latencies = make([]time.Duration, 0, p.clients*expected)
	commitLatencies := make([]time.Duration, 0, p.clients*expected)
	for _, c := range clients {
		clear(seen)
		for _, r := range c.recv[:c.n.Load()] {
			switch {
			case !created[r.event]:
				// Its POST failed, yet the event was committed; no t0 to measure from.
				strays++
			case seen[r.event]:
				dups++
			default:
				seen[r.event] = true
				received++
				lat := r.at - sent[r.event]
				latencies = append(latencies, lat)
				commitLatencies = append(commitLatencies, r.at-time.Duration(stamps[r.event].Load()-base.UnixNano()))
				lastClient[r.event] = max(lastClient[r.event], lat)
			}
		}
		overflow += int(c.overflow.Load())
		foreign += int(c.foreign.Load())
	}
	slices.Sort(latencies)
	slices.Sort(commitLatencies)
	slices.Sort(postTook)
	var reachedAll []time.Duration
	for i, ok := range created {
		if ok {
			reachedAll = append(reachedAll, lastClient[i])
		}
	}
	if p.perEvent {
		// In the order sent: a slow stretch shows up as neighbours, not as one tail.
		for i, ok := range created {
			if ok {
				stamped := time.Duration(stamps[i].Load()-base.UnixNano()) - sent[i]
				fmt.Fprintf(os.Stderr, "clients %d: event %d, sent at +%v, stamped %v after its POST started, reached the last client after %v\n",
					p.clients, i, sent[i].Round(time.Millisecond), stamped.Round(time.Millisecond), lastClient[i].Round(time.Millisecond))
			}
		}
	}
	slices.Sort(reachedAll)

	// Details go to stderr; the result stays one line per client count.
	fmt.Fprintf(os.Stderr, "clients %d: events sent over %v, POST p50 %v max %v; the last client to receive an event got it after p50 %v p90 %v max %v",
		p.clients, sendSpan.Round(time.Millisecond), devbundle.Percentile(postTook, .5).Round(time.Millisecond),
		postTook[len(postTook)-1].Round(time.Millisecond), devbundle.Percentile(reachedAll, .5).Round(time.Millisecond),
		devbundle.Percentile(reachedAll, .9).Round(time.Millisecond), devbundle.Percentile(reachedAll, 1).Round(time.Millisecond))
	if strays+foreign+overflow > 0 {
		fmt.Fprintf(os.Stderr, "; unexpected event frames: %d of failed POSTs, %d not ours, %d past the record", strays, foreign, overflow)
	}
	fmt.Fprintln(os.Stderr)

	var line strings.Builder
	fmt.Fprintf(&line, "clients %d: connected in %v, %.1f KiB/idle conn (server VmRSS %.1f->%.1f MiB, fds %d->%d); %d events every %v: received %d/%d, lost %d, dup %d, server-closed %d",
		p.clients, dialTook.Round(time.Millisecond), perConn, float64(rssBefore)/1024, float64(rssAfter)/1024, fdsBefore, fdsAfter,
		expected, p.interval, received, p.clients*expected, p.clients*expected-received, dups, closedCount)
	if closedCount > 0 {
		codes := make([]string, 0, len(serverClosed))
		for code, k := range serverClosed {
			codes = append(codes, fmt.Sprintf("%s x%d", code, k))
		}
		slices.Sort(codes)
		fmt.Fprintf(&line, " [%s]", strings.Join(codes, ", "))
	}
	fmt.Fprintf(&line, "; commit-to-client p50 %v p99 %v max %v", devbundle.Percentile(commitLatencies, .5).Round(time.Millisecond),
		devbundle.Percentile(commitLatencies, .99).Round(time.Millisecond), devbundle.Percentile(commitLatencies, 1).Round(time.Millisecond))
	fmt.Fprintf(&line, "; POST-start-to-client p50 %v p99 %v max %v", devbundle.Percentile(latencies, .5).Round(time.Millisecond),
		devbundle.Percentile(latencies, .99).Round(time.Millisecond), devbundle.Percentile(latencies, 1).Round(time.Millisecond))
	// Where the machine's time went while the events were sent and delivered.
	fmt.Fprintf(&line, "; CPU per event: server %v, load generator %v, whole machine %v", serverCPU.Round(time.Millisecond), ownCPU.Round(time.Millisecond), machineCPU.Round(time.Millisecond))
	if postFailures > 0 {
		fmt.Fprintf(&line, "; %d POSTs failed, first: %v", postFailures, postErr)
	}
	return line.String(), outcome{p99: devbundle.Percentile(commitLatencies, .99), lost: p.clients*expected - received}, nil
}
