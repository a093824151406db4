package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/opentreasury/treasury/dev/wait"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// liveClient collects the event frames of one connection.
type liveClient struct {
	ws     *websocket.Conn
	frames chan map[string]any
	closed chan int
}

func dialLive(t *testing.T, apiBase, configID, token string) *liveClient {
	t.Helper()
	return dialURL(t, "ws"+strings.TrimPrefix(apiBase, "http")+"/api/v1/ws?id="+configID+"&token="+token)
}

// dialURL is dialLive to a whole URL, such as the one the console's WebSockets page shows.
func dialURL(t *testing.T, url string) *liveClient {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	c := &liveClient{ws: ws, frames: make(chan map[string]any, 1000), closed: make(chan int, 1)}
	// The server registers the connection after the upgrade's answer, then sends
	// connection.ready first: only after it is the connection sure to hear what follows.
	ready := make(chan struct{})
	go func() {
		defer func() {
			select {
			case <-ready:
			default:
				close(ready)
			}
		}()
		for {
			_, data, err := ws.ReadMessage()
			if err != nil {
				code := -1
				var ce *websocket.CloseError
				if errors.As(err, &ce) {
					code = ce.Code
				}
				c.closed <- code
				return
			}
			var f map[string]any
			if json.Unmarshal(data, &f) != nil {
				continue
			}
			if f["type"] == "connection.ready" {
				select {
				case <-ready:
				default:
					close(ready)
				}
				continue
			}
			c.frames <- f
		}
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatalf("no connection.ready from %s within 10 s", url)
	}
	return c
}

// lifecycle reads event frames until the order's terminal event and returns their
// names; it fails on a repeated or missing sequence number.
func (c *liveClient) lifecycle(t *testing.T, orderID string) []string {
	t.Helper()
	var names []string
	for {
		select {
		case f := <-c.frames:
			data, _ := f["data"].(map[string]any)
			if data["orderId"] != orderID {
				continue
			}
			if seq := data["sequence"]; seq != float64(len(names)+1) {
				t.Fatalf("%s arrived with sequence %v after %v", f["event"], seq, names)
			}
			names = append(names, f["event"].(string))
			if f["event"] == "Order.Confirmed" || f["event"] == "Order.Failed" || f["event"] == "Order.Rejected" {
				return names
			}
		case code := <-c.closed:
			t.Fatalf("closed (%d) after %v", code, names)
		case <-time.After(30 * time.Second):
			t.Fatalf("no terminal event within 30 s; got %v", names)
		}
	}
}

// Two API processes (the dev bundle's and a separate `treasury api`) and one worker share
// PostgreSQL: the events the worker commits reach the clients of both API processes
// exactly once each, and the separate process closes its connections with 1001 when it
// is stopped.
func TestLiveEventsReachEveryAPIProcessOnPostgres(t *testing.T) {
	databaseURL := storetest.PostgresSchemaURL(t)
	b := startBundle(t, t.TempDir(), databaseURL)
	defer func() { _ = b.Shutdown() }()

	addr := freeAddr(t)
	second := exec.Command(treasuryBinary(t), "api")
	second.Env = append(os.Environ(), "DATABASE_URL="+databaseURL, "TEMPORAL_ADDRESS="+b.TemporalAddr,
		"HTTP_ADDR="+addr, "METRICS_ADDR="+freeAddr(t), "LOG_LEVEL=warn", "SHUTDOWN_TIMEOUT=5s")
	var logs strings.Builder
	second.Stdout, second.Stderr = &logs, &logs
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.Process.Kill(); _ = second.Wait() })
	secondURL := "http://" + addr
	ready := false
	defer func() { // the process's logs, should it never become ready
		if !ready {
			t.Logf("treasury api logs:\n%s", logs.String())
		}
	}()
	wait.For(t, 30*time.Second, "the second treasury api to become ready", func() bool {
		res, err := httpClient.Get(secondURL + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == 200
	})
	ready = true

	pay := b.Credentials.Keys["pay"]
	r := send(t, "POST", b.APIURL+"/developer/websockets", pay.SK, `{"events":["*"]}`)
	if r.status != 201 {
		t.Fatalf("config %d %s", r.status, r.raw)
	}
	configID := r.body["id"].(string)
	onBundle := dialLive(t, b.APIURL, configID, pay.PK)
	onSecond := dialLive(t, secondURL, configID, pay.PK)

	body := fmt.Sprintf(`{"walletId":%q,"asset":"USDC","amount":"25","destination":{"address":"0x1111111111111111111111111111111111111111"}}`,
		b.Credentials.Wallets[0].ID)
	r = send(t, "POST", secondURL+"/api/v1/payments", pay.SK, body)
	if r.status != 201 {
		t.Fatalf("create %d %s", r.status, r.raw)
	}
	orderID := r.body["id"].(string)
	if r := send(t, "POST", secondURL+"/api/v1/payments/"+orderID+"/submit", pay.SK, ""); r.status != 202 {
		t.Fatalf("submit %d %s", r.status, r.raw)
	}
	want := "Order.Created Order.Submitted Wallet.SigningRequested Wallet.TransactionSigned Order.Broadcast Order.Confirmed"
	for name, c := range map[string]*liveClient{"bundle": onBundle, "treasury api": onSecond} {
		if got := strings.Join(c.lifecycle(t, orderID), " "); got != want {
			t.Errorf("%s's client got %s, want %s", name, got, want)
		}
		select {
		case f := <-c.frames:
			t.Errorf("%s's client got a frame after the terminal event: %v", name, f)
		case <-time.After(300 * time.Millisecond):
		}
	}

	revokedOnEveryProcess(t, b.APIURL, secondURL, pay.SK)

	if err := second.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-onSecond.closed:
		if code != websocket.CloseGoingAway {
			t.Fatalf("treasury api closed its connection with %d, want 1001", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("treasury api did not close its connection within 10 s of SIGTERM")
	}
	if err := second.Wait(); err != nil {
		t.Fatalf("treasury api exited with %v:\n%s", err, logs.String())
	}
	if strings.Contains(logs.String(), pay.PK) || strings.Contains(logs.String(), pay.SK) {
		t.Fatal("a key appears in treasury api's logs")
	}
}

// revokedOnEveryProcess: a key both processes have just accepted (and remember), revoked
// through the first, is refused by the first at once and by the other as soon as the
// revocation's announcement reaches it, well before the 30 s a process may remember a key.
func revokedOnEveryProcess(t *testing.T, first, other, developerKey string) {
	t.Helper()
	r := send(t, "POST", first+"/developer/api-keys", developerKey, `{"kind":"tk","actions":["read"],"label":"revoked soon"}`)
	if r.status != 201 {
		t.Fatalf("create key %d %s", r.status, r.raw)
	}
	id, secret := r.body["id"].(string), r.body["secret"].(string)
	for _, api := range []string{first, other} {
		if r := send(t, "GET", api+"/api/v1/payments", secret, ""); r.status != 200 {
			t.Fatalf("the new key on %s: %d %s", api, r.status, r.raw)
		}
	}
	if r := send(t, "DELETE", first+"/developer/api-keys/"+id, developerKey, ""); r.status != 200 {
		t.Fatalf("revoke %d %s", r.status, r.raw)
	}
	if r := send(t, "GET", first+"/api/v1/payments", secret, ""); r.status != 401 {
		t.Fatalf("the revoked key on the process that revoked it: %d, want 401", r.status)
	}
	wait.For(t, 10*time.Second, "the other process to refuse the revoked key", func() bool {
		return send(t, "GET", other+"/api/v1/payments", secret, "").status == 401
	})
}
