package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
)

// Fifty payments submitted at once from one wallet of the dev bundle's ethereum (a real
// go-ethereum chain in the bundle's process) all confirm, with nonces that follow each
// other without a gap or a repeat, each its own transaction.
func TestFiftyPaymentsFromOneWalletGetConsecutiveNonces(t *testing.T) {
	b := startBundle(t, t.TempDir(), "")
	defer func() { _ = b.Shutdown() }()
	api := b.APIURL + "/api/v1"
	pay := b.Credentials.Keys["pay"]
	wallet := b.Credentials.Wallets[1]
	if wallet.Chain != "ethereum" || !wallet.AutoSign {
		t.Fatalf("wallet %+v", wallet)
	}
	const n = 50
	ids := make([]string, n)
	for i := range ids {
		r := send(t, "POST", api+"/payments", pay.SK, fmt.Sprintf(
			`{"walletId":%q,"asset":"USDC","amount":"1.25","destination":{"address":"0x2222222222222222222222222222222222222222"}}`, wallet.ID))
		if r.status != 201 {
			t.Fatalf("create %d %s", r.status, r.raw)
		}
		ids[i] = r.body["id"].(string)
	}
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			if r := send(t, "POST", api+"/payments/"+id+"/submit", pay.SK, "{}"); r.status != 202 {
				t.Errorf("submit %s: %d %s", id, r.status, r.raw)
			}
		})
	}
	wg.Wait()
	var nonces []int
	hashes := map[string]bool{}
	for _, id := range ids {
		o := waitStatus(t, api+"/payments/"+id, pay.Read, "confirmed")
		leg := o["legs"].([]any)[0].(map[string]any)
		hashes[leg["txHash"].(string)] = true
		req := call(t, "GET", api+"/signing-requests/"+leg["signingRequestId"].(string), pay.Read)
		var tx struct {
			Nonce int    `json:"nonce"`
			From  string `json:"from"`
		}
		if err := json.Unmarshal([]byte(req.body["unsignedTx"].(string)), &tx); err != nil {
			t.Fatal(err)
		}
		if tx.From != wallet.Address {
			t.Fatalf("sent from %s, not the wallet %s", tx.From, wallet.Address)
		}
		nonces = append(nonces, tx.Nonce)
	}
	slices.Sort(nonces)
	for i := 1; i < n; i++ {
		if nonces[i] != nonces[i-1]+1 {
			t.Fatalf("nonces %v: a gap or a repeat", nonces)
		}
	}
	if len(hashes) != n {
		t.Fatalf("%d transaction hashes for %d payments", len(hashes), n)
	}
}
