package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/docs"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/chain/rpcproxy"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
)

// fakeEth is a chain's node as go-ethereum serves it (its RPC server, in process): the
// methods the tests call, and the writes, so that a refusal is known to be the endpoint's.
type fakeEth struct {
	mu      sync.Mutex
	head    uint64
	calls   int
	filters []map[string]any
}

var knownTx = common.HexToHash("0x5c504ed432cb51138bcf09aa5e8a410dd4a1e204ef84bfed1be16dfba1b22060")

func (e *fakeEth) count() { e.mu.Lock(); e.calls++; e.mu.Unlock() }

func (e *fakeEth) ChainId() hexutil.Uint64     { e.count(); return 1337 }
func (e *fakeEth) BlockNumber() hexutil.Uint64 { e.count(); return hexutil.Uint64(e.head) }
func (e *fakeEth) GetTransactionReceipt(h common.Hash) (map[string]any, error) {
	e.count()
	if h != knownTx {
		return nil, nil
	}
	return map[string]any{"transactionHash": h, "status": "0x1"}, nil
}
func (e *fakeEth) GetBlockByNumber(tag string, _ bool) (map[string]any, error) {
	e.count()
	if tag == "safe" {
		return map[string]any{"number": hexutil.Uint64(e.head - 64)}, nil
	}
	return nil, errors.New("no such block")
}
func (e *fakeEth) GetLogs(filter map[string]any) ([]any, error) {
	e.count()
	e.mu.Lock()
	e.filters = append(e.filters, filter)
	e.mu.Unlock()
	return []any{}, nil
}
func (e *fakeEth) Call(map[string]any, string) (hexutil.Bytes, error) {
	e.count()
	return nil, revert{}
}
func (e *fakeEth) SendRawTransaction(hexutil.Bytes) (common.Hash, error) {
	e.count()
	return knownTx, nil
}
func (e *fakeEth) Sign(common.Address, hexutil.Bytes) (hexutil.Bytes, error) {
	e.count()
	return nil, nil
}

func (e *fakeEth) lastFilter(t *testing.T) map[string]any {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.filters) == 0 {
		t.Fatal("no eth_getLogs reached the node")
	}
	return e.filters[len(e.filters)-1]
}

func (e *fakeEth) callCount() int { e.mu.Lock(); defer e.mu.Unlock(); return e.calls }

// revert is a node's answer to a call that reverted: code 3 and the revert data.
type revert struct{}

func (revert) Error() string  { return "execution reverted: no" }
func (revert) ErrorCode() int { return 3 }
func (revert) ErrorData() any { return "0x08c379a0" }

type fakeNet struct{}

func (fakeNet) Version() string { return "1337" }

// capturedLogs is a request log sink that keeps its rows.
type capturedLogs struct {
	mu   sync.Mutex
	rows []store.RequestLog
}

func (c *capturedLogs) Add(r store.RequestLog) {
	c.mu.Lock()
	c.rows = append(c.rows, r)
	c.mu.Unlock()
}

func (c *capturedLogs) all() []store.RequestLog {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]store.RequestLog(nil), c.rows...)
}

// rpcFixture serves ethereum from a fake node and polygon from a node nobody listens at.
type rpcFixture struct {
	*fixture
	eth  *fakeEth
	logs *capturedLogs
}

func newRPCFixture(t *testing.T, limit float64, burst int, more ...func(*Config)) *rpcFixture {
	t.Helper()
	f := newFixture(t)
	eth := &fakeEth{head: 20_000}
	srv := rpc.NewServer()
	if err := srv.RegisterName("eth", eth); err != nil {
		t.Fatal(err)
	}
	if err := srv.RegisterName("net", fakeNet{}); err != nil {
		t.Fatal(err)
	}
	node := rpc.DialInProc(srv)
	t.Cleanup(func() { node.Close(); srv.Stop() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close()
	logs := &capturedLogs{}
	cfg := Config{Store: f.store, Log: slog.New(slog.NewJSONHandler(f.logs, nil)), RequestLogs: logs,
		RateLimit: limit, RateBurst: burst, Service: &service.Service{Store: f.store, Log: slog.New(slog.NewTextHandler(io.Discard, nil))},
		RPCNodes: rpcproxy.Nodes{"ethereum": node, "polygon": rpcproxy.Dial("http://" + dead + "/v3/secret-project-key")}}
	for _, m := range more {
		m(&cfg)
	}
	f.handler = NewRouter(cfg)
	return &rpcFixture{fixture: f, eth: eth, logs: logs}
}

// rpcAnswer is a JSON-RPC response as a client reads it; Result keeps a JSON null apart
// from no result at all.
type rpcAnswer struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    any    `json:"data"`
	} `json:"error"`
}

// rpc posts body to /rpc/{chain} with token and reads the JSON-RPC answer (one, or a batch).
func (f *rpcFixture) rpc(t *testing.T, chain, token, body string) []rpcAnswer {
	t.Helper()
	r := f.post(t, "/rpc/"+chain, token, body)
	if r.status != 200 || r.header.Get("Content-Type") != "application/json" || r.header.Get("RateLimit-Remaining") == "" ||
		r.header.Get(correlationHeader) == "" {
		t.Fatalf("POST /rpc/%s %s: %d %v %s", chain, body, r.status, r.header, r.body)
	}
	var out []rpcAnswer
	if strings.HasPrefix(strings.TrimSpace(string(r.body)), "[") {
		if err := json.Unmarshal(r.body, &out); err != nil {
			t.Fatalf("batch answer %s: %v", r.body, err)
		}
	} else {
		var one rpcAnswer
		if err := json.Unmarshal(r.body, &one); err != nil {
			t.Fatalf("answer %s: %v", r.body, err)
		}
		out = []rpcAnswer{one}
	}
	for _, a := range out {
		if a.JSONRPC != "2.0" || a.ID == nil || (a.Error == nil) == (a.Result == nil) {
			t.Fatalf("not a JSON-RPC 2.0 response: %s", r.body)
		}
	}
	return out
}

func (a rpcAnswer) wantResult(t *testing.T, id, result string) {
	t.Helper()
	if a.Error != nil || string(a.ID) != id || string(a.Result) != result {
		t.Fatalf("want id %s result %s, got %+v %s", id, result, a.Error, a.Result)
	}
}

func (a rpcAnswer) wantError(t *testing.T, id string, code int, says string) {
	t.Helper()
	if a.Error == nil || string(a.ID) != id || a.Error.Code != code || !strings.Contains(a.Error.Message, says) {
		t.Fatalf("want id %s error %d saying %q, got id %s %+v %s", id, code, says, a.ID, a.Error, a.Result)
	}
}

func rpcRequest(id int, method string, params ...string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":[%s]}`, id, method, strings.Join(params, ","))
}

// The methods of the allow-list reach the node, and its answers come back as it sent
// them: results (a null one too) and errors with their code and data.
func TestRPCForwardsTheAllowList(t *testing.T) {
	f := newRPCFixture(t, 0, 0)
	sk := f.creds.Keys["pay"].SK
	f.rpc(t, "ethereum", sk, rpcRequest(1, "eth_chainId"))[0].wantResult(t, "1", `"0x539"`)
	f.rpc(t, "ethereum", sk, `{"jsonrpc":"2.0","id":"n","method":"net_version"}`)[0].wantResult(t, `"n"`, `"1337"`)
	receipt := f.rpc(t, "ethereum", sk, rpcRequest(2, "eth_getTransactionReceipt", `"`+knownTx.Hex()+`"`))[0]
	var r struct{ Status string }
	if err := json.Unmarshal(receipt.Result, &r); err != nil || r.Status != "0x1" {
		t.Fatalf("receipt %s", receipt.Result)
	}
	f.rpc(t, "ethereum", sk, rpcRequest(3, "eth_getTransactionReceipt", `"0x`+strings.Repeat("ab", 32)+`"`))[0].wantResult(t, "3", "null")
	reverted := f.rpc(t, "ethereum", sk, rpcRequest(4, "eth_call", `{"to":"0x000000000000000000000000000000000000dEaD"}`, `"latest"`))[0]
	reverted.wantError(t, "4", 3, "execution reverted: no")
	if reverted.Error.Data != "0x08c379a0" {
		t.Fatalf("the revert data did not come through: %+v", reverted.Error)
	}
	// A method of the list the node lacks: the node's own answer.
	f.rpc(t, "ethereum", sk, rpcRequest(5, "eth_gasPrice"))[0].wantError(t, "5", -32601, "eth_gasPrice")
}

// The endpoint is under /api/v1 (SPEC 3.6) and at its root alias; both count against one
// budget of calls per app.
func TestRPCAnswersUnderTheAPIAndAtItsAlias(t *testing.T) {
	f := newRPCFixture(t, 0.001, 2)
	sk := f.creds.Keys["pay"].SK
	for _, path := range []string{"/api/v1/rpc/ethereum", "/rpc/ethereum"} {
		r := f.post(t, path, sk, rpcRequest(1, "eth_chainId"))
		if r.status != 200 || !strings.Contains(string(r.body), `"result":"0x539"`) {
			t.Fatalf("POST %s: %d %s", path, r.status, r.body)
		}
	}
	f.post(t, "/api/v1/rpc/ethereum", sk, rpcRequest(1, "eth_chainId")).wantProblem(t, 429, apitypes.CodeRateLimited)
}

// Writes, and anything else off the list, are refused before the node: the node has
// eth_sendRawTransaction and eth_sign, and never hears of them.
func TestRPCRefusesWritesAndMethodsOffTheList(t *testing.T) {
	f := newRPCFixture(t, 0, 0)
	sk := f.creds.Keys["pay"].SK
	for i, m := range []string{"eth_sendRawTransaction", "eth_sendTransaction", "eth_sign", "eth_signTypedData_v4", "personal_sign"} {
		f.rpc(t, "ethereum", sk, rpcRequest(i, m, `"0x00"`))[0].wantError(t, fmt.Sprint(i), rpcproxy.CodeMethodNotFound, "Orders go through the lifecycle (POST /api/v1/payments")
	}
	for i, m := range []string{"admin_peers", "debug_traceTransaction", "miner_start", "txpool_content", "eth_subscribe", "eth_newFilter", "eth_getStorageAt"} {
		f.rpc(t, "ethereum", sk, rpcRequest(i, m))[0].wantError(t, fmt.Sprint(i), rpcproxy.CodeMethodNotFound, "the methods served are eth_chainId")
	}
	if n := f.eth.callCount(); n != 0 {
		t.Fatalf("the node heard %d calls", n)
	}
}

// A batch is answered in its order, each call on its own: forwarded, refused or invalid.
// A batch over the cap, or an empty one, is one error.
func TestRPCBatch(t *testing.T) {
	f := newRPCFixture(t, 0, 0)
	sk := f.creds.Keys["pay"].SK
	got := f.rpc(t, "ethereum", sk, "["+strings.Join([]string{
		rpcRequest(1, "eth_chainId"),
		rpcRequest(2, "eth_sendRawTransaction", `"0x00"`),
		`{"jsonrpc":"1.0","id":3,"method":"eth_chainId"}`,
		rpcRequest(4, "eth_blockNumber"),
		`{"jsonrpc":"2.0","method":"eth_chainId"}`,
		`7`,
	}, ",")+"]")
	if len(got) != 6 {
		t.Fatalf("%d answers to 6 calls", len(got))
	}
	got[0].wantResult(t, "1", `"0x539"`)
	got[1].wantError(t, "2", rpcproxy.CodeMethodNotFound, "lifecycle")
	got[2].wantError(t, "3", rpcproxy.CodeInvalidRequest, `"jsonrpc" must be "2.0"`)
	got[3].wantResult(t, "4", `"0x4e20"`)
	got[4].wantError(t, "null", rpcproxy.CodeInvalidRequest, "notifications")
	got[5].wantError(t, "null", rpcproxy.CodeInvalidRequest, "JSON object")
	if n := f.eth.callCount(); n != 2 {
		t.Fatalf("the node heard %d calls, want the 2 forwarded", n)
	}

	calls := make([]string, rpcproxy.MaxBatch+1)
	for i := range calls {
		calls[i] = rpcRequest(i, "eth_chainId")
	}
	f.rpc(t, "ethereum", sk, "["+strings.Join(calls, ",")+"]")[0].wantError(t, "null", rpcproxy.CodeLimitExceeded, "at most 20 calls")
	f.rpc(t, "ethereum", sk, "[]")[0].wantError(t, "null", rpcproxy.CodeInvalidRequest, "empty batch")
	if n := f.eth.callCount(); n != 2 {
		t.Fatalf("a refused batch reached the node: %d calls", n-2)
	}
	full := f.rpc(t, "ethereum", sk, "["+strings.Join(calls[:rpcproxy.MaxBatch], ",")+"]")
	if len(full) != rpcproxy.MaxBatch || string(full[19].ID) != "19" || string(full[19].Result) != `"0x539"` {
		t.Fatalf("a batch of %d: %+v", rpcproxy.MaxBatch, full)
	}
}

// eth_getLogs reads at most 10,000 blocks: tags and missing bounds are resolved on the
// node and sent as numbers, so the node reads the range that was checked.
func TestRPCGetLogsRange(t *testing.T) {
	f := newRPCFixture(t, 0, 0)
	sk := f.creds.Keys["pay"].SK
	logs := func(filter string) rpcAnswer {
		return f.rpc(t, "ethereum", sk, rpcRequest(9, "eth_getLogs", filter))[0]
	}
	// head is 20,000 (0x4e20): 10,001 blocks to latest is one too many, 10,000 is fine.
	logs(`{"fromBlock":"0x270f","toBlock":"latest"}`).wantError(t, "9", rpcproxy.CodeLimitExceeded, "at most 10000 blocks")
	logs(`{"fromBlock":"0x0"}`).wantError(t, "9", rpcproxy.CodeLimitExceeded, "20001")
	logs(`{"fromBlock":"earliest","toBlock":"0x2710"}`).wantError(t, "9", rpcproxy.CodeLimitExceeded, "10001")
	logs(`{"fromBlock":"0x2711","toBlock":"latest","address":"0x000000000000000000000000000000000000dEaD"}`).wantResult(t, "9", "[]")
	if got := f.eth.lastFilter(t); got["fromBlock"] != "0x2711" || got["toBlock"] != "0x4e20" || got["address"] == nil {
		t.Fatalf("the node was asked %v", got)
	}
	logs(`{}`).wantResult(t, "9", "[]")
	if got := f.eth.lastFilter(t); got["fromBlock"] != "0x4e20" || got["toBlock"] != "0x4e20" {
		t.Fatalf("a filter without bounds reached the node as %v, not latest to latest", got)
	}
	logs(`{"fromBlock":"safe","toBlock":"pending"}`).wantResult(t, "9", "[]")
	if got := f.eth.lastFilter(t); got["fromBlock"] != "0x4de0" || got["toBlock"] != "0x4e20" {
		t.Fatalf("safe to pending reached the node as %v", got)
	}
	hash := `"0x` + strings.Repeat("cd", 32) + `"`
	logs(`{"blockHash":`+hash+`}`).wantResult(t, "9", "[]")
	if got := f.eth.lastFilter(t); got["blockHash"] != strings.Trim(hash, `"`) || got["fromBlock"] != nil {
		t.Fatalf("a filter by block hash reached the node as %v", got)
	}
	logs(`{"fromBlock":"0x20","toBlock":"0x10"}`).wantError(t, "9", rpcproxy.CodeInvalidParams, "after toBlock")
	logs(`{"fromBlock":100}`).wantError(t, "9", rpcproxy.CodeInvalidParams, "fromBlock must be a block number")
	f.rpc(t, "ethereum", sk, `{"jsonrpc":"2.0","id":9,"method":"eth_getLogs","params":{"fromBlock":"0x1"}}`)[0].
		wantError(t, "9", rpcproxy.CodeInvalidParams, "params must be an array")
	f.rpc(t, "ethereum", sk, rpcRequest(9, "eth_getLogs"))[0].wantError(t, "9", rpcproxy.CodeInvalidParams, "one filter object")
	// Inside a batch, the same rule.
	got := f.rpc(t, "ethereum", sk, "["+rpcRequest(1, "eth_getLogs", `{"fromBlock":"0x0"}`)+","+rpcRequest(2, "eth_getLogs", `{}`)+"]")
	got[0].wantError(t, "1", rpcproxy.CodeLimitExceeded, "at most 10000 blocks")
	got[1].wantResult(t, "2", "[]")
}

// Whatever the body holds, past the HTTP checks the answer is JSON-RPC, never a problem.
func TestRPCMalformedRequests(t *testing.T) {
	f := newRPCFixture(t, 0, 0)
	sk := f.creds.Keys["pay"].SK
	for body, want := range map[string]struct {
		code int
		id   string
		says string
	}{
		`{"jsonrpc":"2.0","id":1,"method":"eth_chainId"`: {rpcproxy.CodeParseError, "null", "parse error"},
		`not json`:                            {rpcproxy.CodeParseError, "null", "parse error"},
		`[{"jsonrpc":"2.0","id":1}`:           {rpcproxy.CodeParseError, "null", "parse error"},
		`"eth_chainId"`:                       {rpcproxy.CodeInvalidRequest, "null", "JSON object"},
		`null`:                                {rpcproxy.CodeInvalidRequest, "null", "JSON object"},
		`{"jsonrpc":"2.0","id":1}`:            {rpcproxy.CodeInvalidRequest, "1", `"method"`},
		`{"jsonrpc":"2.0","id":1,"method":7}`: {rpcproxy.CodeInvalidRequest, "1", `"method"`},
		`{"id":1,"method":"eth_chainId"}`:     {rpcproxy.CodeInvalidRequest, "1", `"jsonrpc" must be "2.0"`},
		`{"jsonrpc":"2.0","id":{"a":1},"method":"eth_chainId"}`:       {rpcproxy.CodeInvalidRequest, "null", "id must be"},
		`{"jsonrpc":"2.0","id":null,"method":"eth_chainId"}`:          {0, "null", ""},
		`{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":{}}`: {rpcproxy.CodeInvalidParams, "1", "params must be an array"},
	} {
		got := f.rpc(t, "ethereum", sk, body)[0]
		if want.code == 0 {
			got.wantResult(t, want.id, `"0x539"`)
			continue
		}
		got.wantError(t, want.id, want.code, want.says)
	}
	// No body at all is a parse error too.
	r := f.do(t, "POST", "/rpc/ethereum", sk, nil)
	var empty rpcAnswer
	if err := json.Unmarshal(r.body, &empty); r.status != 200 || err != nil || empty.Error == nil || empty.Error.Code != rpcproxy.CodeParseError {
		t.Fatalf("no body: %d %s", r.status, r.body)
	}
	// The HTTP checks stay problems: a body that is not JSON by its type, and one too large.
	f.do(t, "POST", "/rpc/ethereum", sk, strings.NewReader(rpcRequest(1, "eth_chainId")), "Content-Type", "text/plain").
		wantProblem(t, 415, apitypes.CodeUnsupportedMediaType)
	f.post(t, "/rpc/ethereum", sk, `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":["`+strings.Repeat("a", MaxBodyBytes)+`"]}`).
		wantProblem(t, 413, apitypes.CodePayloadTooLarge)
	f.post(t, "/rpc/ethereum?chainId=1", sk, rpcRequest(1, "eth_chainId")).wantProblem(t, 422, apitypes.CodeValidationFailed)
}

// A node that cannot be reached is a JSON-RPC error naming the chain, never a 5xx, and
// its URL (whose path often holds a provider's key) is neither in the answer nor in the log.
func TestRPCNodeUnreachable(t *testing.T) {
	f := newRPCFixture(t, 0, 0)
	sk := f.creds.Keys["pay"].SK
	got := f.rpc(t, "polygon", sk, rpcRequest(1, "eth_chainId"))[0]
	got.wantError(t, "1", rpcproxy.CodeUnavailable, "the polygon node did not answer")
	batch := f.rpc(t, "polygon", sk, "["+rpcRequest(1, "eth_chainId")+","+rpcRequest(2, "eth_sendRawTransaction", `"0x00"`)+","+
		rpcRequest(3, "eth_blockNumber")+"]")
	batch[0].wantError(t, "1", rpcproxy.CodeUnavailable, "polygon node")
	batch[1].wantError(t, "2", rpcproxy.CodeMethodNotFound, "lifecycle")
	batch[2].wantError(t, "3", rpcproxy.CodeUnavailable, "polygon node")
	logged := f.fixture.logs.String()
	if !strings.Contains(logged, "chain node did not answer") || !strings.Contains(logged, `"chain":"polygon"`) {
		t.Fatalf("the failure is not in the log: %s", logged)
	}
	if strings.Contains(logged, "secret-project-key") {
		t.Fatalf("the node's URL is in the log: %s", logged)
	}
	// A read is never stored: an Idempotency-Key is taken and ignored, so each repeat asks
	// the node again (and an answer saying it did not answer is never replayed).
	for _, chain := range []string{"polygon", "ethereum"} {
		f.eth.mu.Lock()
		before := f.eth.calls
		f.eth.mu.Unlock()
		for range 2 {
			r := f.post(t, "/rpc/"+chain, sk, rpcRequest(1, "eth_chainId"), idempotencyHeader, "rpc-"+chain)
			if r.status != 200 || r.header.Get(replayedHeader) != "" {
				t.Fatalf("%s: %d %v %s", chain, r.status, r.header, r.body)
			}
		}
		f.eth.mu.Lock()
		asked := f.eth.calls - before
		f.eth.mu.Unlock()
		if want := map[string]int{"polygon": 0, "ethereum": 2}[chain]; asked != want {
			t.Fatalf("%s: the node was asked %d times for two requests under one key, want %d", chain, asked, want)
		}
		if rec, err := f.store.IdempotencyRecordOf(context.Background(), f.creds.OrgID, "rpc-"+chain); err != nil || rec != nil {
			t.Fatalf("%s: a read's key was stored: %+v %v", chain, rec, err)
		}
	}
}

// Who may call: an app's sk_ key, a tk_ key holding read, an OAuth token with <app>:read,
// of any app and organisation; not a pk_ key, a key or token without read, or a person.
// Chains without a node are 404.
func TestRPCCredentialsAndChains(t *testing.T) {
	f := newRPCFixture(t, 0, 0)
	body := rpcRequest(1, "eth_chainId")
	for name, token := range map[string]string{
		"pay sk": f.creds.Keys["pay"].SK, "treasury sk": f.creds.Keys["treasury"].SK, "trade tk read": f.creds.Keys["trade"].Read,
		"oauth earn:read": matrixAccessToken(t, f.fixture, "earn", "earn:read"), "other org pay sk": f.creds.OtherOrg.Keys["pay"]["sk"],
	} {
		if got := f.rpc(t, "ethereum", token, body)[0]; got.Error != nil {
			t.Errorf("%s: %+v", name, got.Error)
		}
	}
	f.post(t, "/rpc/ethereum", "", body).wantProblem(t, 401, apitypes.CodeUnauthenticated)
	f.post(t, "/rpc/ethereum", "sk_unknownunknownunknownunknownunknownunk", body).wantProblem(t, 401, apitypes.CodeUnauthenticated)
	for name, token := range map[string]string{
		"pay pk": f.creds.Keys["pay"].PK, "pay tk approve": f.creds.Keys["pay"].Approve,
		"oauth pay:write": matrixAccessToken(t, f.fixture, "pay", "pay:write"),
	} {
		if r := f.post(t, "/rpc/ethereum", token, body); r.status != 403 || r.problem.Code != apitypes.CodePermissionDenied {
			t.Errorf("%s: %d %s", name, r.status, r.body)
		}
	}
	owner := f.signIn(t, f.creds.Owner.Email, f.creds.Owner.Password)
	r := f.as(t, owner, "POST", "/rpc/ethereum", body)
	r.wantProblem(t, 403, apitypes.CodePermissionDenied)
	if !strings.Contains(r.problem.Detail, "not a person's session") {
		t.Fatalf("the owner's refusal does not say why: %s", r.body)
	}
	sk := f.creds.Keys["pay"].SK
	solana := f.post(t, "/rpc/solana", sk, body)
	solana.wantProblem(t, 404, apitypes.CodeNotFound)
	if !strings.Contains(solana.problem.Detail, "no JSON-RPC node") || !strings.Contains(solana.problem.Detail, "ethereum, polygon") {
		t.Fatalf("solana: %s", solana.body)
	}
	f.post(t, "/rpc/bitcoin", sk, body).wantProblem(t, 404, apitypes.CodeNotFound)
	f.do(t, "GET", "/rpc/ethereum", sk, nil).wantProblem(t, 405, apitypes.CodeMethodNotAllowed)
}

// Each request is a row of its app's request log, filed under its own organisation, and
// takes a token of its credential's rate limit, the one its other requests share.
func TestRPCRequestLogsAndRateLimit(t *testing.T) {
	f := newRPCFixture(t, 0.001, 3)
	ctx := context.Background()
	authn := auth.NewAuthenticator(f.store)
	pay, _ := authn.Authenticate(ctx, f.creds.Keys["pay"].SK)
	other, _ := authn.Authenticate(ctx, f.creds.OtherOrg.Keys["pay"]["sk"])
	f.post(t, "/rpc/ethereum", f.creds.Keys["pay"].SK, rpcRequest(1, "eth_chainId"), correlationHeader, "rpc-log-1")
	f.post(t, "/rpc/ethereum", f.creds.Keys["pay"].SK, "["+rpcRequest(1, "eth_chainId")+","+rpcRequest(2, "eth_blockNumber")+"]")
	f.post(t, "/rpc/solana", f.creds.OtherOrg.Keys["pay"]["sk"], rpcRequest(1, "eth_chainId"))
	rows := f.logs.all()
	if len(rows) != 3 {
		t.Fatalf("%d request log rows for 3 requests: %+v", len(rows), rows)
	}
	if r := rows[0]; r.OrgID != pay.OrgID || r.App != "pay" || r.Method != "POST" || r.Path != "/rpc/ethereum" || r.Status != 200 ||
		r.KeyID != pay.ID || r.CorrelationID != "rpc-log-1" {
		t.Fatalf("row %+v", r)
	}
	if r := rows[2]; r.OrgID != other.OrgID || r.OrgID == pay.OrgID || r.KeyID != other.ID || r.Path != "/rpc/solana" || r.Status != 404 {
		t.Fatalf("the other organisation's row %+v", r)
	}
	// The burst was 3: the third request of pay's key, to any route, is refused.
	f.do(t, "GET", "/api/v1/payments", f.creds.Keys["pay"].SK, nil)
	r := f.post(t, "/rpc/ethereum", f.creds.Keys["pay"].SK, rpcRequest(1, "eth_chainId"))
	r.wantProblem(t, 429, apitypes.CodeRateLimited)
	if r.header.Get("Retry-After") == "" {
		t.Fatalf("429 without Retry-After: %v", r.header)
	}
}

// The allow-list the proxy holds is the one docs/api.md and openapi.json give integrators.
func TestRPCAllowListIsTheDocumentedOne(t *testing.T) {
	listedBy := func(names *regexp.Regexp, text string) []string {
		var out []string
		for _, m := range names.FindAllStringSubmatch(text, -1) {
			out = append(out, m[1])
		}
		return out
	}
	evmNames, solanaNames := regexp.MustCompile("`((?:eth|net)_[A-Za-z]+)`"), regexp.MustCompile("`((?:get|is)[A-Z][A-Za-z]+)`")
	listed := func(text string) []string { return listedBy(evmNames, text) }
	listedSolana := func(text string) []string { return listedBy(solanaNames, text) }
	guide, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	_, served, _ := strings.Cut(string(guide), "**Methods served**")
	served, _, _ = strings.Cut(served, "Any other method")
	var doc struct {
		Paths map[string]map[string]struct {
			Description string `json:"description"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(docs.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	_, contract, _ := strings.Cut(doc.Paths["/api/v1/rpc/{chain}"]["post"].Description, "Only these read-only methods are served:")
	contract, _, _ = strings.Cut(contract, ". ")
	for where, got := range map[string][]string{"docs/api.md": listed(served), "openapi.json": listed(contract)} {
		if !slices.Equal(got, rpcproxy.Methods) {
			t.Errorf("%s lists %v; the proxy serves %v", where, got, rpcproxy.Methods)
		}
	}

	_, onSolana, _ := strings.Cut(string(guide), "**On solana**")
	onSolana, _, _ = strings.Cut(onSolana, "are refused as writes")
	_, solanaContract, _ := strings.Cut(doc.Paths["/api/v1/rpc/{chain}"]["post"].Description, "these reads are served instead:")
	solanaContract, _, _ = strings.Cut(solanaContract, "are refused as writes")
	for where, got := range map[string][]string{"docs/api.md": listedSolana(onSolana), "openapi.json": listedSolana(solanaContract)} {
		if !slices.Equal(got, rpcproxy.SolanaMethods) {
			t.Errorf("%s lists %v for solana; the proxy serves %v", where, got, rpcproxy.SolanaMethods)
		}
	}
}

// Each app has its own budget of JSON-RPC calls, every call of a batch counted and shared
// by all its credentials: spent through two keys of pay, it refuses pay's next call with
// 429 and Retry-After, asking nothing of the node, while trade's budget is untouched.
func TestEachAppHasItsOwnBudgetOfRPCCalls(t *testing.T) {
	f := newRPCFixture(t, 1000, 1000, func(c *Config) { c.RPCRateLimit, c.RPCRateBurst = 0.001, 5 })
	pay, trade := f.creds.Keys["pay"], f.creds.Keys["trade"]
	batch := func(n int) string {
		calls := make([]string, n)
		for i := range calls {
			calls[i] = rpcRequest(i+1, "eth_chainId")
		}
		return "[" + strings.Join(calls, ",") + "]"
	}
	if answers := f.rpc(t, "ethereum", pay.SK, batch(3)); len(answers) != 3 || answers[0].Error != nil {
		t.Fatalf("three calls of five: %+v", answers)
	}
	if answers := f.rpc(t, "ethereum", pay.Read, batch(2)); len(answers) != 2 || answers[1].Error != nil {
		t.Fatalf("two more, through another key of the app: %+v", answers)
	}
	f.eth.mu.Lock()
	before := f.eth.calls
	f.eth.mu.Unlock()
	for _, token := range []string{pay.SK, pay.Read} {
		r := f.post(t, "/rpc/ethereum", token, rpcRequest(1, "eth_chainId"))
		r.wantProblem(t, 429, apitypes.CodeRateLimited)
		if r.header.Get("Retry-After") == "" || !strings.Contains(r.problem.Detail, "pay app's JSON-RPC budget") {
			t.Fatalf("the spent budget: %v %s", r.header, r.body)
		}
	}
	f.eth.mu.Lock()
	asked := f.eth.calls - before
	f.eth.mu.Unlock()
	if asked != 0 {
		t.Fatalf("refused calls reached the node %d times", asked)
	}
	if answers := f.rpc(t, "ethereum", trade.SK, batch(5)); len(answers) != 5 || answers[4].Error != nil {
		t.Fatalf("another app's budget is its own: %+v", answers)
	}
}

// Solana's node shares its app's budget with the EVM chains': one app's calls on any chain
// draw from one budget, and a spent budget refuses Solana's calls before they reach its node.
func TestSolanaDrawsOnTheAppsOneBudget(t *testing.T) {
	var mu sync.Mutex
	asked := 0
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var calls []struct {
			ID json.RawMessage `json:"id"`
		}
		body, _ := io.ReadAll(r.Body)
		batch := len(body) > 0 && body[0] == '['
		if !batch {
			body = []byte("[" + string(body) + "]")
		}
		_ = json.Unmarshal(body, &calls)
		mu.Lock()
		asked += len(calls)
		mu.Unlock()
		answers := make([]string, len(calls))
		for i, c := range calls {
			answers[i] = `{"jsonrpc":"2.0","id":` + string(c.ID) + `,"result":4242}`
		}
		w.Header().Set("Content-Type", "application/json")
		if batch {
			_, _ = io.WriteString(w, "["+strings.Join(answers, ",")+"]")
			return
		}
		_, _ = io.WriteString(w, answers[0])
	}))
	defer node.Close()
	f := newRPCFixture(t, 1000, 1000, func(c *Config) {
		c.RPCRateLimit, c.RPCRateBurst = 0.001, 5
		c.RPCNodes["solana"] = rpcproxy.Dial(node.URL)
	})
	pay, trade := f.creds.Keys["pay"], f.creds.Keys["trade"]
	if answers := f.rpc(t, "ethereum", pay.SK, "["+rpcRequest(1, "eth_chainId")+","+rpcRequest(2, "eth_chainId")+","+rpcRequest(3, "eth_chainId")+"]"); len(answers) != 3 {
		t.Fatalf("three calls on ethereum: %+v", answers)
	}
	if answers := f.rpc(t, "solana", pay.SK, "["+rpcRequest(1, "getSlot")+","+rpcRequest(2, "getSlot")+"]"); len(answers) != 2 || answers[1].Error != nil ||
		string(answers[1].Result) != "4242" {
		t.Fatalf("two calls on solana: %+v", answers)
	}
	r := f.post(t, "/rpc/solana", pay.Read, rpcRequest(1, "getSlot"))
	r.wantProblem(t, 429, apitypes.CodeRateLimited)
	mu.Lock()
	reached := asked
	mu.Unlock()
	if reached != 2 {
		t.Fatalf("the node was asked %d calls, want the 2 within the budget", reached)
	}
	if answers := f.rpc(t, "solana", trade.SK, rpcRequest(1, "getSlot")); len(answers) != 1 || answers[0].Error != nil {
		t.Fatalf("another app's budget is its own: %+v", answers)
	}
}
