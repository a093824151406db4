package rpcproxy

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
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

func TestRedactURLKeepsTheURLOut(t *testing.T) {
	err := &url.Error{Op: "Post", URL: "https://mainnet.example/v3/provider-key", Err: errors.New("connection refused")}
	if got := RedactURL(err); strings.Contains(got, "provider-key") || !strings.Contains(got, "connection refused") {
		t.Fatalf("%q", got)
	}
	if got := RedactURL(errors.New("plain")); got != "plain" {
		t.Fatalf("%q", got)
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
