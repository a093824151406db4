package wshub

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opentreasury/treasury/dev/wait"
	"github.com/opentreasury/treasury/internal/events"
)

// TestConcurrentWritersKeepFramesWholeAndInOrder holds the connection's write invariant
// (see conn): whoever offers frames, from however many goroutines at once, the socket
// gets each frame whole, and each offerer's frames in the order it offered them — through
// the direct writes and the flusher's takeover alike (a small send buffer and a client
// that starts reading late force the takeover).
func TestConcurrentWritersKeepFramesWholeAndInOrder(t *testing.T) {
	const writers, each = 4, 400
	h := testHub(t)
	h.rings.disabled = true
	h.opts.SendQueue = writers * each // nobody is evicted: this test is about order
	servers, clients := tcpPairs(t, 1)
	if err := servers[0].SetWriteBuffer(4096); err != nil {
		t.Fatal(err)
	}
	c := newConn(h, nil, servers[0], "wsc_test", events.Recipient{})
	padding := strings.Repeat("x", 200)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range each {
				c.offer(textFrame(fmt.Appendf(nil, `{"w":%d,"n":%d,"pad":%q}`, w, n, padding)))
			}
		}()
	}
	// Read only once the socket has filled and the flusher has taken over.
	wait.For(t, 10*time.Second, "the socket to fill and the flusher to take over", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.flushing
	})
	client := clients[0]
	_ = client.SetReadDeadline(time.Now().Add(30 * time.Second))
	next := make([]int, writers)
	for range writers * each {
		var head [4]byte
		if _, err := io.ReadFull(client, head[:2]); err != nil {
			t.Fatal(err)
		}
		if head[0] != 0x81 {
			t.Fatalf("frame header %#x: not a whole text frame", head[0])
		}
		size := int(head[1])
		if size == 126 {
			if _, err := io.ReadFull(client, head[2:4]); err != nil {
				t.Fatal(err)
			}
			size = int(binary.BigEndian.Uint16(head[2:4]))
		}
		payload := make([]byte, size)
		if _, err := io.ReadFull(client, payload); err != nil {
			t.Fatal(err)
		}
		var msg struct{ W, N int }
		if err := json.Unmarshal(payload, &msg); err != nil {
			t.Fatalf("a frame's payload is not the JSON offered (interleaved?): %q", payload)
		}
		if msg.N != next[msg.W] {
			t.Fatalf("writer %d: frame %d arrived where %d was due", msg.W, msg.N, next[msg.W])
		}
		next[msg.W]++
	}
	wg.Wait()
	// The flusher counts a frame after its write returns, which may be after the client
	// has read it: the count is eventual, and must settle at exactly every frame.
	wait.For(t, 10*time.Second, "sent to count every frame", func() bool {
		return c.sent.Load() >= writers*each
	})
	if got := c.sent.Load(); got != writers*each {
		t.Fatalf("sent counts %d frames, want %d", got, writers*each)
	}
}
