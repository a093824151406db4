package rpcproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/rpc"
)

// stalledNode never answers: every call waits for its context to end.
type stalledNode struct{}

func (stalledNode) CallContext(ctx context.Context, _ any, _ string, _ ...any) error {
	<-ctx.Done()
	return ctx.Err()
}

func (stalledNode) BatchCallContext(ctx context.Context, _ []rpc.BatchElem) error {
	<-ctx.Done()
	return ctx.Err()
}

func decode(t *testing.T, a Answer) []Response {
	t.Helper()
	var out []Response
	if strings.HasPrefix(string(a.Body), "[") {
		if err := json.Unmarshal(a.Body, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	var one Response
	if err := json.Unmarshal(a.Body, &one); err != nil {
		t.Fatal(err)
	}
	return []Response{one}
}

// A node that does not answer within the proxy's timeout is a JSON-RPC error that says
// so, for one call, for a batch, and for the block an eth_getLogs bound waits on.
func TestANodeThatDoesNotAnswerInTime(t *testing.T) {
	p := Proxy{Timeout: 20 * time.Millisecond}
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}`,
		`[{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"},{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}]`,
		`{"jsonrpc":"2.0","id":1,"method":"eth_getLogs","params":[{"fromBlock":"0x1"}]}`,
	} {
		a := p.Forward(context.Background(), "ethereum", stalledNode{}, []byte(body))
		if !errors.Is(a.NodeErr, context.DeadlineExceeded) {
			t.Fatalf("%s: NodeErr %v", body, a.NodeErr)
		}
		for _, r := range decode(t, a) {
			if r.Error == nil || r.Error.Code != CodeUnavailable || !strings.Contains(r.Error.Message, "the ethereum node did not answer in time") {
				t.Fatalf("%s: %s", body, a.Body)
			}
		}
	}
}

// A node whose URL cannot be dialled answers every call with the same error, and the
// error kept for the log names no URL.
func TestANodeThatCannotBeDialled(t *testing.T) {
	a := Proxy{}.Forward(context.Background(), "polygon", Dial("nope://node.example/v3/key"), []byte(`{"jsonrpc":"2.0","id":"x","method":"eth_chainId"}`))
	got := decode(t, a)[0]
	if a.NodeErr == nil || got.Error == nil || got.Error.Code != CodeUnavailable || string(got.ID) != `"x"` || strings.Contains(string(a.Body), "key") {
		t.Fatalf("%v %s", a.NodeErr, a.Body)
	}
}

// Every method of the allow-list reads; none is a write the lifecycle owns.
func TestTheAllowListHoldsNoWrite(t *testing.T) {
	for _, m := range Methods {
		if isWrite(m) {
			t.Errorf("%s is on the allow-list and a write", m)
		}
	}
	for _, m := range []string{"eth_sendRawTransaction", "eth_sendTransaction", "eth_sign", "eth_signTransaction", "personal_sendTransaction"} {
		if !isWrite(m) {
			t.Errorf("%s is not taken for a write", m)
		}
	}
}

// An answer larger than MaxAnswerBytes is refused with a JSON-RPC error, not handed on:
// from a node over HTTP it is cut off as it is read, and from a node in process it is
// refused once it is there. One just under the cap goes through.
func TestAnAnswerOverTheCapIsRefused(t *testing.T) {
	const over, under = MaxAnswerBytes + 1<<20, MaxAnswerBytes - 1<<10
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		size := under
		if req.Method == "eth_getLogs" {
			size = over
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":"`+strings.Repeat("a", size)+`"}`)
	}))
	defer srv.Close()
	p := Proxy{}
	big := `{"jsonrpc":"2.0","id":1,"method":"eth_getLogs","params":[{"blockHash":"0x01"}]}`
	a := p.Forward(context.Background(), "ethereum", Dial(srv.URL), []byte(big))
	r := decode(t, a)[0]
	if r.Error == nil || r.Error.Code != CodeLimitExceeded || !strings.Contains(r.Error.Message, "larger than 10 MiB") || a.NodeErr != nil {
		t.Fatalf("an answer over the cap: %.300s (node error %v)", a.Body, a.NodeErr)
	}
	if len(a.Body) > 1<<10 {
		t.Fatalf("the refusal carries %d bytes of the answer", len(a.Body))
	}
	small := `{"jsonrpc":"2.0","id":2,"method":"eth_blockNumber"}`
	if r := decode(t, p.Forward(context.Background(), "ethereum", Dial(srv.URL), []byte(small)))[0]; r.Error != nil || len(r.Result) < under {
		t.Fatalf("an answer under the cap: error %+v, %d bytes", r.Error, len(r.Result))
	}

	// In process: the same refusal of results that together pass the cap.
	inProc := rpc.NewServer()
	if err := inProc.RegisterName("eth", bigEth{}); err != nil {
		t.Fatal(err)
	}
	node := rpc.DialInProc(inProc)
	defer node.Close()
	batch := `[{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},{"jsonrpc":"2.0","id":2,"method":"eth_gasPrice"}]`
	for _, r := range decode(t, p.Forward(context.Background(), "ethereum", node, []byte(batch))) {
		if r.Error == nil || r.Error.Code != CodeLimitExceeded || r.Result != nil {
			t.Fatalf("a batch whose answers pass the cap together: %+v", r)
		}
	}
}

// bigEth answers two calls of 6 MiB each.
type bigEth struct{}

func (bigEth) ChainId() string  { return strings.Repeat("c", 6<<20) }
func (bigEth) GasPrice() string { return strings.Repeat("g", 6<<20) }

// Calls counts what a budget of calls counts: each call of a batch the node will hear.
func TestCallsCountsEachCallOfABatch(t *testing.T) {
	one := `{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`
	for body, want := range map[string]int{
		one:                                     1,
		"[" + one + "," + one + "," + one + "]": 3,
		"[" + strings.Repeat(one+",", MaxBatch) + one + "]": 1, // refused whole
		"[]":       1,
		"not json": 1,
	} {
		if got := Calls([]byte(body)); got != want {
			t.Errorf("Calls(%.40s…) = %d, want %d", body, got, want)
		}
	}
}

// On solana the allow-list is Solana's: its reads reach the node, its sends are refused
// as writes, and EVM's methods and whole-program scans are refused with Solana's list.
func TestSolanaHasItsOwnAllowList(t *testing.T) {
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		asked = append(asked, req.Method)
		_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"solana-core":"2.2.0","feature-set":1}}`, req.ID)
	}))
	defer srv.Close()
	node := Dial(srv.URL)
	forward := func(method string) Response {
		t.Helper()
		return decode(t, Proxy{}.Forward(context.Background(), Solana, node, []byte(`{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":[]}`)))[0]
	}
	if r := forward("getVersion"); r.Error != nil || !strings.Contains(string(r.Result), "solana-core") {
		t.Fatalf("getVersion: %+v %s", r.Error, r.Result)
	}
	for _, m := range []string{"sendTransaction", "requestAirdrop", "simulateTransaction"} {
		if r := forward(m); r.Error == nil || r.Error.Code != CodeMethodNotFound || !strings.Contains(r.Error.Message, "only reads the chain") {
			t.Errorf("%s: %+v", m, r.Error)
		}
	}
	for _, m := range []string{"getProgramAccounts", "eth_chainId"} {
		if r := forward(m); r.Error == nil || r.Error.Code != CodeMethodNotFound || !strings.Contains(r.Error.Message, "getSignatureStatuses") {
			t.Errorf("%s: %+v", m, r.Error)
		}
	}
	if len(asked) != 1 || asked[0] != "getVersion" {
		t.Fatalf("the node was asked %v, want getVersion alone", asked)
	}
	for _, m := range SolanaMethods {
		if isWrite(m) {
			t.Errorf("%s is on Solana's allow-list and a write", m)
		}
	}
}
