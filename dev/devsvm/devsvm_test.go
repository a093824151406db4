package devsvm

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	associatedtokenaccount "github.com/gagliardetto/solana-go/programs/associated-token-account"
	"github.com/gagliardetto/solana-go/programs/system"
	"github.com/gagliardetto/solana-go/programs/token"
	"github.com/gagliardetto/solana-go/rpc"
	"github.com/gagliardetto/solana-go/rpc/jsonrpc"

	"github.com/opentreasury/treasury/dev/wait"
)

const sol = solana.LAMPORTS_PER_SOL

// start runs a server in dir for the test, stopped when it ends. A slot time of an hour is a
// chain that moves only by AdvanceSlots.
func start(t *testing.T, dir string, slot time.Duration) *Node {
	t.Helper()
	began := time.Now()
	n, err := Start(context.Background(), Options{Dir: dir, SlotTime: slot, Log: slog.New(slog.NewTextHandler(testLog{t}, nil))})
	if errors.Is(err, ErrNoNode) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("devsvm started in %v", time.Since(began))
	t.Cleanup(func() {
		if err := n.Stop(); err != nil {
			t.Error(err)
		}
	})
	return n
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func signed(t *testing.T, bh solana.Hash, payer *solana.Wallet, ixs ...solana.Instruction) *solana.Transaction {
	t.Helper()
	tx, err := solana.NewTransaction(ixs, bh, solana.TransactionPayer(payer.PublicKey()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Sign(func(k solana.PublicKey) *solana.PrivateKey {
		if k.Equals(payer.PublicKey()) {
			return &payer.PrivateKey
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return tx
}

func blockhash(t *testing.T, cli *rpc.Client, c rpc.CommitmentType) solana.Hash {
	t.Helper()
	out, err := cli.GetLatestBlockhash(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return out.Value.Blockhash
}

func lamports(t *testing.T, cli *rpc.Client, k solana.PublicKey) uint64 {
	t.Helper()
	out, err := cli.GetBalance(context.Background(), k, rpc.CommitmentProcessed)
	if err != nil {
		t.Fatal(err)
	}
	return out.Value
}

func tokens(t *testing.T, cli *rpc.Client, account solana.PublicKey) string {
	t.Helper()
	out, err := cli.GetTokenAccountBalance(context.Background(), account, rpc.CommitmentProcessed)
	if err != nil {
		t.Fatal(err)
	}
	return out.Value.Amount
}

func status(t *testing.T, cli *rpc.Client, sig solana.Signature) *rpc.SignatureStatusesResult {
	t.Helper()
	out, err := cli.GetSignatureStatuses(context.Background(), false, sig)
	if err != nil {
		t.Fatal(err)
	}
	return out.Value[0]
}

func waitConfirmed(t *testing.T, cli *rpc.Client, sig solana.Signature) *rpc.SignatureStatusesResult {
	t.Helper()
	var s *rpc.SignatureStatusesResult
	wait.For(t, 30*time.Second, "confirmation of "+sig.String(), func() bool {
		s = status(t, cli, sig)
		return s != nil && s.ConfirmationStatus == rpc.ConfirmationStatusConfirmed
	})
	return s
}

// rpcError is the JSON-RPC error in err, failing the test when there is none.
func rpcError(t *testing.T, err error) *jsonrpc.RPCError {
	t.Helper()
	var e *jsonrpc.RPCError
	if !errors.As(err, &e) {
		t.Fatalf("want a JSON-RPC error, got %v", err)
	}
	return e
}

func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// createATA is the associated-token-account program's CreateIdempotent, which solana-go
// lacks: Create's accounts with instruction byte 1.
func createATA(payer, owner, mint solana.PublicKey) solana.Instruction {
	create := associatedtokenaccount.NewCreateInstruction(payer, owner, mint).Build()
	return solana.NewInstruction(associatedtokenaccount.ProgramID, create.Accounts(), []byte{1})
}

func ataOf(t *testing.T, owner, mint solana.PublicKey) solana.PublicKey {
	t.Helper()
	a, _, err := solana.FindAssociatedTokenAddress(owner, mint)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// A SOL transfer signed with solana-go lands with exact balances and Solana's 5,000-lamport
// fee, is confirmed as slots pass, and sent again changes nothing.
func TestTransferLandsOnceAndIsConfirmed(t *testing.T) {
	ctx := context.Background()
	n := start(t, t.TempDir(), 0)
	cli := rpc.New(n.URL())
	payer, dest := solana.NewWallet(), solana.NewWallet().PublicKey()
	if err := n.Airdrop(ctx, payer.PublicKey().String(), 10*sol); err != nil {
		t.Fatal(err)
	}
	if got := lamports(t, cli, payer.PublicKey()); got != 10*sol {
		t.Fatalf("after the airdrop the payer has %d lamports, want %d", got, 10*sol)
	}

	tx := signed(t, blockhash(t, cli, rpc.CommitmentFinalized), payer, system.NewTransferInstruction(sol, payer.PublicKey(), dest).Build())
	began := time.Now()
	sig, err := cli.SendTransaction(ctx, tx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sendTransaction, preflight and execution included, answered in %v", time.Since(began))
	if sig != tx.Signatures[0] {
		t.Fatalf("sendTransaction answered %s, want the transaction's signature %s", sig, tx.Signatures[0])
	}
	first := status(t, cli, sig)
	if first == nil || first.Err != nil {
		t.Fatalf("status right after sending: %+v, want landed without error", first)
	}
	// Right after sending it is processed, unless a slot has passed in between.
	switch first.ConfirmationStatus {
	case rpc.ConfirmationStatusProcessed:
		if first.Confirmations == nil || *first.Confirmations != 0 {
			t.Fatalf("processed with confirmations %v, want 0", first.Confirmations)
		}
	case rpc.ConfirmationStatusConfirmed:
	default:
		t.Fatalf("status right after sending is %q", first.ConfirmationStatus)
	}
	confirmed := waitConfirmed(t, cli, sig)
	t.Logf("a payment from send to confirmed: %v", time.Since(began))
	if confirmed.Slot != first.Slot || confirmed.Confirmations == nil || *confirmed.Confirmations < 1 {
		t.Fatalf("confirmed status %+v after %+v", confirmed, first)
	}

	if got := lamports(t, cli, payer.PublicKey()); got != 10*sol-sol-5000 {
		t.Fatalf("payer has %d lamports, want %d (10 SOL - 1 SOL - 5000 fee)", got, 10*sol-sol-5000)
	}
	if got := lamports(t, cli, dest); got != sol {
		t.Fatalf("destination has %d lamports, want %d", got, sol)
	}
	zero := uint64(0)
	got, err := cli.GetTransaction(ctx, sig, &rpc.GetTransactionOpts{Encoding: solana.EncodingBase64, Commitment: rpc.CommitmentConfirmed, MaxSupportedTransactionVersion: &zero})
	if err != nil {
		t.Fatal(err)
	}
	if got.Slot != first.Slot || got.Meta == nil || got.Meta.Err != nil || got.Meta.Fee != 5000 {
		t.Fatalf("getTransaction: slot %d meta %+v, want slot %d, fee 5000, no error", got.Slot, got.Meta, first.Slot)
	}
	if pre, post := got.Meta.PreBalances, got.Meta.PostBalances; len(pre) != 3 || pre[0]-post[0] != sol+5000 || post[1]-pre[1] != sol {
		t.Fatalf("getTransaction balances %v → %v", pre, post)
	}
	back, err := got.Transaction.GetTransaction()
	if err != nil || back.Signatures[0] != sig {
		t.Fatalf("getTransaction's transaction: %v, %v", back, err)
	}
	// The default encoding, json, decodes to the same transaction.
	asJSONTx, err := cli.GetTransaction(ctx, sig, &rpc.GetTransactionOpts{Commitment: rpc.CommitmentConfirmed})
	if err != nil {
		t.Fatal(err)
	}
	if parsed, err := asJSONTx.Transaction.GetTransaction(); err != nil || parsed.Message.RecentBlockhash != tx.Message.RecentBlockhash || parsed.Signatures[0] != sig {
		t.Fatalf("getTransaction in json: %v, %v", parsed, err)
	}

	// A rebroadcast, with and without preflight, answers the same signature and runs nothing.
	for _, skip := range []bool{false, true} {
		again, err := cli.SendTransactionWithOpts(ctx, tx, rpc.TransactionOpts{SkipPreflight: skip})
		if err != nil || again != sig {
			t.Fatalf("sent again (skipPreflight %v): %s, %v; want %s", skip, again, err, sig)
		}
	}
	if p, d := lamports(t, cli, payer.PublicKey()), lamports(t, cli, dest); p != 10*sol-sol-5000 || d != sol {
		t.Fatalf("after sending again: payer %d, destination %d; want them unchanged", p, d)
	}

	// Finalized after 32 slots, when Solana stops counting confirmations.
	if err := n.AdvanceSlots(ctx, 32); err != nil {
		t.Fatal(err)
	}
	if s := status(t, cli, sig); s.ConfirmationStatus != rpc.ConfirmationStatusFinalized || s.Confirmations != nil {
		t.Fatalf("after 32 slots: %+v, want finalized with confirmations null", s)
	}
}

// A tampered signature is refused as Solana does (-32003), and so is a blockhash more than 150
// slots old (BlockhashNotFound), with nothing moved. The chain here moves only when told, so
// each status is exact.
func TestBadSignatureAndExpiredBlockhashNeverLand(t *testing.T) {
	ctx := context.Background()
	n := start(t, t.TempDir(), time.Hour)
	cli := rpc.New(n.URL())
	payer, dest := solana.NewWallet(), solana.NewWallet().PublicKey()
	if err := n.Airdrop(ctx, payer.PublicKey().String(), 10*sol); err != nil {
		t.Fatal(err)
	}

	tx := signed(t, blockhash(t, cli, rpc.CommitmentProcessed), payer, system.NewTransferInstruction(sol, payer.PublicKey(), dest).Build())
	raw, err := tx.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	raw[1] ^= 1 // the first byte of the first signature, after its count
	_, err = cli.SendRawTransaction(ctx, raw)
	if e := rpcError(t, err); e.Code != -32003 || e.Message != "Transaction signature verification failure" {
		t.Fatalf("tampered signature: %d %q, want -32003 Transaction signature verification failure", e.Code, e.Message)
	}
	if got := lamports(t, cli, payer.PublicKey()); got != 10*sol {
		t.Fatalf("after the tampered transaction the payer has %d, want %d", got, 10*sol)
	}
	_, err = cli.SendRawTransaction(ctx, raw[:len(raw)-3])
	if e := rpcError(t, err); e.Code != -32602 {
		t.Fatalf("truncated transaction: %d %q, want -32602", e.Code, e.Message)
	}

	// The untampered one lands: processed now, confirmed one slot on, finalized 32 slots on.
	sig, err := cli.SendTransaction(ctx, tx)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		advance       int
		status        rpc.ConfirmationStatusType
		confirmations *uint64
	}{{0, rpc.ConfirmationStatusProcessed, ptr(0)}, {1, rpc.ConfirmationStatusConfirmed, ptr(1)},
		{30, rpc.ConfirmationStatusConfirmed, ptr(31)}, {1, rpc.ConfirmationStatusFinalized, nil}} {
		if err := n.AdvanceSlots(ctx, step.advance); err != nil {
			t.Fatal(err)
		}
		s := status(t, cli, sig)
		if s == nil || s.ConfirmationStatus != step.status || asJSON(t, s.Confirmations) != asJSON(t, step.confirmations) || s.Err != nil {
			t.Fatalf("after %d more slots: %+v, want %s with confirmations %s", step.advance, s, step.status, asJSON(t, step.confirmations))
		}
	}

	// A blockhash stays valid for 150 slots after its own, then is not found.
	bh := blockhash(t, cli, rpc.CommitmentProcessed)
	if err := n.AdvanceSlots(ctx, 150); err != nil {
		t.Fatal(err)
	}
	if v, err := cli.IsBlockhashValid(ctx, bh, rpc.CommitmentProcessed); err != nil || !v.Value {
		t.Fatalf("a blockhash 150 slots old: valid %v, %v; want valid", v, err)
	}
	if err := n.AdvanceSlots(ctx, 1); err != nil {
		t.Fatal(err)
	}
	before := lamports(t, cli, payer.PublicKey())
	old := signed(t, bh, payer, system.NewTransferInstruction(sol, payer.PublicKey(), dest).Build())
	_, err = cli.SendTransactionWithOpts(ctx, old, rpc.TransactionOpts{})
	e := rpcError(t, err)
	data, _ := e.Data.(map[string]any)
	if e.Code != -32002 || !strings.Contains(e.Message, "Blockhash not found") || data["err"] != "BlockhashNotFound" {
		t.Fatalf("expired blockhash with preflight: %d %q %v, want -32002 Blockhash not found, err BlockhashNotFound", e.Code, e.Message, e.Data)
	}
	// Without preflight the node takes it, as Solana's RPC forwards it, and it is dropped.
	if got, err := cli.SendTransactionWithOpts(ctx, old, rpc.TransactionOpts{SkipPreflight: true}); err != nil || got != old.Signatures[0] {
		t.Fatalf("expired blockhash without preflight: %v, %v; want its signature", got, err)
	}
	if after := lamports(t, cli, payer.PublicKey()); after != before {
		t.Fatalf("the expired transaction moved the payer from %d to %d", before, after)
	}
	if s := status(t, cli, old.Signatures[0]); s != nil {
		t.Fatalf("the expired transaction has a status: %+v", s)
	}
}

func ptr(v uint64) *uint64 { return &v }

// USDC moves with exact token balances; a transfer to the frozen account lands failed with
// the token program's AccountFrozen (0x11) and its fee paid when sent without preflight, and
// is refused by preflight otherwise.
func TestUSDCTransfersAndTheFrozenPayee(t *testing.T) {
	ctx := context.Background()
	n := start(t, t.TempDir(), 0)
	cli := rpc.New(n.URL())
	info, err := n.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mint := solana.MustPublicKeyFromBase58(info.USDCMint)
	frozenOwner := solana.MustPublicKeyFromBase58(info.FrozenOwner)
	if info.USDCMint != USDCMint || info.FrozenOwner != FrozenOwner {
		t.Fatalf("devsvm_info %+v: the mint and the frozen owner are not the ones the package names (%s, %s)", info, USDCMint, FrozenOwner)
	}
	if info.USDCDecimals != 6 || ataOf(t, frozenOwner, mint).String() != info.FrozenTokenAccount {
		t.Fatalf("devsvm_info %+v: want 6 decimals and the frozen owner's associated token account", info)
	}
	supply, err := cli.GetTokenSupply(ctx, mint, rpc.CommitmentProcessed)
	if err != nil || supply.Value.Decimals != 6 {
		t.Fatalf("getTokenSupply: %+v, %v", supply, err)
	}

	payer := solana.NewWallet()
	if err := n.Airdrop(ctx, payer.PublicKey().String(), sol); err != nil {
		t.Fatal(err)
	}
	if err := n.MintUSDC(ctx, payer.PublicKey().String(), 100_000_000); err != nil {
		t.Fatal(err)
	}
	src := ataOf(t, payer.PublicKey(), mint)
	if got := tokens(t, cli, src); got != "100000000" {
		t.Fatalf("after minting 100 USDC the wallet has %s base units", got)
	}
	owned, err := cli.GetTokenAccountsByOwner(ctx, payer.PublicKey(), &rpc.GetTokenAccountsConfig{Mint: &mint}, nil)
	if err != nil || len(owned.Value) != 1 || owned.Value[0].Pubkey != src {
		t.Fatalf("getTokenAccountsByOwner: %+v, %v; want the one account %s", owned, err, src)
	}

	fresh := solana.NewWallet().PublicKey()
	dst := ataOf(t, fresh, mint)
	tx := signed(t, blockhash(t, cli, rpc.CommitmentFinalized), payer,
		createATA(payer.PublicKey(), fresh, mint),
		token.NewTransferCheckedInstruction(12_345_678, 6, src, mint, dst, payer.PublicKey(), nil).Build())
	sig, err := cli.SendTransaction(ctx, tx)
	if err != nil {
		t.Fatal(err)
	}
	if s := waitConfirmed(t, cli, sig); s.Err != nil {
		t.Fatalf("the USDC transfer failed: %v", s.Err)
	}
	if got := tokens(t, cli, dst); got != "12345678" {
		t.Fatalf("the fresh owner has %s base units, want 12345678", got)
	}
	if got := tokens(t, cli, src); got != "87654322" {
		t.Fatalf("the sender has %s base units, want 87654322", got)
	}
	parsed, err := cli.GetAccountInfoWithOpts(ctx, dst, &rpc.GetAccountInfoOpts{Encoding: solana.EncodingJSONParsed})
	if err != nil || !strings.Contains(string(parsed.Value.Data.GetRawJSON()), `"owner":"`+fresh.String()+`"`) {
		t.Fatalf("getAccountInfo jsonParsed: %v, %v", parsed, err)
	}

	frozen := solana.MustPublicKeyFromBase58(info.FrozenTokenAccount)
	toFrozen := func(amount uint64) *solana.Transaction {
		return signed(t, blockhash(t, cli, rpc.CommitmentFinalized), payer,
			createATA(payer.PublicKey(), frozenOwner, mint),
			token.NewTransferCheckedInstruction(amount, 6, src, mint, frozen, payer.PublicKey(), nil).Build())
	}
	const accountFrozen = `{"InstructionError":[1,{"Custom":17}]}`
	solBefore := lamports(t, cli, payer.PublicKey())
	sig, err = cli.SendTransactionWithOpts(ctx, toFrozen(1_000_000), rpc.TransactionOpts{SkipPreflight: true})
	if err != nil {
		t.Fatal(err)
	}
	s := waitConfirmed(t, cli, sig)
	if asJSON(t, s.Err) != accountFrozen || asJSON(t, s.Status) != `{"Err":`+accountFrozen+`}` {
		t.Fatalf("the transfer to the frozen account has err %s status %s, want %s", asJSON(t, s.Err), asJSON(t, s.Status), accountFrozen)
	}
	if got := lamports(t, cli, payer.PublicKey()); got != solBefore-5000 {
		t.Fatalf("the failed transfer cost %d lamports, want its 5000 fee", solBefore-got)
	}
	if got := tokens(t, cli, src); got != "87654322" {
		t.Fatalf("after the failed transfer the sender has %s base units, want 87654322", got)
	}
	if got := tokens(t, cli, frozen); got != "0" {
		t.Fatalf("the frozen account has %s base units", got)
	}

	refused := toFrozen(2_000_000)
	_, err = cli.SendTransaction(ctx, refused)
	e := rpcError(t, err)
	data, _ := e.Data.(map[string]any)
	logs, _ := data["logs"].([]any)
	if e.Code != -32002 || !strings.HasPrefix(e.Message, "Transaction simulation failed: ") || asJSON(t, data["err"]) != accountFrozen || len(logs) == 0 {
		t.Fatalf("preflight of a transfer to the frozen account: %d %q %v; want -32002 simulation failed with %s and logs", e.Code, e.Message, e.Data, accountFrozen)
	}
	if s := status(t, cli, refused.Signatures[0]); s != nil {
		t.Fatalf("a transaction refused by preflight has a status: %+v", s)
	}
	if got := lamports(t, cli, payer.PublicKey()); got != solBefore-5000 {
		t.Fatalf("the refused transfer cost %d lamports more", solBefore-5000-got)
	}
}

// A restarted server resumes the same chain: genesis hash, mint, balances, signatures, a slot
// no earlier, and blockhashes handed out before the restart.
func TestRestartResumesTheChain(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	first := start(t, dir, 0)
	cli := rpc.New(first.URL())
	payer, dest := solana.NewWallet(), solana.NewWallet().PublicKey()
	if err := first.Airdrop(ctx, payer.PublicKey().String(), 5*sol); err != nil {
		t.Fatal(err)
	}
	if err := first.MintUSDC(ctx, payer.PublicKey().String(), 7_000_000); err != nil {
		t.Fatal(err)
	}
	info, err := first.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	landed, err := cli.SendTransaction(ctx, signed(t, blockhash(t, cli, rpc.CommitmentFinalized), payer, system.NewTransferInstruction(sol, payer.PublicKey(), dest).Build()))
	if err != nil {
		t.Fatal(err)
	}
	waitConfirmed(t, cli, landed)
	genesis, err := cli.GetGenesisHash(ctx)
	if err != nil {
		t.Fatal(err)
	}
	balance := lamports(t, cli, payer.PublicKey())
	ata := ataOf(t, payer.PublicKey(), solana.MustPublicKeyFromBase58(info.USDCMint))
	// Another amount than the landed one's, which had the same blockhash.
	pending := signed(t, blockhash(t, cli, rpc.CommitmentFinalized), payer, system.NewTransferInstruction(sol/2, payer.PublicKey(), dest).Build())
	slot, err := cli.GetSlot(ctx, rpc.CommitmentProcessed)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}

	second := start(t, dir, 0)
	cli = rpc.New(second.URL())
	again, err := second.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g, err := cli.GetGenesisHash(ctx); err != nil || g != genesis || again.GenesisHash != info.GenesisHash || again.USDCMint != info.USDCMint {
		t.Fatalf("after the restart: genesis %s (%v), info %+v; want genesis %s, info %+v", g, err, again, genesis, info)
	}
	if s, err := cli.GetSlot(ctx, rpc.CommitmentProcessed); err != nil || s < slot {
		t.Fatalf("after the restart the slot is %d (%v), before it was %d", s, err, slot)
	}
	if got := lamports(t, cli, payer.PublicKey()); got != balance {
		t.Fatalf("after the restart the payer has %d lamports, want %d", got, balance)
	}
	if got := tokens(t, cli, ata); got != "7000000" {
		t.Fatalf("after the restart the payer has %s USDC base units, want 7000000", got)
	}
	if s := status(t, cli, landed); s == nil || s.Err != nil {
		t.Fatalf("after the restart the landed transaction's status is %+v", s)
	}
	sig, err := cli.SendTransaction(ctx, pending)
	if err != nil {
		t.Fatalf("a transaction signed before the restart: %v", err)
	}
	if s := waitConfirmed(t, cli, sig); s.Err != nil {
		t.Fatalf("a transaction signed before the restart failed: %v", s.Err)
	}
	if got := lamports(t, cli, payer.PublicKey()); got != balance-sol/2-5000 {
		t.Fatalf("after the second transfer the payer has %d, want %d", got, balance-sol/2-5000)
	}
}

// TestAwaitExitEndsTheServerLeftOnADirectory: a server still running on a directory (as one
// whose parent was killed outright is, while it saves) is awaited and, past the timeout,
// killed; a pid file naming an unrelated process is not followed.
func TestAwaitExitEndsTheServerLeftOnADirectory(t *testing.T) {
	dir := t.TempDir()
	n, err := Start(context.Background(), Options{Dir: dir, SlotTime: time.Hour})
	if errors.Is(err, ErrNoNode) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = n.Stop() }()
	if err := AwaitExit(dir, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// The server (a slot an hour, so it never ends by itself) is ended: its parent's wait
	// follows. Were AwaitExit to return without ending it, this would time out.
	select {
	case <-n.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("AwaitExit returned while the server still runs")
	}

	if err := os.WriteFile(filepath.Join(dir, pidFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatal(err)
	}
	// An hour: were the test process taken for a server, this would not return.
	if err := AwaitExit(dir, time.Hour); err != nil {
		t.Fatal(err)
	}

	again := start(t, dir, time.Hour)
	if _, err := again.Info(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A machine without Node is told so at start, naming the package to install, and no
// server is left behind.
func TestStartWithoutNodeSaysWhatToInstall(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	n, err := Start(context.Background(), Options{Dir: t.TempDir()})
	if !errors.Is(err, ErrNoNode) || n != nil || !strings.Contains(err.Error(), "apt-get install nodejs npm") {
		t.Fatalf("start without node: %v, %v", n, err)
	}
}
