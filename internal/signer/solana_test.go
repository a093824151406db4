package signer

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"testing"

	sol "github.com/gagliardetto/solana-go"
	computebudget "github.com/gagliardetto/solana-go/programs/compute-budget"
	"github.com/gagliardetto/solana-go/programs/system"
	"github.com/gagliardetto/solana-go/programs/token"

	"github.com/opentreasury/treasury/client"
	"github.com/opentreasury/treasury/internal/approvers"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/keys"
	"github.com/opentreasury/treasury/internal/chain/solana"
)

// TestThePolicyJudgesTheDecodedSolanaMessage: the signer reads a Solana message from its
// bytes and judges what it does (destinations, the mint, the fee cap, who pays), then, with
// a quorum of its own, holds it to the approved intent; the readable fields count for
// nothing.
func TestThePolicyJudgesTheDecodedSolanaMessage(t *testing.T) {
	_, walletKey, _ := ed25519.GenerateKey(rand.Reader)
	key := keys.FromEd25519(walletKey)
	wallet, supplier, stranger := sol.MustPublicKeyFromBase58(key.SolanaAddress()), sol.NewWallet().PublicKey(), sol.NewWallet().PublicKey()
	mint, otherMint := sol.NewWallet().PublicKey(), sol.NewWallet().PublicKey()
	approverPub, approverKey, _ := ed25519.GenerateKey(rand.Reader)
	policy := func(quorum bool) *Policy {
		text := `{"chains": {"solana": {"maxFeeLamports": "100000"}},
  "allow": {"destinations": ["` + supplier.String() + `"], "contracts": [{"address": "` + mint.String() + `", "methods": ["transfer"]}]}`
		if quorum {
			text += `, "approvers": {"keys": [{"id": "apk_a", "scheme": "ed25519", "publicKey": "` + base64.StdEncoding.EncodeToString(approverPub) + `"}],
  "tiers": [{"minAmount": "0", "approvals": 1}]}`
		}
		p, err := ParsePolicy([]byte(text + "}"))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	budget := func(price uint64) []sol.Instruction {
		return []sol.Instruction{computebudget.NewSetComputeUnitLimitInstruction(60_000).Build(),
			computebudget.NewSetComputeUnitPriceInstruction(price).Build()}
	}
	tokens := func(to, m sol.PublicKey, amount uint64) sol.Instruction {
		source, _, _ := sol.FindAssociatedTokenAddress(wallet, m)
		destination, _, _ := sol.FindAssociatedTokenAddress(to, m)
		return token.NewTransferCheckedInstruction(amount, 6, source, m, destination, wallet, nil).Build()
	}
	statement := func(amount string) string {
		st := approvers.Statement{OrgID: "org_1", App: "pay", Domain: "payment", OrderID: "ord_1", Chain: "solana", WalletID: "wal_mine",
			From: wallet.String(), PolicyVersion: 1, RequiredApprovals: 1, ExpiresAt: "2026-11-30T00:00:00.000Z",
			Intent: []chain.Intent{{Leg: "TRANSFER", To: supplier.String(), Asset: "USDC", Amount: amount, Contract: mint.String(), Method: "transferChecked"}}}
		b, err := st.Canonical()
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	request := func(payer sol.PublicKey, intent string, ixs ...sol.Instruction) client.SigningRequest {
		tx, err := sol.NewTransaction(ixs, sol.Hash(sha256.Sum256([]byte("blockhash"))), sol.TransactionPayer(payer))
		if err != nil {
			t.Fatal(err)
		}
		raw, err := tx.Message.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(raw)
		// The policy judges the bytes alone; the readable fields are the message's, for the
		// signature's own check (client.SignRequest).
		f := solana.Fields{Type: solana.FieldsType, Message: base64.StdEncoding.EncodeToString(raw)}
		if m, err := solana.DecodeMessage(raw); err == nil {
			f.FeePayer, f.RecentBlockhash, f.ComputeUnitLimit, f.ComputeUnitPrice, f.Instructions = m.FeePayer, m.RecentBlockhash,
				m.ComputeUnitLimit, m.ComputeUnitPrice, m.Instructions
		}
		readable, _ := json.Marshal(f)
		r := client.SigningRequest{ID: "sig_1", Chain: "solana", Leg: "TRANSFER", Scheme: "ed25519", UnsignedTx: string(readable),
			RawUnsignedTx: hex.EncodeToString(raw), Digest: hex.EncodeToString(sum[:])}
		if intent != "" {
			sig := ed25519.Sign(approverKey, approvers.DecisionDigest("APPROVE", []byte(intent)))
			r.Intent = &intent
			r.Approvals = []client.SigningApproval{{Decision: "APPROVE", KeyID: "apk_a", Scheme: "ed25519",
				Signature: base64.StdEncoding.EncodeToString(sig), Statement: intent}}
		}
		return r
	}
	tampered := request(wallet, "", append(budget(1_000), tokens(supplier, mint, 5))...)
	tampered.Digest = hex.EncodeToString(make([]byte, 32))
	// A token account the wallet is only a delegate of: its owner is the wallet, its source
	// another's.
	delegated := func() sol.Instruction {
		source, _, _ := sol.FindAssociatedTokenAddress(stranger, mint)
		destination, _, _ := sol.FindAssociatedTokenAddress(supplier, mint)
		return token.NewTransferCheckedInstruction(5, 6, source, mint, destination, wallet, nil).Build()
	}
	// The supplier's address with its last lower-case letter in upper case (not i or o,
	// whose capitals base58 lacks): the last digit changes, so it is another 32-byte key.
	caseVariant := []byte(supplier.String())
	for i := len(caseVariant) - 1; i >= 0; i-- {
		if c := caseVariant[i]; c >= 'a' && c <= 'z' && c != 'i' && c != 'o' {
			caseVariant[i] = c - 'a' + 'A'
			break
		}
	}
	variant, err := sol.PublicKeyFromBase58(string(caseVariant))
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name   string
		quorum bool
		req    client.SigningRequest
		reason string
	}{
		{"USDC to an allowed supplier", false, request(wallet, "", append(budget(1_000), tokens(supplier, mint, 5_000_000))...), ""},
		{"SOL to an allowed supplier", false, request(wallet, "", append(budget(1_000), system.NewTransferInstruction(7, wallet, supplier).Build())...), ""},
		{"SOL to a stranger", false, request(wallet, "", append(budget(1_000), system.NewTransferInstruction(7, wallet, stranger).Build())...), "destination_not_allowed"},
		{"tokens to a stranger's account", false, request(wallet, "", append(budget(1_000), tokens(stranger, mint, 5))...), "destination_not_allowed"},
		{"a mint the signer does not allow", false, request(wallet, "", append(budget(1_000), tokens(supplier, otherMint, 5))...), "contract_not_allowed"},
		{"a priority fee above the cap", false, request(wallet, "", append(budget(10_000_000), tokens(supplier, mint, 5))...), "fee_above_cap"},
		{"another account pays", false, request(stranger, "", append(budget(1_000), system.NewTransferInstruction(7, stranger, supplier).Build())...), "wrong_wallet"},
		{"a digest of other bytes", false, tampered, "digest_mismatch"},
		{"SOL to a case variant of the supplier, another key", false, request(wallet, "", append(budget(1_000), system.NewTransferInstruction(7, wallet, variant).Build())...), "destination_not_allowed"},
		{"tokens from an account the wallet is a delegate of", false, request(wallet, "", append(budget(1_000), delegated())...), "wrong_wallet"},
		{"no compute limit: the runtime's default, at a high price", false, request(wallet, "",
			computebudget.NewSetComputeUnitPriceInstruction(5_000_000_000).Build(), tokens(supplier, mint, 5)), "fee_above_cap"},
		{"a limit and price whose product wraps a u64", false, request(wallet, "", computebudget.NewSetComputeUnitLimitInstruction(1<<32-1).Build(),
			computebudget.NewSetComputeUnitPriceInstruction(1<<32+2).Build(), tokens(supplier, mint, 5)), "fee_above_cap"},
		{"what the approver approved", true, request(wallet, statement("5000000"), append(budget(1_000), tokens(supplier, mint, 5_000_000))...), ""},
		{"more than the approver approved", true, request(wallet, statement("5000000"), append(budget(1_000), tokens(supplier, mint, 6_000_000))...), "intent_mismatch"},
	} {
		got := policy(tc.quorum).Check(tc.req, "wal_mine", wallet.String())
		if (tc.reason == "" && got != nil) || (tc.reason != "" && (got == nil || got.Reason != tc.reason)) {
			t.Errorf("%s: got %v, want %q", tc.name, got, tc.reason)
		}
	}
	if _, err := ParsePolicy([]byte(`{"chains": {"solana": {"maxFeeLamports": "100000", "chainId": 1}}}`)); err == nil {
		t.Error("a Solana chain rule with an EVM chain id was taken")
	}

	// The signer itself, with its ed25519 key: it signs the honest request over its message
	// and refuses the other.
	good := request(wallet, "", append(budget(1_000), tokens(supplier, mint, 5_000_000))...)
	bad := request(wallet, "", append(budget(1_000), tokens(stranger, mint, 5_000_000))...)
	good.ID, bad.ID, good.WalletID, bad.WalletID = "sig_good", "sig_bad", "wal_mine", "wal_mine"
	srv, posted := fakeService(t, bad, good)
	cfg := withDefaults(Config{BaseURL: srv.URL, Token: "tk_sign", WalletID: "wal_mine", Key: key, HTTP: srv.Client(), Policy: policy(false)})
	if err := pass(context.Background(), cfg, map[string]bool{}); err != nil {
		t.Fatal(err)
	}
	if got := posted()["/api/v1/signing-requests/sig_bad/refusal"]["reason"]; got != "destination_not_allowed" {
		t.Errorf("the request paying a stranger: refusal %q (posted %v)", got, posted())
	}
	sig, _ := base64.StdEncoding.DecodeString(posted()["/api/v1/signing-requests/sig_good/signature"]["signature"])
	raw, _ := hex.DecodeString(good.RawUnsignedTx)
	if !ed25519.Verify(walletKey.Public().(ed25519.PublicKey), raw, sig) {
		t.Errorf("the honest request was not signed over its message (posted %v)", posted())
	}
}
