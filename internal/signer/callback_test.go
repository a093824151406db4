package signer

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/golang-jwt/jwt/v5"

	"github.com/opentreasury/treasury/client"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/evm/contracts"
	"github.com/opentreasury/treasury/internal/chain/keys"
)

// The customer's callback is asked about each request every check passed, with a JWT of
// the signer's key: its verified APPROVE signs, its REJECT refuses (callback_rejected,
// with its reason), and a RETRY, an answer of another key or about another request leaves
// the request pending and unsigned.
func TestTheCustomersCallbackHasTheLastWord(t *testing.T) {
	signerPub, signerPriv, _ := ed25519.GenerateKey(rand.Reader)
	customerPub, customerPriv, _ := ed25519.GenerateKey(rand.Reader)
	_, strangerPriv, _ := ed25519.GenerateKey(rand.Reader)
	seedFile := filepath.Join(t.TempDir(), "callback.key")
	if err := os.WriteFile(seedFile, []byte(base64.StdEncoding.EncodeToString(signerPriv.Seed())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	asked := map[string]CallbackRequest{}
	hook := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var claims callbackClaims
		if _, err := jwt.ParseWithClaims(string(body), &claims, func(*jwt.Token) (any, error) { return signerPub, nil },
			jwt.WithValidMethods([]string{"EdDSA"})); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		mu.Lock()
		asked[claims.Request.ID] = claims.Request
		mu.Unlock()
		answer, key := CallbackAnswer{RequestID: claims.Request.ID, Action: CallbackApprove}, customerPriv
		switch claims.Request.ID {
		case "sig_reject":
			answer.Action, answer.Reason = CallbackReject, "over the customer's own daily limit"
		case "sig_retry":
			answer.Action = CallbackRetry
		case "sig_stranger":
			key = strangerPriv
		case "sig_elsewhere":
			answer.RequestID = "sig_approve"
		}
		answer.IssuedAt = jwt.NewNumericDate(time.Now())
		token, _ := jwt.NewWithClaims(jwt.SigningMethodEdDSA, answer).SignedString(key)
		_, _ = w.Write([]byte(token))
	}))
	defer hook.Close()

	key, _ := keys.Generate(chain.Secp256k1)
	var reqs []client.SigningRequest
	for _, id := range []string{"sig_approve", "sig_reject", "sig_retry", "sig_stranger", "sig_elsewhere"} {
		tx := eip1559(1, usdc, new(big.Int), packed(t, contracts.Token, "transfer", supplier, big.NewInt(5)), 65_000)
		r := evmRequest(t, tx, "")
		r.ID, r.UnsignedTx = id, readable(t, tx, common.HexToAddress(key.Address()))
		reqs = append(reqs, r)
	}
	srv, posted := fakeService(t, reqs...)
	p := testPolicy(t)
	p.Callback = &Callback{URL: hook.URL, SigningKeyFile: seedFile, PublicKey: base64.StdEncoding.EncodeToString(customerPub)}
	if err := p.Callback.load(); err != nil {
		t.Fatal(err)
	}
	cfg := withDefaults(Config{BaseURL: srv.URL, Token: "tk_sign", WalletID: "wal_mine", Key: key, HTTP: srv.Client(), Policy: p,
		CallbackHTTP: hook.Client()})
	done := map[string]bool{}
	if err := pass(context.Background(), cfg, done); err != nil {
		t.Fatal(err)
	}
	got := posted()
	if got["/api/v1/signing-requests/sig_approve/signature"]["signature"] == "" || !done["sig_approve"] {
		t.Fatalf("the approved request was not signed: %v", got)
	}
	if f := got["/api/v1/signing-requests/sig_reject/refusal"]; f["reason"] != "callback_rejected" || !strings.Contains(f["detail"], "daily limit") {
		t.Fatalf("the rejected request: %v", got)
	}
	for _, id := range []string{"sig_retry", "sig_stranger", "sig_elsewhere"} {
		if _, signed := got["/api/v1/signing-requests/"+id+"/signature"]; signed || done[id] {
			t.Fatalf("%s was signed or dropped: %v", id, got)
		}
		if _, refused := got["/api/v1/signing-requests/"+id+"/refusal"]; refused {
			t.Fatalf("%s was refused: %v", id, got)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if a := asked["sig_approve"]; a.Digest == "" || a.RawUnsignedTx == "" || a.WalletID != "wal_mine" {
		t.Fatalf("the callback was told %+v", a)
	}
	bad := &Callback{URL: "http://hooks.example.com", SigningKeyFile: seedFile, PublicKey: base64.StdEncoding.EncodeToString(customerPub)}
	if err := bad.load(); err == nil {
		t.Fatal("a callback over plain http was accepted")
	}
}
