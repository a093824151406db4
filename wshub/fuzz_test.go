package wshub_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/wshub"
)

// fuzzStore serves every config as enabled and keeps nothing.
type fuzzStore struct{}

func (fuzzStore) WebSocketSubscription(_ context.Context, id string) (*events.Subscription, error) {
	return &events.Subscription{ID: id, App: "pay", Entries: []string{"*"}, Enabled: true}, nil
}
func (fuzzStore) CredentialRevoked(context.Context, string) (bool, error)  { return false, nil }
func (fuzzStore) RecordDeliveries(context.Context, []wshub.Delivery) error { return nil }
func (fuzzStore) SetWebSocketPresence(context.Context, string, map[string]int, time.Time) error {
	return nil
}
func (fuzzStore) WebSocketPresence(context.Context, []string, string, time.Time) (map[string]int, error) {
	return nil, nil
}
func (fuzzStore) DeleteStalePresence(context.Context, time.Time) error { return nil }

// The rules the model below restates: client messages are at most 4,096 bytes (the hub's
// read limit), text messages {"type":"ping"} are answered with a pong.
const (
	fuzzReadLimit = 4096
	opText        = 1
	opClose       = 8
	opPing        = 9
	opPong        = 10
)

// wsFrame is one frame: opcode and (unmasked) payload.
type wsFrame struct {
	op      byte
	payload []byte
}

func (f wsFrame) String() string { return fmt.Sprintf("op %d %q", f.op, f.payload) }

// clientExchange is what a run of client bytes should get from the hub: the replies to
// the frames before the last one, then the close frame the last one brings about.
type clientExchange struct {
	// wire is what the client sends: the fuzz input up to the frame the hub stops at,
	// completed (zero bytes where the input ends inside a frame, a close frame where it
	// ends between frames).
	wire []byte
	// last is where the last frame starts: the replies to wire[:last] are awaited before
	// wire[last:] is sent.
	last    int
	replies []wsFrame
	close   wsFrame
}

var validCloseCodes = map[int]bool{1000: true, 1001: true, 1002: true, 1003: true, 1007: true, 1008: true, 1009: true,
	1010: true, 1011: true, 1012: true, 1013: true}

func closeFrameOf(code int, reason string) wsFrame {
	p := binary.BigEndian.AppendUint16(nil, uint16(code))
	return wsFrame{opClose, append(p, reason...)}
}

// modelClientFrames reads in as client frames per RFC 6455 section 5, the way the hub
// must take them: a protocol violation (reserved bits, an unknown opcode, an unmasked
// frame, a fragmented or oversized control frame, a continuation out of place) closes
// with 1002 "protocol error"; a message over the read limit closes with 1009; a ping is
// answered with a pong of its payload, a text {"type":"ping"} with {"type":"pong"}; the
// client's close is answered with its code (1000 when it gives none), and a close frame
// with an invalid code or a reason that is not UTF-8 is a protocol error.
func modelClientFrames(in []byte) clientExchange {
	wire := append([]byte(nil), in...)
	need := func(end int) {
		for len(wire) < end {
			wire = append(wire, 0)
		}
	}
	var (
		x         clientExchange
		pos       int
		inMessage bool
		msgType   byte
		msgLen    int64
		msg       []byte
	)
	stop := func(start int, close wsFrame) clientExchange {
		x.wire, x.last, x.close = wire[:pos], start, close
		return x
	}
	for {
		start := pos
		if pos == len(wire) {
			wire = append(wire, 0x88, 0x82, 0, 0, 0, 0, 0x03, 0xe8) // close 1000, masked with zeros
		}
		need(pos + 2)
		b0, b1 := wire[pos], wire[pos+1]
		pos += 2
		final, op, masked, n := b0&0x80 != 0, b0&0x0f, b1&0x80 != 0, int64(b1&0x7f)
		bad := b0&0x70 != 0 || !masked
		switch op {
		case opClose, opPing, opPong:
			bad = bad || n > 125 || !final
		case opText, 2:
			bad = bad || inMessage
			inMessage = !final
		case 0:
			bad = bad || !inMessage
			inMessage = !final
		default:
			bad = true
		}
		if bad {
			return stop(start, closeFrameOf(1002, "protocol error"))
		}
		switch n {
		case 126:
			need(pos + 2)
			n = int64(binary.BigEndian.Uint16(wire[pos:]))
			pos += 2
		case 127:
			need(pos + 8)
			u := binary.BigEndian.Uint64(wire[pos:])
			pos += 8
			if u > math.MaxInt64 {
				return stop(start, closeFrameOf(1009, ""))
			}
			n = int64(u)
		}
		need(pos + 4)
		var mask [4]byte
		copy(mask[:], wire[pos:])
		pos += 4
		if op <= 2 && op != 0 {
			msgType, msgLen, msg = op, 0, nil
		}
		if op <= 2 {
			if msgLen += n; msgLen < 0 || msgLen > fuzzReadLimit {
				return stop(start, closeFrameOf(1009, ""))
			}
		}
		need(pos + int(n))
		payload := make([]byte, n)
		for i := range payload {
			payload[i] = wire[pos+i] ^ mask[i%4]
		}
		pos += int(n)
		switch op {
		case 0, opText, 2:
			msg = append(msg, payload...)
			var m struct{ Type string }
			if final && msgType == opText && json.Unmarshal(msg, &m) == nil && m.Type == "ping" {
				x.replies = append(x.replies, wsFrame{opText, []byte(`{"type":"pong"}`)})
			}
		case opPing:
			x.replies = append(x.replies, wsFrame{opPong, payload})
		case opClose:
			code := 1000
			if len(payload) >= 2 {
				code = int(binary.BigEndian.Uint16(payload))
				if !(validCloseCodes[code] || code >= 3000 && code <= 4999) || !utf8.Valid(payload[2:]) {
					return stop(start, closeFrameOf(1002, "protocol error"))
				}
			}
			return stop(start, closeFrameOf(code, ""))
		}
	}
}

// readServerFrame reads one server frame, which must be whole and unmasked.
func readServerFrame(r *bufio.Reader) (wsFrame, error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return wsFrame{}, err
	}
	if h[0]&0xf0 != 0x80 || h[1]&0x80 != 0 {
		return wsFrame{}, fmt.Errorf("malformed server frame header % x", h)
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return wsFrame{}, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return wsFrame{}, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	if n > 1<<20 {
		return wsFrame{}, fmt.Errorf("server frame of %d bytes", n)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return wsFrame{}, err
	}
	return wsFrame{h[0] & 0x0f, p}, nil
}

// FuzzClientFrames sends arbitrary bytes to a live connection of the hub as the client's
// frames, over a real socket, and holds the hub to modelClientFrames: it never panics,
// answers exactly the pings it should, in order, and ends with one close frame whose code
// says why (1002 for a protocol error, 1009 for an oversized message, the client's own
// code for a close), after which it sends nothing and closes the connection.
func FuzzClientFrames(f *testing.F) {
	masked := func(b0 byte, payload []byte) []byte {
		key := [4]byte{0x12, 0x34, 0x56, 0x78}
		var out []byte
		switch n := len(payload); {
		case n < 126:
			out = []byte{b0, 0x80 | byte(n)}
		case n <= 0xffff:
			out = binary.BigEndian.AppendUint16([]byte{b0, 0x80 | 126}, uint16(n))
		default:
			out = binary.BigEndian.AppendUint64([]byte{b0, 0x80 | 127}, uint64(n))
		}
		out = append(out, key[:]...)
		for i, c := range payload {
			out = append(out, c^key[i%4])
		}
		return out
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	ping := []byte(`{"type":"ping"}`)
	for _, seed := range [][]byte{
		masked(0x81, ping), // a ping message
		cat(masked(0x89, []byte("hi")), masked(0x81, ping)),                    // a protocol ping, then a ping message
		cat(masked(0x01, ping[:5]), masked(0x89, nil), masked(0x80, ping[5:])), // fragmented, a ping between
		masked(0x81, bytes.Repeat([]byte("x"), 4097)),                          // over the limit
		cat(masked(0x01, bytes.Repeat([]byte("x"), 4000)), masked(0x80, bytes.Repeat([]byte("x"), 97))),
		{0x81, 0x0f, '{', '"', 't', 'y', 'p', 'e', '"', ':', '"', 'p', 'i', 'n', 'g', '"', '}'}, // unmasked
		masked(0xc1, ping),                      // RSV1
		masked(0x83, nil),                       // unknown opcode
		masked(0x09, nil),                       // fragmented control frame
		masked(0x80, []byte("x")),               // continuation of nothing
		{0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0}, // 64-bit length with the top bit set
		masked(0x88, binary.BigEndian.AppendUint16(nil, 4000)),
		masked(0x88, binary.BigEndian.AppendUint16(nil, 1005)),
		masked(0x88, append(binary.BigEndian.AppendUint16(nil, 1000), 0xff)),
		masked(0x88, []byte{3}),
		masked(0x8a, []byte("unsolicited pong")),
		masked(0x82, []byte{0, 1, 2}),
		{0x81},
		nil,
	} {
		f.Add(seed)
	}

	hub := wshub.New(wshub.Options{Store: fuzzStore{}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), NoSendRing: true})
	cfg := events.Subscription{ID: "wsc_fuzz", App: "pay", Entries: []string{"*"}, Enabled: true}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = hub.Serve(w, r, cfg, events.Recipient{}, nil)
	}))
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hub.Shutdown(ctx)
		srv.Close()
	})
	addr := srv.Listener.Addr().String()

	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 16<<10 {
			in = in[:16<<10]
		}
		want := modelClientFrames(in)
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(conn, "GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
			"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", addr)
		r := bufio.NewReader(conn)
		res, err := http.ReadResponse(r, nil)
		if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade: %v %v", res, err)
		}
		ready, err := readServerFrame(r)
		var m struct{ Type, ConfigID string }
		if err != nil || ready.op != opText || json.Unmarshal(ready.payload, &m) != nil || m.Type != "connection.ready" {
			t.Fatalf("first frame %v, %v; want connection.ready", ready, err)
		}

		if _, err := conn.Write(want.wire[:want.last]); err != nil {
			t.Fatal(err)
		}
		for i, w := range want.replies {
			got, err := readServerFrame(r)
			if err != nil || got.op != w.op || !bytes.Equal(got.payload, w.payload) {
				t.Fatalf("input %q: reply %d is %v, %v; want %v", want.wire, i, got, err, w)
			}
		}
		if _, err := conn.Write(want.wire[want.last:]); err != nil {
			t.Fatal(err)
		}
		got, err := readServerFrame(r)
		if err != nil || got.op != want.close.op || !bytes.Equal(got.payload, want.close.payload) {
			t.Fatalf("input %q: last frame %v, %v; want the close frame %v", want.wire, got, err, want.close)
		}
		if extra, err := readServerFrame(r); !errors.Is(err, io.EOF) {
			t.Fatalf("input %q: after the close frame %v, %v; want the connection closed", want.wire, extra, err)
		}
	})
}
