package wshub

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/opentreasury/treasury/dev/wait"
	"github.com/opentreasury/treasury/internal/events"
)

func newRingOrSkip(t *testing.T) *sendRing {
	t.Helper()
	r, err := newSendRing()
	if err != nil {
		t.Skipf("no send ring on this kernel: %v", err)
	}
	t.Cleanup(r.close)
	return r
}

// tcpPairs opens n loopback connections and returns both ends of each.
func tcpPairs(t *testing.T, n int) (servers, clients []*net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for range n {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		servers, clients = append(servers, s.(*net.TCPConn)), append(clients, c.(*net.TCPConn))
		t.Cleanup(func() { c.Close(); s.Close() })
	}
	return servers, clients
}

func fdOf(t *testing.T, c *net.TCPConn) int32 {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fd int32
	if err := raw.Control(func(f uintptr) { fd = int32(f) }); err != nil {
		t.Fatal(err)
	}
	return fd
}

func readExactly(t *testing.T, c net.Conn, n int) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("reading %d bytes: %v", n, err)
	}
	return b
}

func TestSendRingWritesEachBufferIntoItsOwnSocket(t *testing.T) {
	r := newRingOrSkip(t)
	servers, clients := tcpPairs(t, sendChunk)
	fds := make([]int32, sendChunk)
	bufs := make([][]byte, sendChunk)
	res := make([]int32, sendChunk)
	for i := range sendChunk {
		fds[i] = fdOf(t, servers[i])
		bufs[i] = fmt.Appendf(nil, "frame for connection %d", i)
	}
	// Twice: the second submission reuses the ring's entries.
	for round := range 2 {
		if err := r.send(fds, bufs, res); err != nil {
			t.Fatal(err)
		}
		for i := range sendChunk {
			if int(res[i]) != len(bufs[i]) {
				t.Fatalf("round %d, send %d: result %d, want %d", round, i, res[i], len(bufs[i]))
			}
			if got := readExactly(t, clients[i], len(bufs[i])); !bytes.Equal(got, bufs[i]) {
				t.Fatalf("round %d, connection %d read %q, want %q", round, i, got, bufs[i])
			}
		}
	}
}

func TestSendRingReportsAFullSocketWithoutWaiting(t *testing.T) {
	r := newRingOrSkip(t)
	servers, clients := tcpPairs(t, 1)
	_ = servers[0].SetWriteBuffer(4096)
	_ = clients[0].SetReadBuffer(4096)
	fd := fdOf(t, servers[0])
	buf := bytes.Repeat([]byte("x"), 64<<10)
	res := make([]int32, 1)
	// The client never reads: within a few sends the socket is full, and a send must
	// then come back with EAGAIN instead of waiting for room.
	for i := range 100 {
		if err := r.send([]int32{fd}, [][]byte{buf}, res); err != nil {
			t.Fatal(err)
		}
		if res[0] == -int32(syscall.EAGAIN) {
			return
		}
		if res[0] <= 0 {
			t.Fatalf("send %d: result %d, want bytes written or -EAGAIN", i, res[0])
		}
	}
	t.Fatal("100 sends of 64 KiB into a socket nobody reads all went through")
}

func TestSendRingReportsABrokenSocket(t *testing.T) {
	r := newRingOrSkip(t)
	servers, clients := tcpPairs(t, 1)
	// A reset rather than a goodbye: the next send fails at once.
	_ = clients[0].SetLinger(0)
	clients[0].Close()
	fd := fdOf(t, servers[0])
	res := make([]int32, 1)
	wait.For(t, 5*time.Second, "a send into a reset socket to fail", func() bool {
		if err := r.send([]int32{fd}, [][]byte{[]byte("hello")}, res); err != nil {
			t.Fatal(err)
		}
		return res[0] < 0
	})
	if errno := syscall.Errno(-res[0]); !errors.Is(errno, syscall.ECONNRESET) && !errors.Is(errno, syscall.EPIPE) {
		t.Fatalf("send into a reset socket: %v, want ECONNRESET or EPIPE", errno)
	}
}

// testHub is a hub with what the fan-out needs and nothing else.
func testHub(t *testing.T) *Hub {
	h := &Hub{opts: Options{SendQueue: 32, WriteTimeout: 10 * time.Second}, rings: &sendRings{log: discardLog()}}
	t.Cleanup(h.rings.closeAll)
	return h
}

// testConns makes hub connections over real sockets, for the fan-out's own tests; the
// WebSocket reader side is not needed.
func testConns(t *testing.T, h *Hub, n int) ([]*conn, []*net.TCPConn) {
	servers, clients := tcpPairs(t, n)
	conns := make([]*conn, n)
	for i, s := range servers {
		conns[i] = newConn(h, nil, s, "wsc_test", events.Recipient{})
	}
	return conns, clients
}

func TestOfferAllWritesEveryFrameInOrder(t *testing.T) {
	for _, ring := range []bool{true, false} {
		t.Run(fmt.Sprintf("ring=%v", ring), func(t *testing.T) {
			h := testHub(t)
			if ring {
				newRingOrSkip(t) // skips where the kernel has none
			} else {
				h.rings.disabled = true
			}
			// Three chunks and a bit, over both of the fan-out's goroutines.
			conns, clients := testConns(t, h, 3*sendChunk+5)
			var frames []*frame
			for i := range 5 {
				frames = append(frames, textFrame(fmt.Appendf(nil, `{"n":%d}`, i)))
			}
			for _, f := range frames {
				h.offerEach(conns, f)
			}
			if got := len(h.rings.free) > 0; got != ring {
				t.Fatalf("rings lent and returned: %v, want %v", got, ring)
			}
			for i, cl := range clients {
				for _, f := range frames {
					if got := readExactly(t, cl, len(f.wire)); !bytes.Equal(got, f.wire) {
						t.Fatalf("connection %d read %q, want %q", i, got, f.wire)
					}
				}
			}
		})
	}
}

func TestOfferChunkLeavesABusyConnectionForAfterTheSubmission(t *testing.T) {
	r := newRingOrSkip(t)
	conns, clients := testConns(t, testHub(t), 3)
	f := textFrame([]byte(`{"type":"event"}`))
	chunk := []offerTo{{conns[0], f}, {conns[1], f}, {conns[2], f}}

	// Another goroutine holds the middle connection (a reader answering a ping, or the
	// other fan-out): the chunk must not wait for it while it holds the others.
	conns[1].mu.Lock()
	done := make(chan bool)
	go func() { done <- offerChunk(r, chunk) }()
	for _, i := range []int{0, 2} {
		if got := readExactly(t, clients[i], len(f.wire)); !bytes.Equal(got, f.wire) {
			t.Fatalf("connection %d read %q", i, got)
		}
	}
	select {
	case <-done:
		t.Fatal("the chunk finished before the busy connection was free")
	case <-time.After(50 * time.Millisecond):
	}
	conns[1].mu.Unlock()
	if ok := <-done; !ok {
		t.Fatal("the ring failed")
	}
	if got := readExactly(t, clients[1], len(f.wire)); !bytes.Equal(got, f.wire) {
		t.Fatalf("the busy connection read %q", got)
	}
}

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestOfferChunkHandsAPartlyWrittenFrameToTheFlusher(t *testing.T) {
	r := newRingOrSkip(t)
	conns, clients := testConns(t, testHub(t), 1)
	c, client := conns[0], clients[0]
	_ = c.out.(*net.TCPConn).SetWriteBuffer(4096)

	// Frames far larger than the sockets' buffers: the ring writes part of the first,
	// the flusher the rest, and the others queue behind it.
	var want []byte
	for i := range 4 {
		f := textFrame(bytes.Repeat([]byte{byte('a' + i)}, 1<<20))
		want = append(want, f.wire...)
		if !offerChunk(r, []offerTo{{c, f}}) {
			t.Fatal("the ring failed")
		}
	}
	c.mu.Lock()
	flushing, queued := c.flushing, len(c.backlog)
	c.mu.Unlock()
	if !flushing || queued != 3 {
		t.Fatalf("after a partial write: flushing %v with %d queued, want the flusher with 3", flushing, queued)
	}
	if got := readExactly(t, client, len(want)); !bytes.Equal(got, want) {
		t.Fatal("the bytes read are not the four frames in order")
	}
	wait.For(t, 5*time.Second, "the flusher to hand the socket back", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return !c.flushing
	})
}

func TestOfferChunkWritesTheFrameItselfWhenTheRingRefusesTheSend(t *testing.T) {
	r := newRingOrSkip(t)
	conns, clients := testConns(t, testHub(t), 1)
	// An operation the kernel does not know fails with EINVAL, as a send does where a
	// kernel or sandbox refuses it: a refusal by the ring, not by the client's socket,
	// which must not cost the client.
	r.op = 255
	f := textFrame([]byte(`{"type":"event"}`))
	if offerChunk(r, []offerTo{{conns[0], f}}) {
		t.Fatal("offerChunk reported the ring fine after it refused a send")
	}
	if got := readExactly(t, clients[0], len(f.wire)); !bytes.Equal(got, f.wire) {
		t.Fatalf("read %q", got)
	}
	if conns[0].broken || conns[0].ended.Load() {
		t.Fatal("the connection was ended for the ring's failure")
	}
}

func TestTwoFanOutsOverTheSameConnectionsDeliverBoth(t *testing.T) {
	newRingOrSkip(t)
	h := testHub(t)
	// As the event dispatcher and the keepalive pinger do: two fan-outs at once over the
	// same connections, each taking locks the other may hold.
	conns, clients := testConns(t, h, 2*sendChunk+7)
	event := textFrame([]byte(`{"type":"event"}`))
	ping := textFrame([]byte(`{"type":"ping!"}`)) // the same length: either order reads the same way
	var wg sync.WaitGroup
	for _, f := range []*frame{event, ping} {
		wg.Go(func() {
			for range 20 {
				h.offerEach(conns, f)
			}
		})
	}
	wg.Wait()
	for i, cl := range clients {
		counts := map[string]int{}
		for range 40 {
			counts[string(readExactly(t, cl, len(event.wire)))]++
		}
		if counts[string(event.wire)] != 20 || counts[string(ping.wire)] != 20 {
			t.Fatalf("connection %d read %d events and %d pings, want 20 of each", i, counts[string(event.wire)], counts[string(ping.wire)])
		}
	}
}
