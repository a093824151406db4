// Package rpcproxy forwards an app's JSON-RPC 2.0 requests to a chain's node: the
// read-only methods of its allow-list (EVM's, or Solana's on solana), one call or a capped
// batch, with eth_getLogs held to a block range. Everything it refuses, and everything that goes wrong on the way to the
// node, is answered as a JSON-RPC error object, never as an HTTP failure: a JSON-RPC
// client reads those.
package rpcproxy

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"
)

// Node is a chain's JSON-RPC node. go-ethereum's *rpc.Client is one, dialled or in process.
type Node interface {
	CallContext(ctx context.Context, result any, method string, args ...any) error
	BatchCallContext(ctx context.Context, b []rpc.BatchElem) error
}

// Nodes are the chains' nodes by chain name. A chain without one (simulated) has no entry.
type Nodes map[string]Node

// Limits of what one request may ask of a node.
const (
	// MaxBatch is the most calls one batch may hold.
	MaxBatch = 20
	// MaxLogBlocks is the widest block range one eth_getLogs may cover, bounds included.
	MaxLogBlocks = 10_000
	// DefaultTimeout bounds the node's work for one request, the calls of a batch together.
	DefaultTimeout = 10 * time.Second
	// MaxAnswerBytes bounds what the node may answer one request: a larger answer is
	// refused (CodeLimitExceeded) as it is read, never read whole.
	MaxAnswerBytes = 10 << 20
)

// ErrAnswerTooLarge is a node's answer cut off at MaxAnswerBytes.
var ErrAnswerTooLarge = fmt.Errorf("rpcproxy: the node's answer is larger than %d MiB", MaxAnswerBytes>>20)

// Calls is how many calls body asks the node for, as a budget of calls counts them: one
// for a single request, each call of a batch; a batch refused whole (empty, over
// MaxBatch, not JSON) reaches no node and counts one.
func Calls(body []byte) int {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '[' {
		return 1
	}
	var elems []json.RawMessage
	if json.Unmarshal(body, &elems) != nil || len(elems) == 0 || len(elems) > MaxBatch {
		return 1
	}
	return len(elems)
}

// Methods is the allow-list: the read-only methods served, in the order docs/api.md lists them.
var Methods = []string{
	"eth_chainId", "net_version", "eth_blockNumber", "eth_getBalance", "eth_getCode", "eth_getTransactionCount",
	"eth_call", "eth_estimateGas", "eth_gasPrice", "eth_maxPriorityFeePerGas", "eth_feeHistory",
	"eth_getBlockByNumber", "eth_getBlockByHash", "eth_getTransactionByHash", "eth_getTransactionReceipt", "eth_getLogs",
}

// SolanaMethods is Solana's allow-list: reads of accounts, balances, blockhashes and
// signatures, in the order docs/api.md lists them. Scans of a whole program's accounts
// (getProgramAccounts) and anything that sends are left out.
var SolanaMethods = []string{
	"getHealth", "getVersion", "getGenesisHash", "getSlot", "getBlockHeight", "getEpochInfo",
	"getLatestBlockhash", "isBlockhashValid", "getFeeForMessage", "getRecentPrioritizationFees", "getMinimumBalanceForRentExemption",
	"getBalance", "getAccountInfo", "getMultipleAccounts", "getTokenAccountBalance", "getTokenAccountsByOwner", "getTokenSupply",
	"getSignatureStatuses", "getTransaction",
}

// Solana is the chain whose node speaks Solana's JSON-RPC.
const Solana = "solana"

// methodsOf is the allow-list of a chain.
func methodsOf(chain string) []string {
	if chain == Solana {
		return SolanaMethods
	}
	return Methods
}

// Error codes of the answers this package makes itself: JSON-RPC 2.0's own, and
// EIP-1474's for a limit and for a node that did not answer.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeUnavailable    = -32002
	CodeLimitExceeded  = -32005
)

// Error is a JSON-RPC error object.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// Response is a JSON-RPC response object: Result (JSON null included) or Error.
type Response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// Answer is what Forward answers to one HTTP request.
type Answer struct {
	// Body is a JSON-RPC response object, or an array of them for a batch.
	Body []byte
	// NodeErr is the first failure to reach the node, or nil. Body says only that the node
	// did not answer; NodeErr is for the service's log, with any URL left out (chain.RedactURL).
	NodeErr error
}

// Proxy forwards JSON-RPC requests to a node.
type Proxy struct {
	// Timeout bounds the node's work for one request (DefaultTimeout when zero).
	Timeout time.Duration
}

// call is one element of a request, once read: either answered here (Error) or to forward.
type call struct {
	id     json.RawMessage
	method string
	args   []any
	err    *Error
	result json.RawMessage
}

// Forward answers body, a JSON-RPC 2.0 request or batch, from node. chain names the
// chain in messages.
func (p Proxy) Forward(ctx context.Context, chain string, node Node, body []byte) Answer {
	body = bytes.TrimSpace(body)
	if !json.Valid(body) {
		return single(&call{err: &Error{Code: CodeParseError, Message: "parse error: the body is not JSON"}})
	}
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(max(p.Timeout, 0), DefaultTimeout))
	defer cancel()
	f := &forwarding{chain: chain, node: node, ctx: ctx, heads: map[rpc.BlockNumber]uint64{}}
	if body[0] != '[' {
		c := f.read(body)
		f.send([]*call{c})
		return Answer{Body: single(c).Body, NodeErr: f.nodeErr}
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(body, &elems); err != nil {
		return single(&call{err: &Error{Code: CodeParseError, Message: "parse error: the body is not JSON"}})
	}
	switch {
	case len(elems) == 0:
		return single(&call{err: &Error{Code: CodeInvalidRequest, Message: "invalid request: an empty batch"}})
	case len(elems) > MaxBatch:
		return single(&call{err: &Error{Code: CodeLimitExceeded,
			Message: fmt.Sprintf("limit exceeded: a batch holds at most %d calls, this one %d; send it in parts", MaxBatch, len(elems))}})
	}
	calls := make([]*call, len(elems))
	for i, e := range elems {
		calls[i] = f.read(e)
	}
	f.send(calls)
	out := make([]Response, len(calls))
	for i, c := range calls {
		out[i] = c.response()
	}
	raw, _ := json.Marshal(out)
	return Answer{Body: raw, NodeErr: f.nodeErr}
}

func single(c *call) Answer {
	raw, _ := json.Marshal(c.response())
	return Answer{Body: raw}
}

func (c *call) response() Response {
	r := Response{JSONRPC: "2.0", ID: c.id, Error: c.err}
	if c.id == nil {
		r.ID = json.RawMessage("null")
	}
	if c.err == nil {
		r.Result = c.result
		if len(r.Result) == 0 {
			r.Result = json.RawMessage("null")
		}
	}
	return r
}

// forwarding is one request on its way to the node.
type forwarding struct {
	chain   string
	node    Node
	ctx     context.Context
	nodeErr error
	// heads are the block numbers the tags of this request's eth_getLogs resolved to.
	heads map[rpc.BlockNumber]uint64
}

// read checks one request object, and answers it here when it is not one to forward.
func (f *forwarding) read(raw json.RawMessage) *call {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return &call{err: invalidRequest("a request is a JSON object")}
	}
	c := &call{}
	id, hasID := obj["id"]
	if hasID {
		switch strings.TrimSpace(string(id))[0] {
		case '"', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			c.id = id
		default:
			c.err = invalidRequest("id must be a string, a number or null")
			return c
		}
	}
	if v, ok := obj["jsonrpc"]; !ok || string(bytes.TrimSpace(v)) != `"2.0"` {
		c.err = invalidRequest(`"jsonrpc" must be "2.0"`)
		return c
	}
	if err := json.Unmarshal(obj["method"], &c.method); err != nil || c.method == "" {
		c.err = invalidRequest(`"method" must be a method's name`)
		return c
	}
	if !hasID {
		c.err = invalidRequest("notifications (requests without an id) are not served: every method here is a read, whose answer needs an id")
		return c
	}
	if !slices.Contains(methodsOf(f.chain), c.method) {
		c.err = notServed(f.chain, c.method)
		return c
	}
	var params []json.RawMessage
	if raw, ok := obj["params"]; ok && string(bytes.TrimSpace(raw)) != "null" {
		if err := json.Unmarshal(raw, &params); err != nil {
			c.err = invalidParams("params must be an array")
			return c
		}
	}
	if c.method == "eth_getLogs" && f.chain != Solana {
		if params, c.err = f.boundLogs(params); c.err != nil {
			return c
		}
	}
	c.args = make([]any, len(params))
	for i, p := range params {
		c.args[i] = p
	}
	return c
}

// send forwards the calls not answered yet: one alone, several in one batch.
func (f *forwarding) send(calls []*call) {
	var pending []*call
	for _, c := range calls {
		if c.err == nil {
			pending = append(pending, c)
		}
	}
	switch len(pending) {
	case 0:
		return
	case 1:
		c := pending[0]
		c.err = f.outcome(f.node.CallContext(f.ctx, &c.result, c.method, c.args...))
		f.bound(pending)
		return
	}
	batch := make([]rpc.BatchElem, len(pending))
	for i, c := range pending {
		batch[i] = rpc.BatchElem{Method: c.method, Args: c.args, Result: &c.result}
	}
	if err := f.node.BatchCallContext(f.ctx, batch); err != nil {
		failed := f.outcome(err)
		for _, c := range pending {
			c.err = failed
		}
		return
	}
	for i, c := range pending {
		c.err = f.outcome(batch[i].Error)
	}
	f.bound(pending)
}

// bound refuses the answers of calls that together came to more than MaxAnswerBytes (a
// node in process hands them over whole; one over HTTP is cut off as it is read).
func (f *forwarding) bound(calls []*call) {
	total := 0
	for _, c := range calls {
		total += len(c.result)
	}
	if total <= MaxAnswerBytes {
		return
	}
	for _, c := range calls {
		c.result, c.err = nil, f.outcome(ErrAnswerTooLarge)
	}
}

// outcome is the answer to a call that went to the node: its own error passed through,
// or, when it did not answer, an error that says so and nothing more.
func (f *forwarding) outcome(err error) *Error {
	if err == nil || errors.Is(err, rpc.ErrNoResult) {
		return nil
	}
	if errors.Is(err, ErrAnswerTooLarge) {
		return &Error{Code: CodeLimitExceeded, Message: fmt.Sprintf("limit exceeded: the %s node's answer is larger than %d MiB; "+
			"ask for less (a narrower eth_getLogs range, fewer calls in a batch)", f.chain, MaxAnswerBytes>>20)}
	}
	var answered rpc.Error
	if errors.As(err, &answered) {
		e := &Error{Code: answered.ErrorCode(), Message: answered.Error()}
		var withData rpc.DataError
		if errors.As(err, &withData) {
			e.Data = withData.ErrorData()
		}
		return e
	}
	if f.nodeErr == nil {
		f.nodeErr = err
	}
	msg := "the " + f.chain + " node did not answer; retry later"
	if errors.Is(err, context.DeadlineExceeded) {
		msg = "the " + f.chain + " node did not answer in time; retry later, or ask for less"
	}
	return &Error{Code: CodeUnavailable, Message: msg}
}

// boundLogs holds an eth_getLogs filter to MaxLogBlocks: its bounds, tags resolved on the
// node (a missing bound is latest, as on the node), are sent as numbers, so the range the
// node reads is the range checked here even while the chain grows. A filter by block hash
// reads one block and goes as it is.
func (f *forwarding) boundLogs(params []json.RawMessage) ([]json.RawMessage, *Error) {
	var filter map[string]json.RawMessage
	if len(params) != 1 || json.Unmarshal(params[0], &filter) != nil || filter == nil {
		return nil, invalidParams("eth_getLogs takes one filter object")
	}
	if h, ok := filter["blockHash"]; ok && string(bytes.TrimSpace(h)) != "null" {
		return params, nil
	}
	var bounds [2]uint64
	for i, name := range []string{"fromBlock", "toBlock"} {
		tag := rpc.LatestBlockNumber
		if raw, ok := filter[name]; ok && string(bytes.TrimSpace(raw)) != "null" {
			if err := tag.UnmarshalJSON(raw); err != nil {
				return nil, invalidParams("eth_getLogs: " + name + " must be a block number (0x…) or a tag (latest, safe, finalized, earliest)")
			}
		}
		n, e := f.resolve(tag)
		if e != nil {
			return nil, e
		}
		bounds[i] = n
		filter[name], _ = json.Marshal(hexutil.Uint64(n))
	}
	from, to := bounds[0], bounds[1]
	if from > to {
		return nil, invalidParams(fmt.Sprintf("eth_getLogs: fromBlock %d is after toBlock %d", from, to))
	}
	if to-from+1 > MaxLogBlocks {
		return nil, &Error{Code: CodeLimitExceeded, Message: fmt.Sprintf(
			"limit exceeded: eth_getLogs covers at most %d blocks, this filter %d (blocks %d to %d); ask for the range in parts",
			MaxLogBlocks, to-from+1, from, to)}
	}
	bounded, _ := json.Marshal(filter)
	return []json.RawMessage{bounded}, nil
}

// resolve is the number of a block given by number or tag, asking the node for tags.
func (f *forwarding) resolve(tag rpc.BlockNumber) (uint64, *Error) {
	switch {
	case tag >= 0:
		return uint64(tag), nil
	case tag == rpc.EarliestBlockNumber:
		return 0, nil
	case tag == rpc.PendingBlockNumber:
		tag = rpc.LatestBlockNumber
	}
	if n, ok := f.heads[tag]; ok {
		return n, nil
	}
	var n hexutil.Uint64
	var err error
	if tag == rpc.LatestBlockNumber {
		err = f.node.CallContext(f.ctx, &n, "eth_blockNumber")
	} else {
		var head *struct {
			Number hexutil.Uint64 `json:"number"`
		}
		if err = f.node.CallContext(f.ctx, &head, "eth_getBlockByNumber", tag.String(), false); err == nil {
			if head == nil {
				return 0, invalidParams("eth_getLogs: the node has no " + tag.String() + " block yet")
			}
			n = head.Number
		}
	}
	if err != nil {
		return 0, f.outcome(err)
	}
	f.heads[tag] = uint64(n)
	return uint64(n), nil
}

func invalidRequest(why string) *Error {
	return &Error{Code: CodeInvalidRequest, Message: "invalid request: " + why}
}

func invalidParams(why string) *Error {
	return &Error{Code: CodeInvalidParams, Message: "invalid params: " + why}
}

// notServed refuses a method off the allow-list. Writes are named as such: funds move
// only through an order, where policy, approvals and the organisation's signature apply.
func notServed(chain, method string) *Error {
	if isWrite(method) {
		return &Error{Code: CodeMethodNotFound, Message: method + " is not served: this endpoint only reads the chain. " +
			"Orders go through the lifecycle (POST /api/v1/payments, /trade-orders, /earn-orders or /borrow-orders, then …/submit), " +
			"where policy, approvals and your organisation's signature apply."}
	}
	return &Error{Code: CodeMethodNotFound, Message: method + " is not served on " + chain + "; the methods served are " + strings.Join(methodsOf(chain), ", ")}
}

// isWrite says whether a method sends or signs a transaction or a message.
func isWrite(method string) bool {
	for _, prefix := range []string{"eth_send", "eth_sign", "personal_", "sendTransaction", "requestAirdrop", "simulateTransaction"} {
		if strings.HasPrefix(method, prefix) {
			return true
		}
	}
	return false
}

// Dial returns the node at rawURL, connected on its first call (and again after a failed
// connection): an API process starts, and serves everything else, while a node is down.
func Dial(rawURL string) Node { return &lazyNode{url: rawURL} }

type lazyNode struct {
	url    string
	mu     sync.Mutex
	client *rpc.Client
}

func (n *lazyNode) connected(ctx context.Context) (*rpc.Client, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.client == nil {
		// The node's answers are read through a cap: one larger than MaxAnswerBytes is
		// cut off, not read whole (over HTTP, and over a WebSocket by its message limit).
		c, err := rpc.DialOptions(ctx, n.url, rpc.WithHTTPClient(&http.Client{Transport: cappedTransport{http.DefaultTransport}}),
			rpc.WithWebsocketMessageSizeLimit(MaxAnswerBytes))
		if err != nil {
			return nil, err
		}
		n.client = c
	}
	return n.client, nil
}

func (n *lazyNode) CallContext(ctx context.Context, result any, method string, args ...any) error {
	c, err := n.connected(ctx)
	if err != nil {
		return err
	}
	return c.CallContext(ctx, result, method, args...)
}

func (n *lazyNode) BatchCallContext(ctx context.Context, b []rpc.BatchElem) error {
	c, err := n.connected(ctx)
	if err != nil {
		return err
	}
	return c.BatchCallContext(ctx, b)
}

// cappedTransport hands over each answer's body cut off at MaxAnswerBytes.
type cappedTransport struct{ next http.RoundTripper }

func (t cappedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	res.Body = &cappedBody{body: res.Body, left: MaxAnswerBytes}
	return res, nil
}

// cappedBody reads up to left bytes of body, then fails with ErrAnswerTooLarge.
type cappedBody struct {
	body io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells an answer of exactly the cap from a longer one.
		var one [1]byte
		n, err := b.body.Read(one[:])
		if n > 0 {
			return 0, ErrAnswerTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.body.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error { return b.body.Close() }
