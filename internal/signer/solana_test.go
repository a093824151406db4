package signer

import (
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
	"github.com/opentreasury/treasury/internal/chain/solana"
)

// TestThePolicyJudgesTheDecodedSolanaMessage: the signer reads a Solana message from its
// bytes and judges what it does (destinations, the mint, the fee cap, who pays), then, with
// a quorum of its own, holds it to the approved intent; the readable fields count for
// nothing.
func TestThePolicyJudgesTheDecodedSolanaMessage(t *testing.T) {
	wallet, supplier, stranger := sol.NewWallet().PublicKey(), sol.NewWallet().PublicKey(), sol.NewWallet().PublicKey()
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
		// The readable fields say only that it is a Solana transaction: the signer must not need more.
		readable, _ := json.Marshal(solana.Fields{Type: solana.FieldsType, FeePayer: "anything"})
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
}
