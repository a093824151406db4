package signer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/opentreasury/treasury/client"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/evm"
	"github.com/opentreasury/treasury/internal/chain/evm/contracts"
	"github.com/opentreasury/treasury/internal/chain/keys"
)

var (
	usdc      = common.HexToAddress("0x00000000000000000000000000000000000000c1")
	router    = common.HexToAddress("0x00000000000000000000000000000000000000c2")
	supplier  = common.HexToAddress("0x1111111111111111111111111111111111111111")
	attacker  = common.HexToAddress("0x2222222222222222222222222222222222222222")
	sanctions = common.HexToAddress("0x3333333333333333333333333333333333333333")
)

func testPolicy(t testing.TB) *Policy {
	t.Helper()
	text := `{
  "chains": {"ethereum": {"chainId": 1, "maxFeeWei": "10000000000000000"}},
  "allow": {
    "destinations": ["` + supplier.Hex() + `", "` + sanctions.Hex() + `"],
    "contracts": [
      {"address": "` + usdc.Hex() + `", "methods": ["transfer", "approve"]},
      {"address": "` + router.Hex() + `", "methods": ["swapExactInput"]}
    ]
  },
  "deny": {"destinations": ["` + sanctions.Hex() + `"]}
}`
	path := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := LoadPolicy(path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// evmRequest is a signing request for tx as the service writes one; digest, when not
// empty, replaces the transaction's own signing hash.
func evmRequest(t testing.TB, tx *types.Transaction, digest string) client.SigningRequest {
	t.Helper()
	raw, err := evm.UnsignedBytes(tx)
	if err != nil {
		t.Fatal(err)
	}
	if digest == "" {
		digest = hex.EncodeToString(types.LatestSignerForChainID(tx.ChainId()).Hash(tx).Bytes())
	}
	return client.SigningRequest{ID: "sig_1", OrderID: "ord_1", WalletID: "wal_mine", Chain: "ethereum", Scheme: chain.Secp256k1,
		UnsignedTx: `{"type":"eip1559"}`, RawUnsignedTx: hex.EncodeToString(raw), Digest: digest, Status: "pending"}
}

func eip1559(chainID int64, to common.Address, value *big.Int, data []byte, gas uint64) *types.Transaction {
	return types.NewTx(&types.DynamicFeeTx{ChainID: big.NewInt(chainID), Nonce: 3, GasTipCap: big.NewInt(1e9),
		GasFeeCap: big.NewInt(50e9), Gas: gas, To: &to, Value: value, Data: data})
}

func packed(t testing.TB, contract, method string, args ...any) []byte {
	t.Helper()
	data, err := contracts.ABI(contract).Pack(method, args...)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestThePolicyJudgesTheDecodedTransaction plays a service that lies: each request below
// is what a compromised API, worker or database could ask the wallet to sign. The signer
// decodes the transaction itself and refuses each with the check that failed; the honest
// requests pass.
func TestThePolicyJudgesTheDecodedTransaction(t *testing.T) {
	p := testPolicy(t)
	wallet := common.HexToAddress("0x00000000000000000000000000000000000000aa")
	amount := big.NewInt(100_500_000)
	zero := new(big.Int)
	honest := eip1559(1, usdc, zero, packed(t, contracts.Token, "transfer", supplier, amount), 65_000)
	maxUint := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))
	other := evmRequest(t, eip1559(1, usdc, zero, packed(t, contracts.Token, "transfer", attacker, amount), 65_000), "")
	cases := []struct {
		name   string
		req    client.SigningRequest
		reason string
	}{
		{"an ERC-20 payment to an allowed destination", evmRequest(t, honest, ""), ""},
		{"ETH to an allowed destination", evmRequest(t, eip1559(1, supplier, big.NewInt(1e18), nil, 21_000), ""), ""},
		{"a swap whose output comes back to the wallet", evmRequest(t, eip1559(1, router, zero,
			packed(t, contracts.SwapRouter, "swapExactInput", usdc, common.Address{}, amount, big.NewInt(1), wallet), 200_000), ""), ""},
		{"a bounded approve of an allowed router", evmRequest(t, eip1559(1, usdc, zero, packed(t, contracts.Token, "approve", router, amount), 60_000), ""), ""},

		{"the destination changed", other, "destination_not_allowed"},
		{"ETH to another address", evmRequest(t, eip1559(1, attacker, big.NewInt(1e18), nil, 21_000), ""), "destination_not_allowed"},
		{"a denied destination, even if allowed", evmRequest(t, eip1559(1, usdc, zero, packed(t, contracts.Token, "transfer", sanctions, amount), 65_000), ""), "destination_denied"},
		{"the digest of another transaction", evmRequest(t, honest, other.Digest), "digest_mismatch"},
		{"no raw transaction", client.SigningRequest{Chain: "ethereum", UnsignedTx: `{"type":"eip1559"}`, Digest: other.Digest}, "raw_unsigned_tx_missing"},
		{"another chain's id", evmRequest(t, eip1559(137, usdc, zero, packed(t, contracts.Token, "transfer", supplier, amount), 65_000), ""), "wrong_chain"},
		{"a fee above the cap", evmRequest(t, eip1559(1, usdc, zero, packed(t, contracts.Token, "transfer", supplier, amount), 1_000_000), ""), "fee_above_cap"},
		{"a method the legs never call", evmRequest(t, eip1559(1, usdc, zero, packed(t, contracts.Token, "balanceOf", wallet), 65_000), ""), "unknown_method"},
		{"an unlimited approve", evmRequest(t, eip1559(1, usdc, zero, packed(t, contracts.Token, "approve", router, maxUint), 60_000), ""), "unlimited_approve"},
		{"an approve of another spender", evmRequest(t, eip1559(1, usdc, zero, packed(t, contracts.Token, "approve", attacker, amount), 60_000), ""), "spender_not_allowed"},
		{"a contract not allowed", evmRequest(t, eip1559(1, attacker, zero, packed(t, contracts.Token, "transfer", supplier, amount), 65_000), ""), "contract_not_allowed"},
		{"a method not allowed on an allowed contract", evmRequest(t, eip1559(1, router, zero,
			packed(t, contracts.Vault, "deposit", amount, wallet), 100_000), ""), "contract_not_allowed"},
		{"a swap paying someone else", evmRequest(t, eip1559(1, router, zero,
			packed(t, contracts.SwapRouter, "swapExactInput", usdc, common.Address{}, amount, big.NewInt(1), attacker), 200_000), ""), "beneficiary_not_wallet"},
	}
	for _, tc := range cases {
		got := p.Check(tc.req, "wal_mine", wallet.Hex())
		switch {
		case tc.reason == "" && got != nil:
			t.Errorf("%s: refused %v", tc.name, got)
		case tc.reason != "" && (got == nil || got.Reason != tc.reason):
			t.Errorf("%s: got %v, want %s", tc.name, got, tc.reason)
		}
	}
}

func TestThePolicyJudgesASimulatedPayment(t *testing.T) {
	p := testPolicy(t)
	p.Chains["solana"] = ChainRule{ChainID: 1, maxFee: big.NewInt(1)}
	request := func(to, walletID, leg string, tamper bool) client.SigningRequest {
		payload := `{"destination":{"address":"` + to + `"},"walletId":"` + walletID + `"}`
		sum := sha256.Sum256([]byte(payload))
		hash := hex.EncodeToString(sum[:])
		if tamper {
			payload = strings.TrimSuffix(payload, "}") + `,"amount":"9"}`
		}
		tx := `{"leg":"` + leg + `","payload":` + payload + `,"payloadHash":"` + hash + `"}`
		digest := sha256.Sum256([]byte(tx))
		return client.SigningRequest{Chain: "solana", UnsignedTx: tx, RawUnsignedTx: hex.EncodeToString([]byte(tx)), Digest: hex.EncodeToString(digest[:])}
	}
	for _, tc := range []struct {
		name   string
		req    client.SigningRequest
		reason string
	}{
		{"a payment to an allowed destination", request(supplier.Hex(), "wal_mine", "TRANSFER", false), ""},
		{"a payment elsewhere", request(attacker.Hex(), "wal_mine", "TRANSFER", false), "destination_not_allowed"},
		{"another wallet's", request(supplier.Hex(), "wal_other", "TRANSFER", false), "wrong_wallet"},
		{"a payload that is not the one hashed", request(supplier.Hex(), "wal_mine", "TRANSFER", true), "payload_mismatch"},
		{"a leg it cannot judge", request(supplier.Hex(), "wal_mine", "SWAP", false), "unknown_method"},
	} {
		got := p.Check(tc.req, "wal_mine", "")
		if (tc.reason == "" && got != nil) || (tc.reason != "" && (got == nil || got.Reason != tc.reason)) {
			t.Errorf("%s: got %v, want %q", tc.name, got, tc.reason)
		}
	}
}

func TestAPolicyFileIsReadStrictly(t *testing.T) {
	for name, text := range map[string]string{
		"an unknown field":   `{"chains":{"ethereum":{"chainId":1,"maxFeeWei":"1"}},"alow":{}}`,
		"no fee cap":         `{"chains":{"ethereum":{"chainId":1}}}`,
		"no chain":           `{"allow":{"destinations":["0x1111111111111111111111111111111111111111"]}}`,
		"a bad address":      `{"chains":{"ethereum":{"chainId":1,"maxFeeWei":"1"}},"allow":{"destinations":["0x11"]}}`,
		"an unknown method":  `{"chains":{"ethereum":{"chainId":1,"maxFeeWei":"1"}},"allow":{"contracts":[{"address":"0x1111111111111111111111111111111111111111","methods":["transferFrom"]}]}}`,
		"a fee as a decimal": `{"chains":{"ethereum":{"chainId":1,"maxFeeWei":"0.5"}}}`,
	} {
		path := filepath.Join(t.TempDir(), "policy.json")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadPolicy(path); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
}

// TestASignerWithAPolicyPostsItsRefusals: a request the policy refuses is refused through
// the API, with the reason, and never signed; the honest one is signed.
func TestASignerWithAPolicyPostsItsRefusals(t *testing.T) {
	key, _ := keys.Generate(chain.Secp256k1)
	wallet := common.HexToAddress(key.Address())
	zero := new(big.Int)
	good := evmRequest(t, eip1559(1, usdc, zero, packed(t, contracts.Token, "transfer", supplier, big.NewInt(5)), 65_000), "")
	good.ID = "sig_good"
	// The readable fields a signer that trusted them would check: the honest request's.
	good.UnsignedTx = readable(t, eip1559(1, usdc, zero, packed(t, contracts.Token, "transfer", supplier, big.NewInt(5)), 65_000), wallet)
	bad := evmRequest(t, eip1559(1, usdc, zero, packed(t, contracts.Token, "transfer", attacker, big.NewInt(5)), 65_000), "")
	bad.ID, bad.UnsignedTx = "sig_bad", good.UnsignedTx
	var mu sync.Mutex
	posted := map[string]map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "GET" {
			_ = json.NewEncoder(w).Encode(map[string]any{"data": []client.SigningRequest{bad, good}, "nextCursor": nil})
			return
		}
		var body map[string]string
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		posted[r.URL.Path] = body
		mu.Unlock()
		w.WriteHeader(202)
	}))
	defer srv.Close()
	cfg := withDefaults(Config{BaseURL: srv.URL, Token: "tk_sign", WalletID: "wal_mine", Key: key, HTTP: srv.Client(), Policy: testPolicy(t)})
	done := map[string]bool{}
	if err := pass(context.Background(), cfg, done); err != nil {
		t.Fatal(err)
	}
	refusal := posted["/api/v1/signing-requests/sig_bad/refusal"]
	if refusal["reason"] != "destination_not_allowed" || !strings.Contains(refusal["detail"], attacker.Hex()) {
		t.Fatalf("refusal %v (posted %v)", refusal, posted)
	}
	if _, signed := posted["/api/v1/signing-requests/sig_bad/signature"]; signed {
		t.Fatal("the refused request was signed")
	}
	if posted["/api/v1/signing-requests/sig_good/signature"]["signature"] == "" || !done["sig_good"] || !done["sig_bad"] {
		t.Fatalf("the honest request: posted %v, done %v", posted, done)
	}
}

// readable is the readable form the service writes for tx from wallet.
func readable(t *testing.T, tx *types.Transaction, from common.Address) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"type": "eip1559", "chainId": tx.ChainId().String(), "nonce": tx.Nonce(), "from": from.Hex(),
		"to": tx.To().Hex(), "value": tx.Value().String(), "gas": tx.Gas(), "maxFeePerGas": tx.GasFeeCap().String(),
		"maxPriorityFeePerGas": tx.GasTipCap().String(), "data": "0x" + hex.EncodeToString(tx.Data())})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// BenchmarkPolicyCheck is the signer's own check of an ERC-20 payment (decode the raw
// transaction, hash it, decode the call, judge it), beside BenchmarkSigningAlone, the
// signature it precedes.
func BenchmarkPolicyCheck(b *testing.B) {
	p := testPolicy(b)
	req := evmRequest(b, eip1559(1, usdc, new(big.Int), packed(b, contracts.Token, "transfer", supplier, big.NewInt(5)), 65_000), "")
	wallet := common.HexToAddress("0x00000000000000000000000000000000000000aa").Hex()
	for b.Loop() {
		if f := p.Check(req, "wal_mine", wallet); f != nil {
			b.Fatal(f)
		}
	}
}

func BenchmarkSigningAlone(b *testing.B) {
	key, _ := keys.Generate(chain.Secp256k1)
	digest := make([]byte, 32)
	for b.Loop() {
		if _, err := key.Sign(digest); err != nil {
			b.Fatal(err)
		}
	}
}
