package signer

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
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
	pub, key, _ := ed25519.GenerateKey(nil)
	hash := func(s string) string { sum := sha256.Sum256([]byte(s)); return hex.EncodeToString(sum[:]) }
	tx := func(wallet, claimedHashOf string) string {
		payload := `{"walletId":"` + wallet + `"}`
		return `{"leg":"TRANSFER","payload":` + payload + `,"payloadHash":"` + hash(claimedHashOf) + `"}`
	}
	honest := tx("wal_mine", `{"walletId":"wal_mine"}`)
	other := tx("wal_other", `{"walletId":"wal_other"}`)
	swapped := tx("wal_mine", `{"walletId":"wal_mine","amount":"1"}`)
	reqs := []signingRequest{
		{ID: "sig_tampered", WalletID: "wal_mine", UnsignedTx: honest, Digest: hash("something else"), Status: "pending"},
		{ID: "sig_other", WalletID: "wal_mine", UnsignedTx: other, Digest: hash(other), Status: "pending"},
		{ID: "sig_swapped", WalletID: "wal_mine", UnsignedTx: swapped, Digest: hash(swapped), Status: "pending"},
		{ID: "sig_ok", WalletID: "wal_mine", UnsignedTx: honest, Digest: hash(honest), Status: "pending"},
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
		digest, _ := hex.DecodeString(reqs[3].Digest)
		if !ed25519.Verify(pub, digest, sig) {
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
