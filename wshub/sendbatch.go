package wshub

import (
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
		switch {
		case res >= 0:
			c.wroteLocked(f, int(res), nil)
		case res == unknownSend:
			// Whether the socket took any of the frame is unknown: the stream cannot go on.
			c.wroteLocked(f, 0, syscall.EIO)
		default:
			c.wroteLocked(f, 0, syscall.Errno(-res))
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

// unknownSend marks a send whose outcome the ring could not report.
const unknownSend = int32(-1 << 31)

// sendRings lends send rings to the fan-out's goroutines, making them as needed. If the
// kernel refuses one, or one fails, no ring is lent again: every frame is then written
// with its own system call.
type sendRings struct {
	log *slog.Logger

	mu       sync.Mutex
	free     []*sendRing
	disabled bool
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
	if err != nil {
		p.disabled = true
		p.log.Info("websocket hub: frames are written one system call each", "reason", err)
		return nil
	}
	return r
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
		p.disabled = true
		p.log.Error("websocket hub: io_uring send failed; frames are now written one system call each")
	}
}

// closeAll closes the idle rings and lends no more.
func (p *sendRings) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.disabled = true
	for _, r := range p.free {
		r.close()
	}
	p.free = nil
}
