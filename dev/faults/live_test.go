package faults

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// liveClient is an integrator's live connection: it keeps every event id it was sent
// (counting repeats), the last one, and how its connection ended.
type liveClient struct {
	mu      sync.Mutex
	ws      *websocket.Conn
	seen    map[string]int
	last    string
	closed  chan int
	repeat  int
	current chan int // the close code of the current connection
}

func dialLive(t *testing.T, apiBase, configID, token string) *liveClient {
	t.Helper()
	lc := &liveClient{seen: map[string]int{}}
	lc.connect(t, apiBase, configID, token)
	return lc
}

func (lc *liveClient) connect(t *testing.T, apiBase, configID, token string) {
	t.Helper()
	url := "ws" + strings.TrimPrefix(apiBase, "http") + "/api/v1/ws?id=" + configID + "&token=" + token
	ws, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", apiBase, err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	closed := make(chan int, 1)
	lc.mu.Lock()
	lc.ws, lc.current = ws, closed
	lc.mu.Unlock()
	go func() {
		for {
			var f struct {
				Type string
				Data struct{ ID string }
			}
			if err := ws.ReadJSON(&f); err != nil {
				code := -1
				var ce *websocket.CloseError
				if errors.As(err, &ce) {
					code = ce.Code
				}
				closed <- code
				return
			}
			if f.Data.ID != "" {
				lc.add(f.Data.ID, true)
			}
		}
	}()
}

func (lc *liveClient) add(id string, live bool) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if live && lc.seen[id] > 0 {
		lc.repeat++
	}
	lc.seen[id]++
	lc.last = id
}

// dropped tells whether the current connection has ended.
func (lc *liveClient) dropped() bool {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	select {
	case code := <-lc.current:
		lc.current <- code
		return true
	default:
		return false
	}
}

func (lc *liveClient) reconnect(t *testing.T, apiBase, configID, token string) {
	lc.connect(t, apiBase, configID, token)
}

// catchUp reads what the client missed from GET /api/v1/events?after= its last event.
func (lc *liveClient) catchUp(apiBase, token string) error {
	lc.mu.Lock()
	after := lc.last
	lc.mu.Unlock()
	for {
		url := apiBase + "/api/v1/events?limit=100"
		if after != "" {
			url += "&after=" + after
		}
		r := send("GET", url, token, "")
		if r.err != nil || r.status != 200 {
			return fmt.Errorf("catch up: %d %s %v", r.status, r.raw, r.err)
		}
		for _, e := range r.body["data"].([]any) {
			ev := e.(map[string]any)
			if name, _ := ev["event"].(string); strings.HasPrefix(name, "Order.") {
				lc.add(ev["id"].(string), false)
			}
		}
		next, _ := r.body["nextCursor"].(string)
		if next == "" {
			return nil
		}
		after = next
	}
}

func (lc *liveClient) missing(want map[string]bool) int {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	n := 0
	for id := range want {
		if lc.seen[id] == 0 {
			n++
		}
	}
	return n
}

func (lc *liveClient) repeats() int {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.repeat
}

// closeCode waits for the current connection to end and returns its close code.
func (lc *liveClient) closeCode(wait time.Duration) int {
	lc.mu.Lock()
	ch := lc.current
	lc.mu.Unlock()
	select {
	case code := <-ch:
		ch <- code
		return code
	case <-time.After(wait):
		return 0
	}
}
