// Package devsvm runs a Solana chain for the dev bundle and the tests: Solana's own runtime
// (litesvm, pinned in package.json) behind server.js, a small JSON-RPC server that answers
// in Solana's shapes, as a Node child process. Programs run in the real SVM with the real
// SPL Token and associated-token-account programs; server.js adds slots, blockhash expiry,
// signature statuses and a state file, so a restarted node resumes the same chain.
//
// Node comes from the machine (Debian: apt-get install nodejs npm); the npm modules from
// `make devsvm`, which installs them into bin/devsvm.
package devsvm

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mr-tron/base58"
	"github.com/shopspring/decimal"
)

//go:embed server.js
var serverJS []byte

// The accounts server.js makes at a chain's first start, each the public key of the seed
// SHA-256(label), so that they are known before any node runs: the USDC-like mint, and the
// owner of the frozen USDC account, the dev bundle's documented failure address (a USDC
// transfer to it fails with the token program's AccountFrozen).
var (
	USDCMint    = seeded("treasury dev usdc mint")
	FrozenOwner = seeded("treasury dev frozen payee")
)

func seeded(label string) string {
	seed := sha256.Sum256([]byte(label))
	return base58.Encode(ed25519.NewKeyFromSeed(seed[:]).Public().(ed25519.PublicKey))
}

// ErrNoNode and ErrNoModules say what the machine lacks; Start wraps them with where it looked.
var (
	ErrNoNode    = errors.New("devsvm: node is not on PATH: install Node.js 20 or newer (Debian: apt-get install nodejs npm)")
	ErrNoModules = errors.New("devsvm: the litesvm npm modules are not installed: run `make devsvm` at the repository root")
)

const (
	readyTimeout = 30 * time.Second
	callTimeout  = 10 * time.Second
	stopTimeout  = 10 * time.Second
	readyPrefix  = "devsvm listening on "
	pidFile      = "devsvm.pid"
)

// Options configure a node.
type Options struct {
	// Dir keeps the chain in Dir/state.json (created); empty uses a temporary directory,
	// removed by Stop.
	Dir string
	// SlotTime is how often a slot passes; default 400ms, as on Solana.
	SlotTime time.Duration
	// Modules is the directory whose node_modules holds litesvm. Default:
	// $TREASURY_DEVSVM_MODULES, else devsvm beside the running executable, else bin/devsvm
	// in the working directory or an ancestor up to the module root (where `make devsvm`
	// puts it, so `go test` finds it).
	Modules string
	// Log receives the server's log lines.
	Log *slog.Logger
}

// Info describes the chain: its identity and the dev USDC mint with its frozen payee.
type Info struct {
	GenesisHash string `json:"genesisHash"`
	Slot        uint64 `json:"slot"`
	SlotMs      int64  `json:"slotMs"`
	USDCMint    string `json:"usdcMint"`
	// USDCDecimals is 6.
	USDCDecimals uint8 `json:"usdcDecimals"`
	// FrozenOwner's USDC account, FrozenTokenAccount, is frozen: a transfer to it fails in
	// execution with the token program's AccountFrozen error (custom 0x11).
	FrozenOwner        string `json:"frozenOwner"`
	FrozenTokenAccount string `json:"frozenTokenAccount"`
}

// Node is a running devsvm server.
type Node struct {
	url     string
	dir     string
	tempDir bool
	cmd     *exec.Cmd
	http    *http.Client
	log     *slog.Logger

	exited  chan struct{} // closed once the process has exited
	waitErr error         // the process's exit, valid once exited is closed
	tail    *tail
	stop    sync.Once
	stopErr error
}

// Start runs a server and returns once it answers. ctx bounds the server's life: when it
// ends the server is stopped as by Stop. The server also exits by itself when this process
// dies, as it watches its standard input, whose other end only this process holds.
func Start(ctx context.Context, o Options) (*Node, error) {
	if o.SlotTime <= 0 {
		o.SlotTime = 400 * time.Millisecond
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, ErrNoNode
	}
	modules, err := modulesDir(o.Modules)
	if err != nil {
		return nil, err
	}
	n := &Node{dir: o.Dir, http: &http.Client{Timeout: callTimeout}, log: log, exited: make(chan struct{}), tail: &tail{}}
	if n.dir == "" {
		if n.dir, err = os.MkdirTemp("", "devsvm-"); err != nil {
			return nil, fmt.Errorf("devsvm: %w", err)
		}
		n.tempDir = true
	} else if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return nil, fmt.Errorf("devsvm: %w", err)
	} else if err := AwaitExit(n.dir, stopTimeout); err != nil {
		return nil, err
	}
	script := filepath.Join(n.dir, "server.js")
	if err := os.WriteFile(script, serverJS, 0o644); err != nil {
		n.cleanup()
		return nil, fmt.Errorf("devsvm: %w", err)
	}

	ready := make(chan string, 1)
	cmd := exec.CommandContext(ctx, node, script, "--port", "0", "--state", filepath.Join(n.dir, "state.json"),
		"--slot-ms", strconv.FormatInt(max(o.SlotTime.Milliseconds(), 1), 10), "--exit-with-stdin")
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(modules, "node_modules"))
	// Stopping by the context is a graceful stop, so the state is saved; killed if it hangs.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = stopTimeout
	// Its own process group: a Ctrl-C in the terminal reaches this process only, which
	// stops the server in its turn.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout = &lineWriter{line: func(l string) {
		if url, ok := strings.CutPrefix(l, readyPrefix); ok {
			select {
			case ready <- url:
			default:
			}
			return
		}
		log.Info(l, "process", "devsvm")
	}}
	cmd.Stderr = &lineWriter{line: func(l string) {
		n.tail.add(l)
		switch {
		case strings.HasPrefix(l, "error: "):
			log.Error(strings.TrimPrefix(l, "error: "), "process", "devsvm")
		case strings.HasPrefix(l, "warn: "):
			log.Warn(strings.TrimPrefix(l, "warn: "), "process", "devsvm")
		default:
			log.Info(strings.TrimPrefix(l, "info: "), "process", "devsvm")
		}
	}}
	// The write end stays open, unused, for as long as this process lives.
	if _, err := cmd.StdinPipe(); err != nil {
		n.cleanup()
		return nil, fmt.Errorf("devsvm: %w", err)
	}
	if err := cmd.Start(); err != nil {
		n.cleanup()
		return nil, fmt.Errorf("devsvm: starting %s: %w", node, err)
	}
	n.cmd = cmd
	// Read by the next Start on this directory (and by tests), which must not run a second
	// server over this one's state while it is still saving it.
	if err := os.WriteFile(filepath.Join(n.dir, pidFile), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		log.Warn("devsvm: writing the pid file", "err", err)
	}
	go func() {
		n.waitErr = cmd.Wait()
		close(n.exited)
	}()

	timer := time.NewTimer(readyTimeout)
	defer timer.Stop()
	select {
	case n.url = <-ready:
		log.Info("devsvm ready", "url", n.url, "dir", n.dir)
		return n, nil
	case <-n.exited:
		n.cleanup()
		return nil, fmt.Errorf("devsvm: the server exited before it was ready (%v); its last lines:\n%s", n.waitErr, n.tail)
	case <-timer.C:
		_ = n.Stop()
		return nil, fmt.Errorf("devsvm: the server was not ready within %v; its last lines:\n%s", readyTimeout, n.tail)
	case <-ctx.Done():
		_ = n.Stop()
		return nil, fmt.Errorf("devsvm: %w", ctx.Err())
	}
}

// modulesDir finds the directory whose node_modules holds litesvm.
func modulesDir(explicit string) (string, error) {
	has := func(d string) bool {
		_, err := os.Stat(filepath.Join(d, "node_modules", "litesvm", "package.json"))
		return err == nil
	}
	only := func(d, what string) (string, error) {
		if has(d) {
			return d, nil
		}
		return "", fmt.Errorf("%w (%s %s has no node_modules/litesvm)", ErrNoModules, what, d)
	}
	if explicit != "" {
		return only(explicit, "Options.Modules")
	}
	if env := os.Getenv("TREASURY_DEVSVM_MODULES"); env != "" {
		return only(env, "TREASURY_DEVSVM_MODULES")
	}
	var looked []string
	if exe, err := os.Executable(); err == nil {
		d := filepath.Join(filepath.Dir(exe), "devsvm")
		if has(d) {
			return d, nil
		}
		looked = append(looked, d)
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			bin := filepath.Join(d, "bin", "devsvm")
			if has(bin) {
				return bin, nil
			}
			looked = append(looked, bin)
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil || filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", fmt.Errorf("%w, or set TREASURY_DEVSVM_MODULES (looked in %s)", ErrNoModules, strings.Join(looked, ", "))
}

// URL is the server's JSON-RPC endpoint.
func (n *Node) URL() string { return n.url }

// Info describes the chain.
func (n *Node) Info(ctx context.Context) (Info, error) {
	var info Info
	err := n.Call(ctx, "devsvm_info", []any{}, &info)
	return info, err
}

// Airdrop credits lamports to address, and returns once the airdrop has landed.
func (n *Node) Airdrop(ctx context.Context, address string, lamports uint64) error {
	var sig string
	if err := n.Call(ctx, "requestAirdrop", []any{address, lamports}, &sig); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for pause := 5 * time.Millisecond; ; pause = min(2*pause, 200*time.Millisecond) {
		var st struct {
			Value []*struct {
				Err any `json:"err"`
			} `json:"value"`
		}
		if err := n.Call(ctx, "getSignatureStatuses", []any{[]string{sig}}, &st); err != nil {
			return err
		}
		if len(st.Value) == 1 && st.Value[0] != nil {
			if st.Value[0].Err != nil {
				return fmt.Errorf("devsvm: airdrop %s failed: %v", sig, st.Value[0].Err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("devsvm: airdrop %s did not land: %w", sig, ctx.Err())
		case <-time.After(pause):
		}
	}
}

// MintUSDC mints baseUnits (1 USDC = 1,000,000) of the dev USDC to owner's associated token
// account, creating the account if need be.
func (n *Node) MintUSDC(ctx context.Context, owner string, baseUnits uint64) error {
	var balance string
	return n.Call(ctx, "devsvm_mintTo", []any{owner, strconv.FormatUint(baseUnits, 10)}, &balance)
}

// Fund gives an address SOL (an airdrop) or the dev USDC (minted into its associated token
// account), an amount in the asset's units.
func (n *Node) Fund(ctx context.Context, address, asset string, amount decimal.Decimal) error {
	decimals, give := int32(9), func(units uint64) error { return n.Airdrop(ctx, address, units) }
	switch asset {
	case "SOL":
	case "USDC":
		decimals, give = 6, func(units uint64) error { return n.MintUSDC(ctx, address, units) }
	default:
		return fmt.Errorf("devsvm: the dev Solana chain has no %s", asset)
	}
	units := amount.Shift(decimals)
	if !units.IsInteger() || units.Sign() <= 0 || !units.BigInt().IsUint64() {
		return fmt.Errorf("devsvm: %s %s is not a positive whole number of base units that fits a u64", amount, asset)
	}
	return give(units.BigInt().Uint64())
}

// Fee is what the chain charged a landed transaction, in lamports.
func (n *Node) Fee(ctx context.Context, signature string) (uint64, error) {
	var tx struct {
		Meta struct {
			Fee uint64 `json:"fee"`
		} `json:"meta"`
	}
	err := n.Call(ctx, "getTransaction", []any{signature, map[string]any{"encoding": "base64", "commitment": "confirmed"}}, &tx)
	return tx.Meta.Fee, err
}

// AdvanceSlots moves the chain k slots on at once.
func (n *Node) AdvanceSlots(ctx context.Context, k int) error {
	var slot uint64
	return n.Call(ctx, "devsvm_advanceSlots", []any{k}, &slot)
}

// Stop ends the server (SIGTERM, which saves the state; killed if it has not exited within
// 10 s) and waits for it. Later calls return the first one's result.
func (n *Node) Stop() error {
	n.stop.Do(func() {
		defer n.cleanup()
		select {
		case <-n.exited:
		default:
			if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
				n.stopErr = fmt.Errorf("devsvm: %w", err)
			}
			select {
			case <-n.exited:
			case <-time.After(stopTimeout):
				_ = n.cmd.Process.Kill()
				<-n.exited
				n.stopErr = fmt.Errorf("devsvm: the server did not exit within %v of SIGTERM; killed, its state may be up to a second old", stopTimeout)
				return
			}
		}
		var exit *exec.ExitError
		if errors.As(n.waitErr, &exit) {
			n.stopErr = fmt.Errorf("devsvm: the server exited with %v; its last lines:\n%s", n.waitErr, n.tail)
		}
	})
	return n.stopErr
}

func (n *Node) cleanup() {
	if n.tempDir {
		_ = os.RemoveAll(n.dir)
	} else if n.cmd != nil {
		_ = os.Remove(filepath.Join(n.dir, pidFile))
	}
}

// AwaitExit waits until no server started on dir is running: one whose parent was killed
// outright exits by itself, saving its state as it goes, and nothing may use or remove dir
// before it has. One still running after timeout is killed. Linux only (it reads /proc).
func AwaitExit(dir string, timeout time.Duration) error {
	raw, err := os.ReadFile(filepath.Join(dir, pidFile))
	if err != nil {
		return nil
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 0 {
		return nil
	}
	script := filepath.Join(dir, "server.js")
	running := func() bool {
		// The command line tells this server from an unrelated process that reuses the pid.
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !bytes.Contains(cmdline, []byte(script)) {
			return false
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		// A zombie has exited; only its parent's wait is missing.
		return err == nil && !bytes.Contains(stat, []byte(") Z "))
	}
	for deadline := time.Now().Add(timeout); running(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			for killed := time.Now().Add(stopTimeout); running(); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(killed) {
					return fmt.Errorf("devsvm: the server left running on %s (pid %d) does not exit", dir, pid)
				}
			}
		}
	}
	return nil
}

// Error is a JSON-RPC error answer.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("devsvm: %s (JSON-RPC error %d)", e.Message, e.Code)
}

// Call makes one JSON-RPC call to the node and decodes its result into out.
func (n *Node) Call(ctx context.Context, method string, params []any, out any) error {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := n.http.Do(req)
	if err != nil {
		return fmt.Errorf("devsvm: %s: %w", method, err)
	}
	defer resp.Body.Close()
	var r struct {
		Result json.RawMessage `json:"result"`
		Error  *Error          `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return fmt.Errorf("devsvm: %s: HTTP %s: %w", method, resp.Status, err)
	}
	if r.Error != nil {
		return r.Error
	}
	if err := json.Unmarshal(r.Result, out); err != nil {
		return fmt.Errorf("devsvm: %s: %w", method, err)
	}
	return nil
}

// lineWriter hands each complete line written to it to line.
type lineWriter struct {
	line func(string)
	buf  []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.line(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
}

// tail keeps the server's last stderr lines, for the errors that need them.
type tail struct {
	mu    sync.Mutex
	lines []string
}

func (t *tail) add(l string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, l)
	if len(t.lines) > 20 {
		t.lines = t.lines[len(t.lines)-20:]
	}
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}
