package gethe2e

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// rpcProxy stands between the treasury processes and geth (EVM_CHAINS_FILE's rpcUrl points
// at it) and passes every JSON-RPC request through unchanged. Armed, it lets the next
// eth_sendRawTransaction reach geth and, before handing geth's answer back, calls the
// hook, which kills the workers: the sender dies with its transaction on the node and not
// yet recorded, the window between a broadcast and its commit, hit on purpose.
type rpcProxy struct {
	target string
	srv    *httptest.Server
	hc     *http.Client

	mu    sync.Mutex
	armed func()
}

func startProxy(target string) *rpcProxy {
	p := &rpcProxy{target: target, hc: &http.Client{Timeout: time.Minute}}
	p.srv = httptest.NewServer(p)
	return p
}

func (p *rpcProxy) url() string { return p.srv.URL }

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
	resp, err := p.hc.Post(p.target, "application/json", bytes.NewReader(body))
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
	if bytes.Contains(body, []byte(`"eth_sendRawTransaction"`)) {
		if hook := p.take(); hook != nil {
			hook() // the caller is gone by the time it returns
		}
	}
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}
