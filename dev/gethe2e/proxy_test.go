package gethe2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// rpcProxy stands between the treasury processes and a node (CHAINS_FILE's rpcUrl, or
// SOLANA_RPC_URL, points at it) and passes every JSON-RPC request through unchanged. Armed,
// it lets the next transaction sent (eth_sendRawTransaction, or Solana's sendTransaction)
// reach the node and, before handing the node's answer back, calls the hook, which kills
// the workers: the sender dies with its transaction on the node and not yet recorded, the
// window between a broadcast and its commit, hit on purpose.
type rpcProxy struct {
	srv *httptest.Server
	hc  *http.Client

	mu sync.Mutex
	// target is the node's URL; retarget changes it (a node restarted on another port).
	target string
	armed  func()
	// cheap, until the next transaction is sent, understates the fee market: the latest
	// block's base fee and the suggested tip read 1 wei, so the transaction prepared then
	// pays less than the chain asks and sits in geth's pool unmined.
	cheap bool
}

// understate makes the proxy understate the fee market until the next transaction is sent.
func (p *rpcProxy) understate() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cheap = true
}

// lie rewrites an answer while the proxy understates the fee market; a transaction sent
// ends it.
func (p *rpcProxy) lie(request, answer []byte) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.cheap {
		return answer
	}
	var call struct {
		Method string            `json:"method"`
		Params []json.RawMessage `json:"params"`
	}
	if json.Unmarshal(request, &call) != nil {
		return answer
	}
	switch {
	case call.Method == "eth_sendRawTransaction":
		p.cheap = false
	case call.Method == "eth_maxPriorityFeePerGas":
		var reply map[string]any
		if json.Unmarshal(answer, &reply) == nil {
			reply["result"] = "0x1"
			answer, _ = json.Marshal(reply)
		}
	case call.Method == "eth_getBlockByNumber" && len(call.Params) > 0 && string(call.Params[0]) == `"latest"`:
		var reply map[string]any
		if json.Unmarshal(answer, &reply) == nil {
			if block, ok := reply["result"].(map[string]any); ok {
				block["baseFeePerGas"] = "0x1"
				answer, _ = json.Marshal(reply)
			}
		}
	}
	return answer
}

func startProxy(target string) *rpcProxy {
	p := &rpcProxy{target: target, hc: &http.Client{Timeout: time.Minute}}
	p.srv = httptest.NewServer(p)
	return p
}

func (p *rpcProxy) url() string { return p.srv.URL }

// retarget sends what comes next to another node URL.
func (p *rpcProxy) retarget(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
}

func (p *rpcProxy) close() { p.srv.Close() }

// arm makes the next transaction sent through the proxy call hook once it reached geth.
func (p *rpcProxy) arm(hook func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = hook
}

func (p *rpcProxy) take() func() {
	p.mu.Lock()
	defer p.mu.Unlock()
	hook := p.armed
	p.armed = nil
	return hook
}

func (p *rpcProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	resp, err := p.hc.Post(target, "application/json", bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	answer = p.lie(body, answer)
	if bytes.Contains(body, []byte(`"eth_sendRawTransaction"`)) || bytes.Contains(body, []byte(`"sendTransaction"`)) {
		if hook := p.take(); hook != nil {
			hook() // the caller is gone by the time it returns
		}
	}
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}
