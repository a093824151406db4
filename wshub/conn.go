package wshub

import (
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/opentreasury/treasury/events"
)

// maxClientFrame bounds what a client may send: its messages are small JSON pings.
const maxClientFrame = 4096

// closeGrace is how long the writer waits for the client to answer a close frame
// before it drops the connection.
const closeGrace = time.Second

// outgoing is one frame for the writer.
type outgoing struct {
	msg *websocket.PreparedMessage
	// delivery is set for event frames: the first connection to write it records it
	// in the config's delivery log.
	delivery *delivery
	// pong answers a client's protocol ping with its payload.
	pong    bool
	payload []byte
	// ping is the keepalive protocol ping.
	ping bool
}

type closeRequest struct {
	code   int
	reason string
}

// conn is one live client. Its reader goroutine only reads and its writer goroutine is
// the only one that writes; the hub talks to the writer through send, and asks it to close
// through closeReq (and a wake-up frame on send).
type conn struct {
	hub          *Hub
	ws           *websocket.Conn
	configID     string
	credentialID string

	// ready is the connection.ready frame, always the first one written.
	ready *websocket.PreparedMessage
	send  chan *outgoing
	// closeReq, once set, has the writer send this close frame next and end.
	closeReq atomic.Pointer[closeRequest]
	ended    atomic.Bool
	done     chan struct{}

	closeOnce sync.Once
	endOnce   sync.Once
	// closeWritten and peerClosed: our close frame is written, the client's is read.
	// Whichever side sees both ends the connection at once.
	closeWritten, peerClosed atomic.Bool
}

func newConn(h *Hub, ws *websocket.Conn, configID, credentialID string) *conn {
	return &conn{hub: h, ws: ws, configID: configID, credentialID: credentialID,
		send: make(chan *outgoing, h.opts.SendQueue), done: make(chan struct{})}
}

// enqueue hands a frame to the writer without ever waiting: a client whose queue is
// full is too slow and is closed, so it never holds up the others.
func (c *conn) enqueue(o *outgoing) {
	if c.closing() {
		return
	}
	select {
	case c.send <- o:
	default:
		c.close(events.CloseTooSlow, "too slow")
	}
}

// closing reports whether the connection is being closed or has ended: it takes no
// more frames.
func (c *conn) closing() bool { return c.closeReq.Load() != nil || c.ended.Load() }

// close asks the writer to send a close frame and end the connection. Only the first
// request counts.
func (c *conn) close(code int, reason string) {
	c.closeOnce.Do(func() {
		c.closeReq.Store(&closeRequest{code: code, reason: reason})
		c.wake()
	})
}

// end drops the connection and unregisters it. Safe to call more than once.
func (c *conn) end() {
	c.endOnce.Do(func() {
		c.ended.Store(true)
		close(c.done)
		c.wake()
		_ = c.ws.Close()
		c.hub.unregister(c)
	})
}

// readLoop reads client frames until the connection ends. A missing pong lets the read
// deadline pass, which ends it.
func (c *conn) readLoop() {
	defer c.end()
	wait := c.hub.opts.PingInterval + c.hub.opts.PongWait
	c.ws.SetReadLimit(maxClientFrame)
	_ = c.ws.SetReadDeadline(time.Now().Add(wait))
	c.ws.SetPongHandler(func(string) error {
		return c.ws.SetReadDeadline(time.Now().Add(wait))
	})
	c.ws.SetPingHandler(func(data string) error {
		c.enqueue(&outgoing{pong: true, payload: []byte(data)})
		return nil
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
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				// The handshake is over once both close frames have passed. If ours is not
				// written yet (the client closed first), give the writer a moment for it.
				c.peerClosed.Store(true)
				if !c.closeWritten.Load() {
					select {
					case <-c.done:
					case <-time.After(closeGrace):
					}
				}
			}
			return
		}
		if kind != websocket.TextMessage {
			continue
		}
		var msg struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(data, &msg) == nil && msg.Type == "ping" {
			c.enqueue(&outgoing{msg: c.hub.pongFrame})
		}
	}
}

// wakeFrame carries nothing: it wakes an idle writer to look at closeReq and ended.
var wakeFrame = &outgoing{}

// wake nudges the writer. When the queue is full the writer is busy, and it looks at its
// flags before it takes the next frame.
func (c *conn) wake() {
	select {
	case c.send <- wakeFrame:
	default:
	}
}

// writeLoop is the only writer: frames from the queue (keepalive pings included), then
// the close frame when asked. It waits on one channel only: it runs once per frame per
// connection, which at 10,000 connections is most of a fan-out's user time.
func (c *conn) writeLoop() {
	defer c.end()
	timeout := c.hub.opts.WriteTimeout
	_ = c.ws.SetWriteDeadline(time.Now().Add(timeout))
	if err := c.ws.WritePreparedMessage(c.ready); err != nil {
		return
	}
	c.ready = nil
	for {
		if c.ended.Load() {
			return
		}
		// A close request goes before queued frames: a client evicted as too slow must
		// not be fed the backlog first.
		if req := c.closeReq.Load(); req != nil {
			c.writeClose(*req)
			return
		}
		o := <-c.send
		if o == wakeFrame || c.closing() {
			continue
		}
		var err error
		switch {
		case o.ping:
			err = c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(timeout))
		case o.pong:
			err = c.ws.WriteControl(websocket.PongMessage, o.payload, time.Now().Add(timeout))
		default:
			_ = c.ws.SetWriteDeadline(time.Now().Add(timeout))
			err = c.ws.WritePreparedMessage(o.msg)
		}
		if err != nil {
			return
		}
		if o.delivery != nil {
			c.hub.delivered(o.delivery)
		}
	}
}

// writeClose sends the close frame and waits a moment for the client's answer (the
// reader then ends the connection). The frame queues behind what the socket still holds,
// so a slow client gets the write timeout to read up to it.
func (c *conn) writeClose(req closeRequest) {
	msg := websocket.FormatCloseMessage(req.code, req.reason)
	if err := c.ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(c.hub.opts.WriteTimeout)); err != nil {
		return
	}
	c.closeWritten.Store(true)
	if c.peerClosed.Load() {
		return
	}
	select {
	case <-c.done:
	case <-time.After(closeGrace):
	}
}
