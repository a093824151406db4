package wshub

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/gorilla/websocket"

	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/wshub/closecode"
)

// maxClientFrame bounds what a client may send: its messages are small JSON pings.
const maxClientFrame = 4096

// closeGrace is how long the connection waits for the client to answer a close frame
// before it drops it.
const closeGrace = time.Second

// frame is one server frame as it goes on the wire, built once and shared by every
// connection it is sent to. Server frames are never masked (RFC 6455 §5.1), so the bytes
// are the same for all of them.
type frame struct {
	wire []byte
	// delivery is set for event frames: the first connection to write it records it in
	// the config's delivery log.
	delivery *delivery
}

// newFrame frames a whole message of one opcode.
func newFrame(opcode byte, payload []byte) *frame { return &frame{wire: encodeFrame(opcode, payload)} }

// encodeFrame puts a whole message of one opcode on the wire (RFC 6455 §5.2).
func encodeFrame(opcode byte, payload []byte) []byte {
	var head [10]byte
	head[0] = 0x80 | opcode // FIN: every message is one frame
	n := 2
	switch l := len(payload); {
	case l < 126:
		head[1] = byte(l)
	case l <= 0xffff:
		head[1] = 126
		binary.BigEndian.PutUint16(head[2:], uint16(l))
		n = 4
	default:
		head[1] = 127
		binary.BigEndian.PutUint64(head[2:], uint64(l))
		n = 10
	}
	wire := make([]byte, 0, n+len(payload))
	return append(append(wire, head[:n]...), payload...)
}

func textFrame(payload []byte) *frame { return newFrame(websocket.TextMessage, payload) }

func closeFrame(code int, reason string) *frame {
	return newFrame(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason))
}

// pingFrame is the keepalive protocol ping, offered to every connection each interval.
var pingFrame = newFrame(websocket.PingMessage, nil)

type closeRequest struct {
	code   int
	reason string
}

// conn is one live client. Its reader goroutine only reads. Frames are written without a
// goroutine of the connection's own: whoever offers a frame (the event fan-out, the keepalive
// ticker, the reader answering a ping) writes it straight into the socket with one
// non-blocking call, or, in a fan-out, one send of a batch (see offerChunk). Only when the
// socket is full does a flusher goroutine take over: it waits for room, under a write
// timeout, and writes what queued up meanwhile, in order. At 10,000 connections this saves
// a goroutine wake-up per frame, the larger part of a fan-out's user time, and a goroutine
// stack per idle connection.
//
// So there are several writers, not the one writer per connection the usual design has;
// this invariant makes them safe: one party at a time writes to the socket — a holder of
// mu while flushing is false, with one non-blocking write that never waits, or else the
// flusher, while flushing is true, during which every offer only joins the backlog. A
// frame the socket took only part of becomes head, which the flusher writes first. Frames
// therefore reach the wire whole and in the order they were offered
// (TestConcurrentWritersKeepFramesWholeAndInOrder).
type conn struct {
	hub *Hub
	// ws reads; it cannot write (see libraryConn). out is the connection the flusher
	// writes to.
	ws           *websocket.Conn
	out          net.Conn
	configID     string
	credentialID string
	// wallets, when not nil, are the only wallets whose events it receives; device marks
	// a signing device's connection, and signingOnly one that receives nothing else (see
	// events.Recipient).
	wallets             map[string]bool
	device, signingOnly bool
	// pingSlot is the tick of the ping interval on which the keepalive pings it.
	pingSlot uint32
	// fd is the socket's descriptor for non-blocking writes (one at a time, or through the
	// send ring); -1 when out is not plain TCP, and every write then goes through the
	// flusher. It stays open while mu is held and the connection has not ended: end marks
	// it ended under mu before it closes the socket.
	fd int32

	mu sync.Mutex
	// flushing: a flusher goroutine owns the socket; new frames join backlog. head goes
	// before anything else, a close frame included: connection.ready, or the unwritten
	// tail of a frame the socket took only part of.
	flushing bool
	head     []byte
	headOf   *frame
	backlog  []*frame
	// closeReq, once set, has the flusher finish a partly written frame, send this
	// close frame and end the connection; nothing else is written after it.
	closeReq *closeRequest
	// broken: a write failed; the connection is being ended.
	broken bool

	ended   atomic.Bool
	done    chan struct{}
	endOnce sync.Once
	// closeWritten and peerClosed: our close frame is written, the client's is read.
	// Whichever side sees both ends the connection at once.
	closeWritten, peerClosed atomic.Bool
	// sent counts the frames written whole, for the hub's Stats: a counter of the
	// connection's own, so that the fan-out's goroutines never share one.
	sent atomic.Uint64
}

func newConn(h *Hub, ws *websocket.Conn, out net.Conn, configID string, peer events.Recipient) *conn {
	c := &conn{hub: h, ws: ws, out: out, configID: configID, credentialID: peer.CredentialID, device: peer.SigningDevice,
		signingOnly: peer.SigningOnly, fd: -1, done: make(chan struct{})}
	if len(peer.Wallets) > 0 {
		c.wallets = make(map[string]bool, len(peer.Wallets))
		for _, w := range peer.Wallets {
			c.wallets[w] = true
		}
	}
	// Only a plain TCP socket is written to directly: under TLS the bytes must go through
	// the TLS layer.
	if tcp, ok := out.(*net.TCPConn); ok {
		if raw, err := tcp.SyscallConn(); err == nil {
			_ = raw.Control(func(fd uintptr) { c.fd = int32(fd) })
		}
	}
	return c
}

// reaches reports whether an event of this wallet ("" for none) is within the
// connection's wallet restriction.
func (c *conn) reaches(walletID string) bool {
	return c.wallets == nil || walletID == "" || c.wallets[walletID]
}

// offer writes a frame now if the socket takes it, and never waits: a frame that does not
// fit waits in the backlog for the flusher, and a client whose backlog is full is too slow
// and is closed, so it never holds up the others.
func (c *conn) offer(f *frame) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.admitLocked(f) {
		c.writeLocked(f)
	}
}

// admitLocked reports whether a frame is to be written into the socket now. If not, it
// joined the backlog behind the flusher, or was dropped: the connection is closing, or
// its full backlog has just closed it as too slow. Call with c.mu held.
func (c *conn) admitLocked(f *frame) bool {
	if c.closeReq != nil || c.broken || c.ended.Load() {
		return false
	}
	if c.flushing {
		if len(c.backlog) >= c.hub.opts.SendQueue {
			c.requestCloseLocked(closecode.TooSlow, "too slow")
			return false
		}
		c.backlog = append(c.backlog, f)
		return false
	}
	return true
}

// writeLocked makes one non-blocking write of an admitted frame. Call with c.mu held.
func (c *conn) writeLocked(f *frame) {
	n, err := c.tryWrite(f.wire)
	c.wroteLocked(f, n, err)
}

// wroteLocked acts on the outcome of a non-blocking write of an admitted frame, n bytes
// written or err: the frame is delivered, or the connection is broken, or the flusher
// takes over with the rest. Call with c.mu held.
func (c *conn) wroteLocked(f *frame, n int, err error) {
	switch {
	case err == nil && n == len(f.wire):
		c.sent.Add(1)
		c.hub.delivered(f.delivery)
	case err != nil && !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.EINTR):
		// Ending takes the hub's lock, which the caller may hold: another goroutine does
		// it, counted like the connection's others.
		c.broken = true
		c.hub.connections.Add(1)
		go func() { defer c.hub.connections.Done(); c.end() }()
	default:
		c.head, c.headOf = f.wire[n:], f
		c.startFlusherLocked()
	}
}

// tryWrite makes one non-blocking write. Call with c.mu held: that keeps the socket open
// (see fd).
//
// It is a raw system call: the socket is non-blocking, so the call never waits, and
// telling the scheduler about it (as syscall.Write does) only costs. Measured at 10,000
// connections, a P left in a system call that long is taken back by the runtime's
// monitor and handed to another thread, and the fan-out's goroutine then waits for a P
// of its own: a context switch per frame, and the monitor polling every 20 µs.
func (c *conn) tryWrite(b []byte) (int, error) {
	if c.fd < 0 {
		return 0, syscall.EAGAIN
	}
	n, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(c.fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

func (c *conn) startFlusherLocked() {
	if c.flushing {
		return
	}
	c.flushing = true
	// Counted before end() can run (it takes c.mu), so Shutdown's wait covers it.
	c.hub.connections.Add(1)
	go func() { defer c.hub.connections.Done(); c.flush() }()
}

// flush owns the socket until it has written everything that queued up: first the head,
// then a close frame if one is asked for, else the backlog.
func (c *conn) flush() {
	for {
		c.mu.Lock()
		if c.ended.Load() {
			c.mu.Unlock()
			return
		}
		var (
			wire []byte
			f    *frame
		)
		switch {
		case c.head != nil:
			wire, f = c.head, c.headOf
			c.head, c.headOf = nil, nil
		case c.closeReq != nil:
			// A close request goes before the backlog: a client evicted as too slow must
			// not be fed the backlog first.
			req := *c.closeReq
			c.mu.Unlock()
			c.writeClose(req)
			c.end()
			return
		case len(c.backlog) > 0:
			f = c.backlog[0]
			wire = f.wire
			c.backlog[0] = nil
			if c.backlog = c.backlog[1:]; len(c.backlog) == 0 {
				c.backlog = nil
			}
		default:
			// The socket is the offerers' again: their non-blocking writes must not find
			// this write timeout, long past by then.
			_ = c.out.SetWriteDeadline(time.Time{})
			c.flushing = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		_ = c.out.SetWriteDeadline(time.Now().Add(c.hub.opts.WriteTimeout))
		if _, err := c.out.Write(wire); err != nil {
			c.end()
			return
		}
		c.sent.Add(1)
		c.hub.delivered(f.delivery)
	}
}

// close asks for a close frame and the end of the connection. Only the first request
// counts.
func (c *conn) close(code int, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requestCloseLocked(code, reason)
}

func (c *conn) requestCloseLocked(code int, reason string) {
	if c.closeReq != nil || c.broken || c.ended.Load() {
		return
	}
	c.closeReq = &closeRequest{code: code, reason: reason}
	c.startFlusherLocked()
}

// end drops the connection and unregisters it. Safe to call more than once.
func (c *conn) end() {
	c.endOnce.Do(func() {
		c.mu.Lock()
		c.ended.Store(true)
		// The close code it ends with, for the hub's Stats: the one asked for (by the
		// service, or the client's echoed), or 1006 when none was.
		code := websocket.CloseAbnormalClosure
		if c.closeReq != nil {
			code = c.closeReq.code
		}
		c.mu.Unlock()
		close(c.done)
		_ = c.ws.Close()
		c.hub.unregister(c, code)
	})
}

// readLoop reads client frames until the connection ends. A client shows it is alive by
// answering the protocol ping or by any frame of its own: the seed's text {"type":"ping"}
// exists for clients that cannot answer protocol pings (browsers' WebSocket API gives no
// access to them). One that does neither lets the read deadline pass, which ends it.
func (c *conn) readLoop() {
	defer c.end()
	wait := c.hub.opts.PingInterval + c.hub.opts.PongWait
	alive := func() error { return c.ws.SetReadDeadline(time.Now().Add(wait)) }
	c.ws.SetReadLimit(maxClientFrame)
	_ = alive()
	c.ws.SetPongHandler(func(string) error { return alive() })
	c.ws.SetPingHandler(func(data string) error {
		c.offer(newFrame(websocket.PongMessage, []byte(data)))
		return alive()
	})
	c.ws.SetCloseHandler(func(code int, _ string) error {
		if code == websocket.CloseNoStatusReceived {
			code = websocket.CloseNormalClosure
		}
		c.close(code, "")
		return nil
	})
	for {
		kind, data, err := c.ws.ReadMessage()
		if err != nil {
			var (
				ce *websocket.CloseError
				ne net.Error
			)
			switch {
			case errors.As(err, &ce):
				// The handshake is over once both close frames have passed. If ours is not
				// written yet (the client closed first), give the flusher a moment for it.
				c.peerClosed.Store(true)
				if !c.closeWritten.Load() {
					c.awaitEnd()
				}
			case errors.Is(err, websocket.ErrReadLimit):
				c.refuse(websocket.CloseMessageTooBig, "")
			case !errors.As(err, &ne):
				// Not the network: the library found the client's frames malformed.
				c.refuse(websocket.CloseProtocolError, "protocol error")
			}
			return
		}
		_ = alive()
		if kind != websocket.TextMessage {
			continue
		}
		var msg struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(data, &msg) == nil && msg.Type == "ping" {
			c.offer(c.hub.pongFrame)
		}
	}
}

// refuse closes the connection of a client that broke the protocol, with the close frame
// the WebSocket library would have sent. Nothing more is read, so no answer is awaited.
func (c *conn) refuse(code int, reason string) {
	c.peerClosed.Store(true)
	c.close(code, reason)
	c.awaitEnd()
}

// awaitEnd gives the flusher a moment to write the close frame and end the connection.
func (c *conn) awaitEnd() {
	select {
	case <-c.done:
	case <-time.After(closeGrace):
	}
}

// writeClose sends the close frame and waits a moment for the client's answer (the
// reader then ends the connection). The frame queues behind what the socket still holds,
// so a slow client gets the write timeout to read up to it.
func (c *conn) writeClose(req closeRequest) {
	_ = c.out.SetWriteDeadline(time.Now().Add(c.hub.opts.WriteTimeout))
	if _, err := c.out.Write(closeFrame(req.code, req.reason).wire); err != nil {
		return
	}
	c.sent.Add(1)
	c.closeWritten.Store(true)
	if !c.peerClosed.Load() {
		c.awaitEnd()
	}
}
