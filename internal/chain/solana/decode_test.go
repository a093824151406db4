package solana_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	sol "github.com/gagliardetto/solana-go"
	computebudget "github.com/gagliardetto/solana-go/programs/compute-budget"
	"github.com/gagliardetto/solana-go/programs/memo"
	"github.com/gagliardetto/solana-go/programs/system"
	"github.com/gagliardetto/solana-go/programs/token"

	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/solana"
)

// message builds a message of a payer's, offline, as a signer would receive it.
func message(t *testing.T, payer sol.PublicKey, ixs ...sol.Instruction) []byte {
	t.Helper()
	tx, err := sol.NewTransaction(ixs, sol.Hash(sha256.Sum256([]byte("a blockhash"))), sol.TransactionPayer(payer))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := tx.Message.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestDecodeMessageReadsEveryInstructionOrRefuses: a token payment reads back in words
// and checks against its intent; a change of recipient, amount or mint does not; an
// instruction the service never builds makes the message unreadable to a signer.
func TestDecodeMessageReadsEveryInstructionOrRefuses(t *testing.T) {
	payer, payee, mint := sol.NewWallet().PublicKey(), sol.NewWallet().PublicKey(), sol.NewWallet().PublicKey()
	source, _, _ := sol.FindAssociatedTokenAddress(payer, mint)
	destination, _, _ := sol.FindAssociatedTokenAddress(payee, mint)
	budget := []sol.Instruction{computebudget.NewSetComputeUnitLimitInstruction(60_000).Build(),
		computebudget.NewSetComputeUnitPriceInstruction(2_000).Build()}
	create := sol.NewInstruction(sol.SPLAssociatedTokenAccountProgramID, sol.AccountMetaSlice{
		sol.Meta(payer).WRITE().SIGNER(), sol.Meta(destination).WRITE(), sol.Meta(payee), sol.Meta(mint),
		sol.Meta(sol.SystemProgramID), sol.Meta(sol.TokenProgramID)}, []byte{1})
	transfer := func(to sol.PublicKey, amount uint64) sol.Instruction {
		return token.NewTransferCheckedInstruction(amount, 6, source, mint, to, payer, nil).Build()
	}
	intent := chain.Intent{Leg: "TRANSFER", To: payee.String(), Asset: "USDC", Amount: "2500000", Contract: mint.String(), Method: "transferChecked"}

	m, err := solana.DecodeMessage(message(t, payer, append(budget, create, transfer(destination, 2_500_000))...))
	if err != nil {
		t.Fatal(err)
	}
	if m.ComputeUnitLimit != 60_000 || m.ComputeUnitPrice != 2_000 || m.Fee() != 5_000+120 || len(m.Instructions) != 4 {
		t.Fatalf("decoded %+v, fee %d", m, m.Fee())
	}
	if got := m.Instructions[3]; got.Method != "transferChecked" || got.Args["amount"] != "2500000" || got.Args["destination"] != destination.String() {
		t.Fatalf("the transfer reads %+v", got)
	}
	if err := solana.CheckIntent(m, intent); err != nil {
		t.Fatal(err)
	}

	elsewhere, _, _ := sol.FindAssociatedTokenAddress(sol.NewWallet().PublicKey(), mint)
	delegated := token.NewTransferCheckedInstruction(2_500_000, 6, elsewhere, mint, destination, payer, nil).Build()
	for name, ixs := range map[string][]sol.Instruction{
		"another token account": append(budget, transfer(elsewhere, 2_500_000)),
		"another amount":        append(budget, transfer(destination, 2_500_001)),
		"twice":                 append(budget, transfer(destination, 2_500_000), transfer(destination, 2_500_000)),
		"SOL as well":           append(budget, transfer(destination, 2_500_000), system.NewTransferInstruction(1, payer, payee).Build()),
		"from another account":  append(budget, delegated),
	} {
		m, err := solana.DecodeMessage(message(t, payer, ixs...))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := solana.CheckIntent(m, intent); err == nil {
			t.Errorf("%s passed for the intent", name)
		}
	}
	if _, err := solana.DecodeMessage(message(t, payer, append(budget, memo.NewMemoInstruction([]byte("hi"), payer).Build())...)); err == nil {
		t.Error("a memo decoded: a signer would sign what it cannot read")
	}
	if _, err := solana.DecodeMessage(message(t, payer, append(budget, computebudget.NewSetComputeUnitPriceInstruction(1).Build())...)); err == nil {
		t.Error("a message setting its price twice decoded: the runtime refuses it, a signer would judge the wrong one")
	}
	multisig := token.NewTransferCheckedInstruction(1, 6, source, mint, destination, payer, []sol.PublicKey{sol.NewWallet().PublicKey()}).Build()
	if _, err := solana.DecodeMessage(message(t, payer, multisig)); err == nil {
		t.Error("a transfer with a multisig's signers decoded as the service's own")
	}
}

// The fee a signer caps is the runtime's: the default compute limit when none is set,
// never above the most, and no wrap of a u64.
func TestTheFeeIsWhatTheRuntimeCharges(t *testing.T) {
	payer, payee := sol.NewWallet().PublicKey(), sol.NewWallet().PublicKey()
	transfer := system.NewTransferInstruction(1, payer, payee).Build()
	for _, c := range []struct {
		name string
		ixs  []sol.Instruction
		want uint64
	}{
		{"a limit at a price", []sol.Instruction{computebudget.NewSetComputeUnitLimitInstruction(1_000).Build(),
			computebudget.NewSetComputeUnitPriceInstruction(1_500).Build(), transfer}, 5_000 + 2},
		{"no limit: 200,000 units for the transfer", []sol.Instruction{computebudget.NewSetComputeUnitPriceInstruction(5_000_000_000).Build(), transfer},
			5_000 + 1_000_000_000},
		{"a limit above the most counts as the most", []sol.Instruction{computebudget.NewSetComputeUnitLimitInstruction(1<<32 - 1).Build(),
			computebudget.NewSetComputeUnitPriceInstruction(1<<32 + 2).Build(), transfer}, 5_000 + 1_400_000*(1<<32+2)/1_000_000 + 1},
		{"no budget at all", []sol.Instruction{transfer}, 5_000},
	} {
		m, err := solana.DecodeMessage(message(t, payer, c.ixs...))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := m.Fee(); got != c.want {
			t.Errorf("%s: fee %d lamports, want %d", c.name, got, c.want)
		}
	}
}

// TestCheckRequestHoldsTheReadableFieldsToTheMessage: readable instructions that say
// another thing than the message's own are refused, as are an unmatched digest and a
// message another account pays.
func TestCheckRequestHoldsTheReadableFieldsToTheMessage(t *testing.T) {
	payer, payee := sol.NewWallet().PublicKey(), sol.NewWallet().PublicKey()
	raw := message(t, payer, computebudget.NewSetComputeUnitLimitInstruction(1_000).Build(),
		computebudget.NewSetComputeUnitPriceInstruction(1_000).Build(), system.NewTransferInstruction(7, payer, payee).Build())
	m, err := solana.DecodeMessage(raw)
	if err != nil {
		t.Fatal(err)
	}
	fields := solana.Fields{Type: solana.FieldsType, FeePayer: m.FeePayer, RecentBlockhash: m.RecentBlockhash, ComputeUnitLimit: 1_000,
		ComputeUnitPrice: 1_000, Instructions: m.Instructions, Message: base64.StdEncoding.EncodeToString(raw)}
	sum := sha256.Sum256(raw)
	digest := hex.EncodeToString(sum[:])
	check := func(f solana.Fields, digest, address string) error {
		text, _ := json.Marshal(f)
		return solana.CheckRequest(text, raw, digest, address)
	}
	if err := check(fields, digest, payer.String()); err != nil {
		t.Fatal(err)
	}
	lying := fields
	lying.Instructions = append([]solana.Instruction(nil), fields.Instructions...)
	lying.Instructions[2] = solana.Instruction{Program: "system", Method: "transfer", Args: map[string]string{"from": payer.String(), "to": payee.String(), "lamports": "1"}}
	if err := check(lying, digest, payer.String()); err == nil || !strings.Contains(err.Error(), "instructions") {
		t.Errorf("readable instructions that understate the amount: %v", err)
	}
	if err := check(fields, strings.Repeat("0", 64), payer.String()); err == nil {
		t.Error("an unmatched digest passed")
	}
	if err := check(fields, digest, payee.String()); err == nil {
		t.Error("another wallet's message passed")
	}
}
