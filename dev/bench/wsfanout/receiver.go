package main

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

// The load generator shares the server's two cores, so whatever it spends per frame is
// taken from the server it measures. A reader goroutine per connection costs a netpoller
// wake-up, a goroutine switch and two read calls (the second one finds nothing) for every
// frame. Here a few receivers, one per core, watch all the sockets through epoll
// (level-triggered) instead: one read call per ready socket, frames parsed in place,
// nothing allocated. The WebSocket handshake and connection.ready still go through
// gorilla; the receivers take over the sockets after that.

// wsClient is one connection. Its receiver is the only writer of recv; n publishes how
// many receipts are valid, so the main goroutine can follow progress with an atomic load.
type wsClient struct {
	fd int
	// pending holds the start of a frame whose end has not arrived yet.
	pending []byte
	recv    []receipt
	n       atomic.Int32
	// overflow counts event frames past recv's capacity; foreign counts event frames
	// whose correlation id is not one of this run's.
	overflow, foreign atomic.Int32
	done              chan struct{}
	// Set before done is closed: the close code the server sent (0 for none) and, for
	// an end without a close frame, why.
	closeCode int
	err       error
}

// ended reports whether the connection has ended, without waiting.
func (c *wsClient) ended() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// detach takes the socket out of a gorilla connection that has read connection.ready:
// a duplicate descriptor the Go runtime does not poll, the original closed.
func detach(ws *websocket.Conn) (int, error) {
	tcp, ok := ws.NetConn().(*net.TCPConn)
	if !ok {
		return -1, errors.New("not a TCP connection")
	}
	raw, err := tcp.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var dupErr error
	if err := raw.Control(func(s uintptr) { fd, dupErr = syscall.Dup(int(s)) }); err != nil {
		return -1, err
	}
	if dupErr != nil {
		return -1, dupErr
	}
	// Closing the original only drops that descriptor: the socket stays open through fd.
	_ = tcp.Close()
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	return fd, nil
}

// receiver reads the frames of its share of the clients. Its epoll events carry the
// client's index in clients.
type receiver struct {
	epfd    int
	clients []*wsClient
	base    time.Time
	prefix  []byte
	events  int
	// poll, when set, is how long the receiver sleeps when no socket is ready, instead
	// of blocking in epoll_wait until one is.
	poll time.Duration
	// stamps holds, for each event, its occurredAt (Unix ns) as the first frame of it
	// to arrive on any receiver says; 0 until then.
	stamps []atomic.Int64
}

// startReceivers spreads clients over n receivers and starts them; stop ends them.
func startReceivers(n int, poll time.Duration, clients []*wsClient, base time.Time, prefix string, stamps []atomic.Int64) (stop func(), err error) {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	var started []*receiver
	stop = func() {
		close(quit)
		wg.Wait()
		for _, r := range started {
			syscall.Close(r.epfd)
		}
	}
	for i := range n {
		epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
		if err != nil {
			stop()
			return nil, err
		}
		r := &receiver{epfd: epfd, clients: clients, base: base, prefix: []byte(prefix), events: len(stamps), poll: poll, stamps: stamps}
		started = append(started, r)
		for j := i; j < len(clients); j += n {
			c := clients[j]
			ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: int32(j)}
			if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, c.fd, &ev); err != nil {
				stop()
				return nil, fmt.Errorf("epoll_ctl: %w", err)
			}
		}
	}
	for _, r := range started {
		wg.Go(func() { r.run(quit) })
	}
	return stop, nil
}

func (r *receiver) run(quit <-chan struct{}) {
	ready := make([]syscall.EpollEvent, 512)
	buf := make([]byte, 64<<10)
	for {
		select {
		case <-quit:
			return
		default:
		}
		wait := 100 // ms: a bounded wait, so that stop is noticed on an idle machine too
		if r.poll > 0 {
			wait = 0
		}
		n, err := syscall.EpollWait(r.epfd, ready, wait)
		if err != nil {
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			panic(fmt.Sprintf("epoll_wait: %v", err))
		}
		if n == 0 && r.poll > 0 {
			time.Sleep(r.poll)
			continue
		}
		for _, ev := range ready[:n] {
			c := r.clients[ev.Fd]
			if c.ended() {
				continue
			}
			k, err := syscall.Read(c.fd, buf)
			// Taken before looking at the bytes: the latency is the server's and the network's.
			at := time.Since(r.base)
			switch {
			case errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR):
				continue
			case err != nil:
				r.end(c, 0, err)
				continue
			case k == 0:
				r.end(c, 0, errors.New("connection closed without a close frame"))
				continue
			}
			data := buf[:k]
			if len(c.pending) > 0 {
				data = append(c.pending, data...)
			}
			rest := r.frames(c, data, at)
			// The bytes of an unfinished frame are copied out: buf is reused.
			c.pending = append(c.pending[:0], rest...)
		}
	}
}

// frames handles every whole frame in data and returns what is left of an unfinished one.
func (r *receiver) frames(c *wsClient, data []byte, at time.Duration) []byte {
	for !c.ended() {
		op, payload, size, err := parseFrame(data)
		if err != nil {
			r.end(c, 0, err)
			return nil
		}
		if size == 0 {
			return data
		}
		data = data[size:]
		switch op {
		case websocket.TextMessage:
			r.record(c, payload, at)
		case websocket.PingMessage:
			if err := writeClientFrame(c.fd, websocket.PongMessage, payload); err != nil {
				r.end(c, 0, fmt.Errorf("pong: %w", err))
			}
		case websocket.CloseMessage:
			code := websocket.CloseNoStatusReceived
			if len(payload) >= 2 {
				code = int(binary.BigEndian.Uint16(payload))
			}
			r.end(c, code, nil)
		}
	}
	return nil
}

// record notes an event frame of this run.
func (r *receiver) record(c *wsClient, msg []byte, at time.Duration) {
	if !bytes.HasPrefix(msg, eventFramePrefix) {
		return
	}
	i, ok := r.eventIndex(msg)
	if !ok {
		c.foreign.Add(1)
		return
	}
	if r.stamps[i].Load() == 0 {
		if t, ok := occurredAt(msg); ok {
			r.stamps[i].CompareAndSwap(0, t.UnixNano())
		}
	}
	k := int(c.n.Load())
	if k == len(c.recv) {
		c.overflow.Add(1)
		return
	}
	c.recv[k] = receipt{event: int32(i), at: at}
	c.n.Store(int32(k + 1))
}

// end stops watching a connection; its descriptor is closed by closeAll.
func (r *receiver) end(c *wsClient, closeCode int, err error) {
	_ = syscall.EpollCtl(r.epfd, syscall.EPOLL_CTL_DEL, c.fd, nil)
	c.closeCode, c.err = closeCode, err
	close(c.done)
}

// eventFramePrefix starts every event frame (the server writes type first).
var eventFramePrefix = []byte(`{"type":"event"`)

var correlationKey = []byte(`"correlationId":"`)

// atKey is the event frame's occurredAt, which follows type and event (SPEC 4).
var atKey = []byte(`"at":"`)

// occurredAt reads the moment an event frame says its event occurred: stamped in the
// transaction that commits the event, to the millisecond.
func occurredAt(frame []byte) (time.Time, bool) {
	i := bytes.Index(frame, atKey)
	if i < 0 {
		return time.Time{}, false
	}
	rest := frame[i+len(atKey):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, string(rest[:j]))
	return t, err == nil
}

// eventIndex finds which of this run's events a frame carries, from its correlation id
// (the run's prefix and the event's index), without allocating.
func (r *receiver) eventIndex(frame []byte) (int, bool) {
	i := bytes.Index(frame, correlationKey)
	if i < 0 {
		return 0, false
	}
	rest := frame[i+len(correlationKey):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 || !bytes.HasPrefix(rest[:j], r.prefix) {
		return 0, false
	}
	digits := rest[len(r.prefix):j]
	if len(digits) == 0 || len(digits) > 9 {
		return 0, false
	}
	n := 0
	for _, d := range digits {
		if d < '0' || d > '9' {
			return 0, false
		}
		n = n*10 + int(d-'0')
	}
	return n, n < r.events
}

// parseFrame reads one server frame (RFC 6455 §5.2: never masked) from the start of data.
// size is 0 while the frame is incomplete. The server sends every message as one frame,
// so a fragment is an error here.
func parseFrame(data []byte) (op int, payload []byte, size int, err error) {
	if len(data) < 2 {
		return 0, nil, 0, nil
	}
	if data[0]&0x80 == 0 || data[0]&0x0f == 0 {
		return 0, nil, 0, errors.New("fragmented frame")
	}
	if data[1]&0x80 != 0 {
		return 0, nil, 0, errors.New("masked frame from the server")
	}
	op = int(data[0] & 0x0f)
	header, length := 2, uint64(data[1]&0x7f)
	switch length {
	case 126:
		if len(data) < 4 {
			return 0, nil, 0, nil
		}
		header, length = 4, uint64(binary.BigEndian.Uint16(data[2:]))
	case 127:
		if len(data) < 10 {
			return 0, nil, 0, nil
		}
		header, length = 10, binary.BigEndian.Uint64(data[2:])
	}
	if length > 1<<20 {
		return 0, nil, 0, fmt.Errorf("frame of %d bytes", length)
	}
	if uint64(len(data)-header) < length {
		return 0, nil, 0, nil
	}
	size = header + int(length)
	return op, data[header:size], size, nil
}

// writeClientFrame writes one small masked frame (a pong or a close) with a single call.
func writeClientFrame(fd, op int, payload []byte) error {
	if len(payload) > 125 {
		return errors.New("control payload too long")
	}
	frame := make([]byte, 6+len(payload))
	frame[0] = 0x80 | byte(op)
	frame[1] = 0x80 | byte(len(payload))
	if _, err := rand.Read(frame[2:6]); err != nil {
		return err
	}
	for i, b := range payload {
		frame[6+i] = b ^ frame[2+i%4]
	}
	n, err := syscall.Write(fd, frame)
	if err == nil && n < len(frame) {
		err = errors.New("short write")
	}
	return err
}
