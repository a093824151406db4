package signer

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"maps"
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
	"github.com/opentreasury/treasury/internal/approvers"
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
	batcher   = common.HexToAddress("0x00000000000000000000000000000000000000c3")
	carol     = common.HexToAddress("0x4444444444444444444444444444444444444444")
)

func testPolicy(t testing.TB) *Policy {
	t.Helper()
	text := `{
  "chains": {"ethereum": {"chainId": 1, "maxFeeWei": "10000000000000000"}},
  "allow": {
    "destinations": ["` + supplier.Hex() + `", "` + sanctions.Hex() + `", "` + carol.Hex() + `"],
    "contracts": [
      {"address": "` + usdc.Hex() + `", "methods": ["transfer", "approve"]},
      {"address": "` + router.Hex() + `", "methods": ["swapExactInput"]},
      {"address": "` + batcher.Hex() + `", "methods": ["batchTransferToken", "batchTransferNative"]}
    ]
  },
  "deny": {"destinations": ["` + sanctions.Hex() + `"]}
}`
	p, err := ParsePolicy([]byte(text))
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

		{"a token batch to allowed destinations", evmRequest(t, eip1559(1, batcher, zero, packed(t, contracts.BatchTransfer, "batchTransferToken", usdc,
			[]common.Address{supplier, carol}, []*big.Int{amount, big.NewInt(7)}), 200_000), ""), ""},
		{"a native batch sent its total", evmRequest(t, eip1559(1, batcher, big.NewInt(12), packed(t, contracts.BatchTransfer, "batchTransferNative",
			[]common.Address{supplier, carol}, []*big.Int{big.NewInt(5), big.NewInt(7)}), 200_000), ""), ""},

		{"the destination changed", other, "destination_not_allowed"},
		{"a batch with one recipient not allowed", evmRequest(t, eip1559(1, batcher, zero, packed(t, contracts.BatchTransfer, "batchTransferToken", usdc,
			[]common.Address{supplier, attacker, carol}, []*big.Int{amount, big.NewInt(1), big.NewInt(7)}), 200_000), ""), "destination_not_allowed"},
		{"a batch with a denied recipient", evmRequest(t, eip1559(1, batcher, zero, packed(t, contracts.BatchTransfer, "batchTransferToken", usdc,
			[]common.Address{supplier, sanctions}, []*big.Int{amount, big.NewInt(1)}), 200_000), ""), "destination_denied"},
		{"a batch of a token not allowed", evmRequest(t, eip1559(1, batcher, zero, packed(t, contracts.BatchTransfer, "batchTransferToken", attacker,
			[]common.Address{supplier, carol}, []*big.Int{amount, big.NewInt(1)}), 200_000), ""), "contract_not_allowed"},
		{"a native batch sending more than its total", evmRequest(t, eip1559(1, batcher, big.NewInt(13), packed(t, contracts.BatchTransfer, "batchTransferNative",
			[]common.Address{supplier, carol}, []*big.Int{big.NewInt(5), big.NewInt(7)}), 200_000), ""), "value_with_call"},
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
		"an unknown field":      `{"chains":{"ethereum":{"chainId":1,"maxFeeWei":"1"}},"alow":{}}`,
		"no fee cap":            `{"chains":{"ethereum":{"chainId":1}}}`,
		"no chain":              `{"allow":{"destinations":["0x1111111111111111111111111111111111111111"]}}`,
		"a bad address":         `{"chains":{"ethereum":{"chainId":1,"maxFeeWei":"1"}},"allow":{"destinations":["0x11"]}}`,
		"an unknown method":     `{"chains":{"ethereum":{"chainId":1,"maxFeeWei":"1"}},"allow":{"contracts":[{"address":"0x1111111111111111111111111111111111111111","methods":["transferFrom"]}]}}`,
		"a fee as a decimal":    `{"chains":{"ethereum":{"chainId":1,"maxFeeWei":"0.5"}}}`,
		"a node that is no URL": `{"chains":{"ethereum":{"chainId":1,"maxFeeWei":"1","rpcUrl":"localhost:8545"}}}`,
		"a tier needing more keys than are pinned": `{"chains":{"ethereum":{"chainId":1,"maxFeeWei":"1"}},"approvers":{"keys":[],"tiers":[{"minAmount":"0","approvals":1}]}}`,
		"a pinned key that is not one":             `{"chains":{"ethereum":{"chainId":1,"maxFeeWei":"1"}},"approvers":{"keys":[{"id":"apk_1","scheme":"ed25519","publicKey":"AAAA"}]}}`,
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
	srv, posted := fakeService(t, bad, good)
	cfg := withDefaults(Config{BaseURL: srv.URL, Token: "tk_sign", WalletID: "wal_mine", Key: key, HTTP: srv.Client(), Policy: testPolicy(t)})
	done := map[string]bool{}
	if err := pass(context.Background(), cfg, done); err != nil {
		t.Fatal(err)
	}
	refusal := posted()["/api/v1/signing-requests/sig_bad/refusal"]
	if refusal["reason"] != "destination_not_allowed" || !strings.Contains(refusal["detail"], attacker.Hex()) {
		t.Fatalf("refusal %v (posted %v)", refusal, posted())
	}
	if _, signed := posted()["/api/v1/signing-requests/sig_bad/signature"]; signed {
		t.Fatal("the refused request was signed")
	}
	if posted()["/api/v1/signing-requests/sig_good/signature"]["signature"] == "" || !done["sig_good"] || !done["sig_bad"] {
		t.Fatalf("the honest request: posted %v, done %v", posted(), done)
	}
}

// fakeService serves reqs as the pending signing requests and keeps the body of each
// signature or refusal posted, by path.
func fakeService(t *testing.T, reqs ...client.SigningRequest) (*httptest.Server, func() map[string]map[string]string) {
	t.Helper()
	var mu sync.Mutex
	posted := map[string]map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "GET" {
			_ = json.NewEncoder(w).Encode(map[string]any{"data": reqs, "nextCursor": nil})
			return
		}
		var body map[string]string
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		posted[r.URL.Path] = body
		mu.Unlock()
		w.WriteHeader(202)
	}))
	t.Cleanup(srv.Close)
	return srv, func() map[string]map[string]string {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(posted)
	}
}

// readable is the readable form the service writes for tx from wallet.
func readable(t testing.TB, tx *types.Transaction, from common.Address) string {
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

// TestTheSignersQuorumIsItsOwn plays a service that skips or forges the approvers, or
// moves more than they approved: the signer counts only its pinned keys' signatures over
// the very intent it holds the transaction to.
func TestTheSignersQuorumIsItsOwn(t *testing.T) {
	wallet := common.HexToAddress("0x00000000000000000000000000000000000000aa")
	type approver struct {
		id   string
		pub  ed25519.PublicKey
		priv ed25519.PrivateKey
	}
	newApprover := func(id string) approver {
		pub, priv, _ := ed25519.GenerateKey(rand.Reader)
		return approver{id, pub, priv}
	}
	alice, bob, mallory := newApprover("apk_alice"), newApprover("apk_bob"), newApprover("apk_mallory")
	text := `{"chains": {"ethereum": {"chainId": 1, "maxFeeWei": "10000000000000000"}},
  "allow": {"destinations": ["` + supplier.Hex() + `"], "contracts": [{"address": "` + usdc.Hex() + `", "methods": ["transfer"]}]},
  "approvers": {"keys": [
      {"id": "apk_alice", "scheme": "ed25519", "publicKey": "` + base64.StdEncoding.EncodeToString(alice.pub) + `"},
      {"id": "apk_bob", "scheme": "ed25519", "publicKey": "` + base64.StdEncoding.EncodeToString(bob.pub) + `"}],
    "tiers": [{"asset": "USDC", "minAmount": "0", "approvals": 1}, {"asset": "USDC", "minAmount": "100000000", "approvals": 2}]}}`
	p, err := ParsePolicy([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	statement := func(amount string) string {
		st := approvers.Statement{OrgID: "org_1", App: "pay", Domain: "payment", OrderID: "ord_1", Chain: "ethereum", WalletID: "wal_mine",
			From: wallet.Hex(), PolicyVersion: 3, RequiredApprovals: 2, ExpiresAt: "2026-11-30T00:00:00.000Z",
			Intent: []chain.Intent{{Leg: "TRANSFER", To: supplier.Hex(), Asset: "USDC", Amount: amount, Contract: usdc.Hex(), Method: "transfer"}}}
		b, err := st.Canonical()
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	sign := func(a approver, as, decision, st string) client.SigningApproval {
		sig := ed25519.Sign(a.priv, approvers.DecisionDigest(decision, []byte(st)))
		return client.SigningApproval{Decision: decision, DecidedBy: "key_" + a.id, KeyID: as, Scheme: "ed25519",
			Signature: base64.StdEncoding.EncodeToString(sig), Statement: st}
	}
	approved := statement("150000000")
	request := func(amount int64, intent string, approvals ...client.SigningApproval) client.SigningRequest {
		r := evmRequest(t, eip1559(1, usdc, new(big.Int), packed(t, contracts.Token, "transfer", supplier, big.NewInt(amount)), 65_000), "")
		r.Leg, r.Approvals = "TRANSFER", approvals
		if intent != "" {
			r.Intent = &intent
		}
		return r
	}
	for _, tc := range []struct {
		name   string
		req    client.SigningRequest
		reason string
	}{
		{"two pinned approvals of the intent", request(150_000_000, approved,
			sign(alice, "apk_alice", "APPROVE", approved), sign(bob, "apk_bob", "APPROVE", approved)), ""},
		{"no intent", request(150_000_000, "", sign(alice, "apk_alice", "APPROVE", approved)), "intent_missing"},
		{"more than the approvers approved", request(250_000_000, approved,
			sign(alice, "apk_alice", "APPROVE", approved), sign(bob, "apk_bob", "APPROVE", approved)), "intent_mismatch"},
		{"one approval where the amount needs two", request(150_000_000, approved, sign(alice, "apk_alice", "APPROVE", approved)), "quorum_not_met"},
		{"the same key twice", request(150_000_000, approved,
			sign(alice, "apk_alice", "APPROVE", approved), sign(alice, "apk_alice", "APPROVE", approved)), "quorum_not_met"},
		{"a key the signer does not pin", request(150_000_000, approved,
			sign(alice, "apk_alice", "APPROVE", approved), sign(mallory, "apk_mallory", "APPROVE", approved)), "quorum_not_met"},
		{"another key's signature under a pinned id", request(150_000_000, approved,
			sign(alice, "apk_alice", "APPROVE", approved), sign(mallory, "apk_bob", "APPROVE", approved)), "quorum_not_met"},
		{"approvals of another statement", request(150_000_000, approved,
			sign(alice, "apk_alice", "APPROVE", statement("1")), sign(bob, "apk_bob", "APPROVE", statement("1"))), "quorum_not_met"},
		{"a pinned rejection", request(150_000_000, approved,
			sign(alice, "apk_alice", "APPROVE", approved), sign(bob, "apk_bob", "REJECT", approved)), "rejected"},
		{"a small payment with one approval", request(5_000_000, statement("5000000"),
			sign(bob, "apk_bob", "APPROVE", statement("5000000"))), ""},
	} {
		got := p.Check(tc.req, "wal_mine", wallet.Hex())
		if (tc.reason == "" && got != nil) || (tc.reason != "" && (got == nil || got.Reason != tc.reason)) {
			t.Errorf("%s: got %v, want %q", tc.name, got, tc.reason)
		}
	}
}

// A passkey's approval counts when its WebAuthn assertion's challenge is the decision's
// digest over the intent, for the relying party the signer names.
func TestThePasskeysOfTheSignersQuorum(t *testing.T) {
	wallet := common.HexToAddress("0x00000000000000000000000000000000000000aa")
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	pub := elliptic.MarshalCompressed(elliptic.P256(), key.X, key.Y)
	text := `{"chains": {"ethereum": {"chainId": 1, "maxFeeWei": "10000000000000000"}},
  "allow": {"destinations": ["` + supplier.Hex() + `"], "contracts": [{"address": "` + usdc.Hex() + `", "methods": ["transfer"]}]},
  "approvers": {"rpId": "treasury.example.com", "keys": [{"id": "apk_pass", "scheme": "p256", "publicKey": "` + base64.StdEncoding.EncodeToString(pub) + `"}],
    "tiers": [{"minAmount": "0", "approvals": 1}]}}`
	p, err := ParsePolicy([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	st := approvers.Statement{OrgID: "org_1", App: "pay", Domain: "payment", OrderID: "ord_1", Chain: "ethereum", WalletID: "wal_mine",
		From: wallet.Hex(), PolicyVersion: 3, RequiredApprovals: 1,
		Intent: []chain.Intent{{Leg: "TRANSFER", To: supplier.Hex(), Asset: "USDC", Amount: "5000000", Contract: usdc.Hex(), Method: "transfer"}}}
	raw, _ := st.Canonical()
	intent := string(raw)
	// passkey is what a browser's passkey gives for a challenge at a relying party.
	passkey := func(decision, signedDecision, rpID string) client.SigningApproval {
		rpHash := sha256.Sum256([]byte(rpID))
		authData := append(append(rpHash[:], 0x05), 0, 0, 0, 1)
		clientData, _ := json.Marshal(map[string]string{"type": "webauthn.get", "origin": "https://" + rpID,
			"challenge": approvers.Challenge(approvers.DecisionDigest(signedDecision, raw))})
		clientHash := sha256.Sum256(clientData)
		signed := sha256.Sum256(append(append([]byte{}, authData...), clientHash[:]...))
		sig, _ := ecdsa.SignASN1(rand.Reader, key, signed[:])
		enc := base64.RawURLEncoding.EncodeToString
		return client.SigningApproval{Decision: decision, DecidedBy: "usr_1", KeyID: "apk_pass", Scheme: "p256", Signature: enc(sig),
			AuthenticatorData: enc(authData), ClientDataJSON: enc(clientData), Statement: intent}
	}
	for _, tc := range []struct {
		name     string
		approval client.SigningApproval
		reason   string
	}{
		{"the passkey's approval", passkey("APPROVE", "APPROVE", "treasury.example.com"), ""},
		{"a passkey of another site", passkey("APPROVE", "APPROVE", "evil.example.com"), "quorum_not_met"},
		{"a rejection's assertion passed off as an approval", passkey("APPROVE", "REJECT", "treasury.example.com"), "quorum_not_met"},
	} {
		r := evmRequest(t, eip1559(1, usdc, new(big.Int), packed(t, contracts.Token, "transfer", supplier, big.NewInt(5_000_000)), 65_000), "")
		r.Leg, r.Intent, r.Approvals = "TRANSFER", &intent, []client.SigningApproval{tc.approval}
		got := p.Check(r, "wal_mine", wallet.Hex())
		if (tc.reason == "" && got != nil) || (tc.reason != "" && (got == nil || got.Reason != tc.reason)) {
			t.Errorf("%s: got %v, want %q", tc.name, got, tc.reason)
		}
	}
}

// One key is one approver: a file pinning a public key twice, under two ids, is refused.
func TestAPolicyPinsEachApproverKeyOnce(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	key := base64.StdEncoding.EncodeToString(pub)
	text := `{"chains": {"ethereum": {"chainId": 1, "maxFeeWei": "1"}},
  "approvers": {"keys": [{"id": "apk_a", "scheme": "ed25519", "publicKey": "` + key + `"}, {"id": "apk_b", "scheme": "ed25519", "publicKey": "` + key + `"}],
    "tiers": [{"minAmount": "0", "approvals": 2}]}}`
	if _, err := ParsePolicy([]byte(text)); err == nil || !strings.Contains(err.Error(), "repeats") {
		t.Fatalf("a key pinned twice: %v", err)
	}
}
