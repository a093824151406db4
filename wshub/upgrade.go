package wshub

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// The hub writes every frame of a connection itself (see conn), straight into the socket
// or from a flusher. The WebSocket library would write one frame on its own: a close after
// a client's protocol error, from the reader, under deadlines of its own. Such a write
// could land between the parts of a frame, hold the socket's write lock while an offer
// waits for it, or run without a deadline once the flusher has cleared its own. So after
// the handshake the library gets a connection it cannot write to, and the reader sends
// those close frames through the hub instead.

// errHubWrites is what the library's own writes get after the handshake.
var errHubWrites = errors.New("wshub: frames are written by the hub")

// libraryConn is the connection as the WebSocket library sees it.
type libraryConn struct {
	net.Conn
	upgraded atomic.Bool
}

func (l *libraryConn) Write(b []byte) (int, error) {
	if l.upgraded.Load() {
		return 0, errHubWrites
	}
	return l.Conn.Write(b)
}

func (l *libraryConn) SetWriteDeadline(t time.Time) error {
	if l.upgraded.Load() {
		return nil
	}
	return l.Conn.SetWriteDeadline(t)
}

// hijacker hands the library a libraryConn when it takes over the HTTP connection.
type hijacker struct {
	http.ResponseWriter
	conn *libraryConn
}

func (h *hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	h.conn = &libraryConn{Conn: c}
	return h.conn, brw, nil
}
