// Package signer is the reference paired signer: a device that holds one wallet's key
// (secp256k1 on an EVM chain, ed25519 on a simulated one), follows the organisation's signing requests (woken over the live channel, polling
// the API as a fallback), checks each one and posts its signature. The service never sees
// the key.
package signer

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/opentreasury/treasury/client"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/keys"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/orders"
)

// Config is what the signer needs.
type Config struct {
	// BaseURL of the service, e.g. http://127.0.0.1:8080.
	BaseURL string
	// Token is the device's key: a treasury key holding sign (restricted to the wallet),
	// which reaches the signing requests of every app, or a key with sign on one app.
	Token string
	// WalletID is the wallet whose key this is; other wallets' requests are left alone.
	WalletID string
	Key      *keys.Key
	// ConfigID is a WebSocket config that wants Wallet.SigningRequested, of the token's
	// app (a treasury config, for a device key): each request of the wallet wakes the
	// signer at once. Without one it polls every Interval.
	ConfigID string
	// Interval between polls of the pending requests while the live channel is not
	// connected (or not configured). While it is, a sweep every LiveSweep is enough: the
	// channel wakes the signer for each request, and each reconnection reads what it
	// missed.
	Interval, LiveSweep time.Duration
	// Ledger, with a Policy, is the signer's record of what it has signed: a leg it signed
	// is not signed again as another transaction.
	Ledger *Ledger
	// Policy, when set, is the signer's own rules (SPEC 3.5a): every request is decoded
	// from its rawUnsignedTx and judged by them, and one that fails a check is refused
	// (POST …/refusal), failing its order signer_refused. Without one the signer checks
	// only that each request is consistent and of its wallet, and leaves alone what is not.
	Policy *Policy
	// Live tunes the live channel's connection (the client's defaults when nil).
	Live *client.Options
	Log  *slog.Logger
	HTTP *http.Client
	// CallbackHTTP reaches the Policy's callback (a client with CallbackTimeout when nil).
	CallbackHTTP *http.Client
	// RevertGrace is how long a transaction that reverts on the signer's own node is asked
	// about again before it is refused simulation_reverted (DefaultRevertGrace when zero;
	// negative refuses at the first revert).
	RevertGrace time.Duration
}

// LoadKey reads a key file as credentials.json gives a wallet's key: the hex of a
// secp256k1 key's 32 bytes (0x optional), or the base64 seed of an ed25519 key.
func LoadKey(path string) (*keys.Key, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	text := strings.TrimSpace(string(raw))
	if k, err := keys.Parse(chain.Secp256k1, text); err == nil {
		return k, nil
	}
	if k, err := keys.Parse(chain.Ed25519, text); err == nil {
		return k, nil
	}
	return nil, fmt.Errorf("%s holds neither the hex of a secp256k1 key nor a base64 ed25519 seed", path)
}

func withDefaults(cfg Config) Config {
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 15 * time.Second}
	}
	if cfg.CallbackHTTP == nil {
		cfg.CallbackHTTP = &http.Client{Timeout: CallbackTimeout}
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.LiveSweep <= 0 {
		cfg.LiveSweep = max(30*time.Second, cfg.Interval)
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.RevertGrace == 0 {
		cfg.RevertGrace = DefaultRevertGrace
	}
	return cfg
}

// Run signs pending requests of the wallet until ctx ends: at once, whenever the live
// channel announces one of the wallet's requests or (re)connects, and on the fallback
// poll while it is down.
func Run(ctx context.Context, cfg Config) error {
	cfg = withDefaults(cfg)
	wake := make(chan struct{}, 1)
	var live atomic.Bool
	if cfg.ConfigID != "" {
		go follow(ctx, cfg, wake, &live)
	}
	done := map[string]bool{}
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	var lastPass time.Time
	for {
		if err := pass(ctx, cfg, done); err != nil && ctx.Err() == nil {
			cfg.Log.Warn("signer pass failed", "error", err.Error())
		}
		lastPass = time.Now()
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				return nil
			case <-wake:
				waiting = false
			case <-t.C:
				waiting = live.Load() && time.Since(lastPass) < cfg.LiveSweep
			}
		}
	}
}

// follow keeps the live channel open, waking the signer for each signing request of its
// wallet and at each connection (what was missed meanwhile is read then). live says
// whether a connection is up; when the channel gives up (a revoked key, a deleted
// config), the signer goes on polling.
func follow(ctx context.Context, cfg Config, wake chan<- struct{}, live *atomic.Bool) {
	poke := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	opts := client.Options{}
	if cfg.Live != nil {
		opts = *cfg.Live
	}
	retry := opts.OnRetry
	opts.OnRetry = func(err error, wait time.Duration) {
		live.Store(false)
		cfg.Log.Warn("live channel lost; polling until it is back", "error", err.Error(), "retryIn", wait.String())
		if retry != nil {
			retry(err, wait)
		}
	}
	err := client.Follow(ctx, cfg.BaseURL, cfg.ConfigID, cfg.Token, func(f client.Frame) error {
		switch f.Type {
		case client.FrameReady:
			live.Store(true)
			cfg.Log.Info("live channel connected", "configId", cfg.ConfigID)
			poke()
		case client.FrameEvent:
			var data struct {
				WalletID string `json:"walletId"`
			}
			if f.Event == events.WalletSigningRequested && json.Unmarshal(f.Data, &data) == nil && data.WalletID == cfg.WalletID {
				poke()
			}
		}
		return nil
	}, &opts)
	live.Store(false)
	if err != nil && ctx.Err() == nil {
		cfg.Log.Error("live channel given up; polling only", "configId", cfg.ConfigID, "error", err.Error())
	}
}

// pass signs every pending request of the wallet that it has not signed yet.
func pass(ctx context.Context, cfg Config, done map[string]bool) error {
	cursor := ""
	// down are the chains whose node failed this pass: their requests wait for the next
	// one rather than each waiting out the node's timeout.
	down := map[string]bool{}
	for {
		q := url.Values{"status": {orders.SigningPending}, "limit": {"200"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page struct {
			Data       []client.SigningRequest `json:"data"`
			NextCursor *string                 `json:"nextCursor"`
		}
		if err := call(ctx, cfg, "GET", "/api/v1/signing-requests?"+q.Encode(), nil, &page); err != nil {
			return err
		}
		for _, r := range page.Data {
			if r.WalletID != cfg.WalletID || done[r.ID] {
				continue
			}
			f, wait := judge(ctx, cfg, r, down)
			if f == nil && !wait && cfg.Policy != nil && cfg.Policy.Callback != nil {
				f, wait = askCallback(ctx, cfg, r)
			}
			if wait {
				continue
			}
			if f != nil {
				if err := refuseOne(ctx, cfg, r, f); err != nil {
					cfg.Log.Warn("refusal not posted", "signingRequestId", r.ID, "error", err.Error())
					continue
				}
				done[r.ID] = true
				continue
			}
			if err := signOne(ctx, cfg, r); err != nil {
				cfg.Log.Warn("not signed", "signingRequestId", r.ID, "error", err.Error())
				continue
			}
			done[r.ID] = true
			cfg.Log.Info("signed", "verdict", "sign", "signingRequestId", r.ID, "orderId", r.OrderID, "leg", r.Leg, "checkedByPolicy", cfg.Policy != nil,
				"simulated", cfg.Policy != nil && cfg.Policy.Chains[r.Chain].node != nil && client.IsEVMTransaction(r))
		}
		if page.NextCursor == nil {
			return nil
		}
		cursor = *page.NextCursor
	}
}

// signOne checks that the digest is derived from the transaction shown and that the
// transaction is this wallet's (on a simulated chain, also that its payload is the one
// approved), then signs and posts.
func signOne(ctx context.Context, cfg Config, r client.SigningRequest) error {
	if !client.IsEVMTransaction(r) && !client.IsSolanaTransaction(r) {
		if _, f := readSimulated([]byte(r.UnsignedTx), cfg.WalletID); f != nil {
			return fmt.Errorf("refusing to sign: %w", f)
		}
	}
	sig, err := client.SignRequest(r, cfg.Key)
	if err != nil {
		return err
	}
	if cfg.Policy != nil && cfg.Ledger != nil {
		if err := cfg.Ledger.Record(r, time.Now()); err != nil {
			return fmt.Errorf("the ledger: %w", err)
		}
	}
	body, _ := json.Marshal(map[string]string{"signature": base64.StdEncoding.EncodeToString(sig)})
	return call(ctx, cfg, "POST", "/api/v1/signing-requests/"+r.ID+"/signature", body, nil)
}

// judge holds a request to the signer's own rules, its ledger of what it has signed and,
// with a node of its own, to what the transaction does there: nil when it may sign, or
// wait (true) when the node could not answer, the request staying pending until the next
// pass.
func judge(ctx context.Context, cfg Config, r client.SigningRequest, down map[string]bool) (*Refusal, bool) {
	if cfg.Policy == nil {
		return nil, false
	}
	tx, f := cfg.Policy.inspect(r, cfg.WalletID, walletAddress(cfg.Key))
	if f != nil {
		return f, false
	}
	if cfg.Ledger != nil {
		if f := cfg.Ledger.Check(r); f != nil {
			return f, false
		}
	}
	if down[r.Chain] {
		return nil, true
	}
	f, err := cfg.Policy.Simulate(ctx, r, tx, cfg.WalletID, walletAddress(cfg.Key))
	if err != nil {
		down[r.Chain] = true
		cfg.Log.Warn("deferred", "verdict", "retry", "signingRequestId", r.ID, "orderId", r.OrderID, "leg", r.Leg,
			"detail", "simulating on the signer's node: "+err.Error())
		return nil, true
	}
	if f != nil && f.Reason == "simulation_reverted" && cfg.RevertGrace > 0 {
		if cfg.Policy.withinRevertGrace(r.ID, time.Now(), cfg.RevertGrace) {
			cfg.Log.Info("deferred", "verdict", "retry", "signingRequestId", r.ID, "orderId", r.OrderID, "leg", r.Leg,
				"detail", fmt.Sprintf("it reverts on the signer's node (asked again until %s have passed): %s", cfg.RevertGrace, f.Detail))
			return nil, true
		}
	}
	return f, false
}

// walletAddress is the address the key signs for: its EVM address, or its Solana one for
// an ed25519 key.
func walletAddress(k *keys.Key) string { return cmp.Or(k.Address(), k.SolanaAddress()) }

// askCallback asks the customer's callback about a request every check passed: nil to
// sign, a refusal for its REJECT, or wait (true) for a RETRY or no verified answer, the
// request staying pending until the next pass asks again.
func askCallback(ctx context.Context, cfg Config, r client.SigningRequest) (*Refusal, bool) {
	action, reason, err := cfg.Policy.Callback.ask(ctx, cfg.CallbackHTTP, r)
	switch action {
	case CallbackApprove:
		return nil, false
	case CallbackReject:
		return refusal("callback_rejected", "the customer's callback rejected it: %s", cmp.Or(reason, "no reason given")), false
	}
	detail := "it asked to retry"
	if err != nil {
		detail = err.Error()
	}
	cfg.Log.Info("deferred", "verdict", "retry", "signingRequestId", r.ID, "orderId", r.OrderID, "leg", r.Leg, "detail", detail)
	return nil, true
}

// refuseOne posts the refusal of a request that failed a check of the policy, and logs the
// verdict.
func refuseOne(ctx context.Context, cfg Config, r client.SigningRequest, f *Refusal) error {
	cfg.Log.Warn("refused", "verdict", "refuse", "signingRequestId", r.ID, "orderId", r.OrderID, "leg", r.Leg,
		"reason", f.Reason, "detail", f.Detail)
	body, _ := json.Marshal(map[string]string{"reason": f.Reason, "detail": f.Detail})
	return call(ctx, cfg, "POST", "/api/v1/signing-requests/"+r.ID+"/refusal", body, nil)
}

func call(ctx context.Context, cfg Config, method, path string, body []byte, into any) error {
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(string(body))
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(cfg.BaseURL, "/")+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+cfg.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := cfg.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if resp.StatusCode >= 300 {
		var p struct {
			Code   string `json:"code"`
			Detail string `json:"detail"`
		}
		_ = json.Unmarshal(raw, &p)
		return fmt.Errorf("%s %s: %d %s %s", method, path, resp.StatusCode, p.Code, p.Detail)
	}
	if into != nil {
		return json.Unmarshal(raw, into)
	}
	return nil
}
