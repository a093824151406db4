package signer

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"github.com/opentreasury/treasury/client"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/evm"
	"github.com/opentreasury/treasury/internal/chain/keys"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestSignerRefusesWhatItCannotCheck serves the signer requests it must refuse: a digest
// that is not the hash of the transaction shown, a transaction for another wallet, a payload
// that is not the one its hash names. It must post nothing for them, and sign the honest one
// with a signature that verifies.
func TestSignerRefusesWhatItCannotCheck(t *testing.T) {
	pub, edKey, _ := ed25519.GenerateKey(nil)
	key := keys.FromEd25519(edKey)
	hash := func(s string) string { sum := sha256.Sum256([]byte(s)); return hex.EncodeToString(sum[:]) }
	tx := func(wallet, claimedHashOf string) string {
		payload := `{"walletId":"` + wallet + `"}`
		return `{"leg":"TRANSFER","payload":` + payload + `,"payloadHash":"` + hash(claimedHashOf) + `"}`
	}
	honest := tx("wal_mine", `{"walletId":"wal_mine"}`)
	other := tx("wal_other", `{"walletId":"wal_other"}`)
	swapped := tx("wal_mine", `{"walletId":"wal_mine","amount":"1"}`)
	reqs := []client.SigningRequest{
		{ID: "sig_tampered", WalletID: "wal_mine", Scheme: "ed25519", UnsignedTx: honest, RawUnsignedTx: hex.EncodeToString([]byte(honest)), Digest: hash("something else"), Status: "pending"},
		{ID: "sig_other", WalletID: "wal_mine", Scheme: "ed25519", UnsignedTx: other, RawUnsignedTx: hex.EncodeToString([]byte(other)), Digest: hash(other), Status: "pending"},
		{ID: "sig_swapped", WalletID: "wal_mine", Scheme: "ed25519", UnsignedTx: swapped, RawUnsignedTx: hex.EncodeToString([]byte(swapped)), Digest: hash(swapped), Status: "pending"},
		{ID: "sig_ok", WalletID: "wal_mine", Scheme: "ed25519", UnsignedTx: honest, RawUnsignedTx: hex.EncodeToString([]byte(honest)), Digest: hash(honest), Status: "pending"},
	}
	var posted atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tk_sign" {
			w.WriteHeader(401)
			return
		}
		if r.Method == "GET" {
			_ = json.NewEncoder(w).Encode(map[string]any{"data": reqs, "nextCursor": nil})
			return
		}
		if r.URL.Path != "/api/v1/signing-requests/sig_ok/signature" {
			t.Errorf("posted to %s", r.URL.Path)
		}
		var body struct{ Signature string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		sig, _ := base64.StdEncoding.DecodeString(body.Signature)
		// ed25519 signs the message itself, as Solana's runtime verifies it.
		if !ed25519.Verify(pub, []byte(reqs[3].UnsignedTx), sig) {
			t.Error("the signature does not verify")
		}
		posted.Add(1)
		w.WriteHeader(202)
	}))
	defer srv.Close()
	done := map[string]bool{}
	cfg := Config{BaseURL: srv.URL, Token: "tk_sign", WalletID: "wal_mine", Key: key, HTTP: srv.Client()}
	cfg.Log = nil
	if err := pass(context.Background(), withDefaults(cfg), done); err != nil {
		t.Fatal(err)
	}
	if posted.Load() != 1 || !done["sig_ok"] || done["sig_tampered"] || done["sig_other"] || done["sig_swapped"] {
		t.Fatalf("posted %d, done %v", posted.Load(), done)
	}
	// A second pass does not sign again.
	if err := pass(context.Background(), withDefaults(cfg), done); err != nil || posted.Load() != 1 {
		t.Fatalf("second pass: posted %d, %v", posted.Load(), err)
	}
}

// TestSignerChecksAnEVMTransactionBeforeSigningIt serves an EIP-1559 transaction of the
// wallet, one whose digest is not its signing hash, and one sent from another address: the
// signer signs the first only, and its signature recovers to the wallet's address.
func TestSignerChecksAnEVMTransactionBeforeSigningIt(t *testing.T) {
	key, _ := keys.Generate(chain.Secp256k1)
	stranger, _ := keys.Generate(chain.Secp256k1)
	tx := func(from string, nonce string) string {
		return `{"type":"eip1559","chainId":"1337","nonce":` + nonce + `,"from":"` + from + `","to":"0x1111111111111111111111111111111111111111",` +
			`"value":"1000","gas":21000,"maxFeePerGas":"2000000000","maxPriorityFeePerGas":"1000000000","data":"0x",` +
			`"call":{"method":"transfer"},"orderId":"ord_1","leg":"TRANSFER","position":0}`
	}
	digest := func(unsigned string) string {
		d, _, err := evm.Digest([]byte(unsigned))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	mine, theirs, later := tx(key.Address(), "3"), tx(stranger.Address(), "3"), tx(key.Address(), "4")
	reqs := []client.SigningRequest{
		{ID: "sig_tampered", WalletID: "wal_mine", Scheme: "secp256k1", UnsignedTx: mine, Digest: digest(later), Status: "pending"},
		{ID: "sig_not_mine", WalletID: "wal_mine", Scheme: "secp256k1", UnsignedTx: theirs, Digest: digest(theirs), Status: "pending"},
		{ID: "sig_ok", WalletID: "wal_mine", Scheme: "secp256k1", UnsignedTx: mine, Digest: digest(mine), Status: "pending"},
	}
	var posted atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "GET" {
			_ = json.NewEncoder(w).Encode(map[string]any{"data": reqs, "nextCursor": nil})
			return
		}
		if r.URL.Path != "/api/v1/signing-requests/sig_ok/signature" {
			t.Errorf("posted to %s", r.URL.Path)
		}
		var body struct{ Signature string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		sig, _ := base64.StdEncoding.DecodeString(body.Signature)
		d, _ := hex.DecodeString(reqs[2].Digest)
		if err := keys.Verify(chain.Secp256k1, key.Address(), "", d, sig); err != nil {
			t.Errorf("the signature does not recover to the wallet: %v", err)
		}
		posted.Add(1)
		w.WriteHeader(202)
	}))
	defer srv.Close()
	done := map[string]bool{}
	cfg := withDefaults(Config{BaseURL: srv.URL, Token: "tk_sign", WalletID: "wal_mine", Key: key, HTTP: srv.Client()})
	if err := pass(context.Background(), cfg, done); err != nil {
		t.Fatal(err)
	}
	if posted.Load() != 1 || !done["sig_ok"] || done["sig_tampered"] || done["sig_not_mine"] {
		t.Fatalf("posted %d, done %v", posted.Load(), done)
	}
}
