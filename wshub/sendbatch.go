package wshub

import (
	"errors"
	"log/slog"
	"sync"
	"syscall"
)

// sendChunk is how many offers a fan-out goroutine takes at a time, and how many sends
// one ring submission carries.
const sendChunk = 128

// sendBatch is a ring's scratch for one chunk: the connections whose frames go out in
// one submission, and the offers left for after it.
type sendBatch struct {
	conns  [sendChunk]*conn
	frames [sendChunk]*frame
	fds    [sendChunk]int32
	bufs   [sendChunk][]byte
	res    [sendChunk]int32
	later  [sendChunk]offerTo
}

// offerChunk makes a chunk of offers (at most sendChunk), writing the frames that can go
// now with one submission of the ring; the others take offer's path. It reports false
// when the ring failed and must not be used again.
//
// Each connection in the submission stays locked until its result is applied: nothing
// else writes into its socket meanwhile, and the socket stays open (end takes the lock
// before it closes it). A connection another goroutine holds is offered after the
// submission, when this goroutine holds no lock: two fan-outs (events and keepalive
// pings) never wait for each other's connections while holding their own.
func offerChunk(r *sendRing, chunk []offerTo) bool {
	b := &r.batch
	n, later := 0, 0
	for _, o := range chunk {
		c := o.c
		if !c.mu.TryLock() {
			b.later[later] = o
			later++
			continue
		}
		switch {
		case !c.admitLocked(o.f):
			c.mu.Unlock()
		case c.fd < 0:
			c.writeLocked(o.f)
			c.mu.Unlock()
		default:
			b.conns[n], b.frames[n], b.fds[n], b.bufs[n] = c, o.f, c.fd, o.f.wire
			n++
		}
	}
	ok := true
	if n > 0 {
		ok = r.send(b.fds[:n], b.bufs[:n], b.res[:n]) == nil
	}
	for i := range n {
		c, f, res := b.conns[i], b.frames[i], b.res[i]
		switch errno := syscall.Errno(-res); {
		case res >= 0:
			c.wroteLocked(f, int(res), nil)
		case res == notSubmitted:
			c.writeLocked(f)
		case res == unknownSend:
			// Whether the socket took any of the frame is unknown: the stream cannot go on.
			c.wroteLocked(f, 0, syscall.EIO)
		case errno == syscall.EAGAIN || errno == syscall.EINTR || socketError(errno):
			c.wroteLocked(f, 0, errno)
		default:
			// The ring refused the send, not the socket: write it the plain way, and
			// give the ring up.
			c.writeLocked(f)
			ok = false
		}
		c.mu.Unlock()
		b.conns[i], b.frames[i], b.bufs[i] = nil, nil, nil
	}
	for i := range later {
		b.later[i].c.offer(b.later[i].f)
		b.later[i] = offerTo{}
	}
	return ok
}

// Results of a send that the ring could not make: notSubmitted never reached the kernel;
// unknownSend did, and what became of it is not known.
const (
	notSubmitted = int32(-1 << 31)
	unknownSend  = notSubmitted + 1
)

// errRingUnsupported: no send ring will ever work in this process.
var errRingUnsupported = errors.New("io_uring sends unsupported")

// sendRings lends send rings to the fan-out's goroutines, making them as needed. If the
// kernel refuses one, or one fails, no ring is lent again: every frame is then written
// with its own system call.
type sendRings struct {
	log *slog.Logger

	mu       sync.Mutex
	free     []*sendRing
	disabled bool
	warned   bool
}

func (p *sendRings) get() *sendRing {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.disabled {
		return nil
	}
	if n := len(p.free); n > 0 {
		r := p.free[n-1]
		p.free = p.free[:n-1]
		return r
	}
	r, err := newSendRing()
	switch {
	case err == nil:
		return r
	case errors.Is(err, errRingUnsupported):
		p.disabled = true
		p.log.Info("websocket hub: frames are written one system call each", "reason", err)
	case !p.warned:
		// Out of descriptors or locked memory, say: this fan-out writes frame by frame,
		// and a later one tries again.
		p.warned = true
		p.log.Warn("websocket hub: no send ring for now; frames are written one system call each until one can be made", "error", err)
	}
	return nil
}

func (p *sendRings) put(r *sendRing) {
	if r == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.disabled {
		r.close()
		return
	}
	p.free = append(p.free, r)
}

// discard closes a ring that failed and stops lending rings.
func (p *sendRings) discard(r *sendRing) {
	r.close()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.disabled {
		p.log.Error("websocket hub: an io_uring send failed; frames are now written one system call each")
	}
	p.disable()
}

// closeAll closes the idle rings and lends no more.
func (p *sendRings) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.disable()
}

// disable stops lending rings and closes the idle ones; a lent ring is closed when it
// is put back. Call with p.mu held.
func (p *sendRings) disable() {
	p.disabled = true
	for _, r := range p.free {
		r.close()
	}
	p.free = nil
}
