package signer_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opentreasury/treasury/api"
	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/dev/wait"
	"github.com/opentreasury/treasury/internal/assemble"
	"github.com/opentreasury/treasury/internal/chain/keys"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/signer"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
	"github.com/opentreasury/treasury/workflows"
)

// signals records the signatures the service hands to workflows.
type signals struct {
	got     chan workflows.Signature
	refused chan workflows.Refusal
}

func (s *signals) Submit(context.Context, workflows.Submission) (workflows.PolicyDecision, error) {
	return workflows.PolicyDecision{Allowed: true}, nil
}
func (s *signals) Start(context.Context, workflows.Submission) error { return nil }

func (s *signals) SubmitOutcome(context.Context, string, string) (workflows.PolicyDecision, error) {
	return workflows.PolicyDecision{Allowed: true}, nil
}
func (s *signals) SignalApproval(context.Context, string, workflows.ApprovalDecision) error {
	return nil
}
func (s *signals) SignalSignature(_ context.Context, _ string, sig workflows.Signature) error {
	s.got <- sig
	return nil
}

func (s *signals) SignalRefusal(_ context.Context, _ string, f workflows.Refusal) error {
	s.refused <- f
	return nil
}

// apiProcess is an API process over a seeded store, counting the signer's polls.
type apiProcess struct {
	url     string
	creds   *seed.Credentials
	store   *store.Store
	signals *signals
	polls   atomic.Int64
}

func startService(t *testing.T) *apiProcess {
	t.Helper()
	s := storetest.NewSQLite(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	creds, err := seed.Ensure(context.Background(), s, t.TempDir(), seed.URLs{BaseURL: "http://test"}, log)
	if err != nil {
		t.Fatal(err)
	}
	live := assemble.StartLive(s, assemble.LiveOptions{}, log)
	svc := &apiProcess{creds: creds, store: s, signals: &signals{got: make(chan workflows.Signature, 10), refused: make(chan workflows.Refusal, 10)}}
	router := api.NewRouter(api.Config{
		Store:     s,
		Log:       log,
		Live:      live.Hub,
		RateLimit: 1e6,
		RateBurst: 1e6,
		Service:   &service.Service{Store: s, Log: log, Workflows: svc.signals, Bus: live.Bus, Live: live.Hub},
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "GET" && r.URL.Path == "/api/v1/signing-requests" {
			svc.polls.Add(1)
		}
		router.ServeHTTP(w, r)
	}))
	svc.url = srv.URL
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		live.Shutdown(ctx)
		srv.Close()
	})
	return svc
}

func (svc *apiProcess) call(t *testing.T, method, path, token string, body any) map[string]any {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, svc.url+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	if res.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %v", method, path, res.StatusCode, out)
	}
	return out
}

// device pairs a signing device with the organisation's manual wallet: its key, and a
// treasury tk_ key holding sign, restricted to that wallet.
func (svc *apiProcess) device(t *testing.T) (walletID string, key *keys.Key, token string) {
	t.Helper()
	for _, w := range svc.creds.Wallets {
		if !w.AutoSign && w.Chain == "ethereum" {
			k, err := keys.Parse(w.Scheme, w.PrivateKey)
			if err != nil {
				t.Fatal(err)
			}
			walletID, key = w.ID, k
		}
	}
	out := svc.call(t, "POST", "/developer/api-keys", svc.creds.Keys["treasury"].SK,
		map[string]any{"kind": "tk", "actions": []string{"sign"}, "resourceIds": []string{walletID}})
	return walletID, key, out["secret"].(string)
}

// requestSignature makes a trade order of the wallet (another app than the device's) wait
// for its signature, as the workflow's step does: the signing request and its
// Wallet.SigningRequested in one transaction.
func (svc *apiProcess) requestSignature(t *testing.T, walletID string) string {
	t.Helper()
	order := svc.call(t, "POST", "/api/v1/trade-orders", svc.creds.Keys["trade"].SK, map[string]any{"walletId": walletID,
		"sellAsset": "ETH", "buyAsset": "USDC", "sellAmount": "0.01", "maxSlippageBps": 30})
	orderID := order["id"].(string)
	payload := `{"walletId":"` + walletID + `"}`
	payloadHash := sha256.Sum256([]byte(payload))
	unsigned := `{"leg":"SWAP","payload":` + payload + `,"payloadHash":"` + hex.EncodeToString(payloadHash[:]) + `"}`
	digest := sha256.Sum256([]byte(unsigned))
	id, leg, now := ids.New(ids.SigningRequest), 0, time.Now()
	_, err := svc.store.ApplyOrderStep(context.Background(), store.OrderChange{OrderID: orderID, Step: "leg-0-signing-requested",
		To: "pending_signature",
		Also: func(tx *store.Store, o *store.Order, _ []store.OrderLeg) error {
			w, err := tx.Wallet(context.Background(), o.OrgID, walletID)
			if err != nil {
				return err
			}
			_, err = tx.CreateSigningRequest(context.Background(), &store.SigningRequest{ID: id, OrgID: o.OrgID, App: o.App,
				Domain: o.Domain, OrderID: o.ID, Leg: "SWAP", WalletID: walletID, Chain: o.Chain, UnsignedTx: unsigned, Scheme: w.Scheme,
				Digest: hex.EncodeToString(digest[:]), Status: "pending", CreatedAt: now, ExpiresAt: now.Add(time.Hour)})
			return err
		},
		Event: &store.EventSpec{Name: events.WalletSigningRequested, Leg: &leg, Body: events.OrderEvent{SigningRequestID: id}}})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (svc *apiProcess) waitSigned(t *testing.T, requestID string, within time.Duration) {
	t.Helper()
	select {
	case sig := <-svc.signals.got:
		if sig.SigningRequestID != requestID {
			t.Fatalf("signed %s, want %s", sig.SigningRequestID, requestID)
		}
	case <-time.After(within):
		t.Fatalf("%s not signed within %v", requestID, within)
	}
}

func runSigner(t *testing.T, cfg signer.Config) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = signer.Run(ctx, cfg) }()
	t.Cleanup(func() { cancel(); <-done })
}

// The signer follows the live channel with its device key: a signing request of any app
// for its wallet wakes it, though its poll would not come for an hour.
func TestSignerIsWokenByTheLiveChannel(t *testing.T) {
	svc := startService(t)
	walletID, key, token := svc.device(t)
	cfg := svc.call(t, "POST", "/developer/websockets", svc.creds.Keys["treasury"].SK,
		map[string]any{"events": []string{"wallet.signingrequested"}})["id"].(string)
	runSigner(t, signer.Config{BaseURL: svc.url, Token: token, WalletID: walletID, Key: key, ConfigID: cfg,
		Interval: time.Hour, LiveSweep: time.Hour})
	// Connected, and past the look it takes at the connection (its start and its
	// connection.ready each make one): from here only the channel can wake it.
	wait.For(t, 15*time.Second, "the signer to connect and look twice", func() bool {
		live := svc.call(t, "GET", "/developer/websockets/"+cfg, svc.creds.Keys["treasury"].SK, nil)
		return live["liveConnections"] == float64(1) && svc.polls.Load() >= 2
	})
	for range 2 {
		svc.waitSigned(t, svc.requestSignature(t, walletID), 10*time.Second)
	}
}

// Without a live channel (here, a config that does not exist, which ends its attempts),
// the signer polls, and signs all the same.
func TestSignerPollsWithoutTheLiveChannel(t *testing.T) {
	svc := startService(t)
	walletID, key, token := svc.device(t)
	runSigner(t, signer.Config{BaseURL: svc.url, Token: token, WalletID: walletID, Key: key,
		ConfigID: "wsc_" + strings.Repeat("0", 32), Interval: 50 * time.Millisecond})
	svc.waitSigned(t, svc.requestSignature(t, walletID), 10*time.Second)
}
