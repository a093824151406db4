package gethe2e

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/client"
	"github.com/opentreasury/treasury/dev/wait"
	"github.com/opentreasury/treasury/internal/chain/evm"
	"github.com/opentreasury/treasury/internal/chain/evm/contracts"
	"github.com/opentreasury/treasury/internal/events"
)

// What the test reads from the node, as any observer of the chain would: balances, nonces,
// receipts and their logs, over JSON-RPC to geth.

func addressOf(k *ecdsa.PrivateKey) common.Address { return crypto.PubkeyToAddress(k.PublicKey) }

// transferTopic is the ERC-20 Transfer event's signature.
var transferTopic = crypto.Keccak256Hash([]byte("Transfer(address,address,uint256)"))

func rpcContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// token is the deployed token of an asset.
func (s *suite) token(t *testing.T, symbol string) evm.Token {
	t.Helper()
	i := slices.IndexFunc(s.chain.Tokens, func(tk evm.Token) bool { return tk.Symbol == symbol })
	if i < 0 {
		t.Fatalf("no %s deployed on geth", symbol)
	}
	return s.chain.Tokens[i]
}

// units is an amount of an asset in its base units.
func (s *suite) units(t *testing.T, asset, amount string) *big.Int {
	t.Helper()
	decimals := int32(18)
	if asset != s.chain.NativeAsset {
		decimals = s.token(t, asset).Decimals
	}
	u, err := evm.Units(decimal.RequireFromString(amount), decimals)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// balance is what an address holds of an asset at the node's latest block, in base units.
func (s *suite) balance(t *testing.T, asset string, who common.Address) *big.Int {
	t.Helper()
	ctx := rpcContext(t)
	if asset == s.chain.NativeAsset {
		b, err := s.eth.BalanceAt(ctx, who, nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tk := s.token(t, asset)
	erc20 := contracts.ABI(contracts.Token)
	data, err := erc20.Pack("balanceOf", who)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.eth.CallContract(ctx, ethereum.CallMsg{To: &tk.Address, Data: data}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out *big.Int
	if err := erc20.UnpackIntoInterface(&out, "balanceOf", res); err != nil {
		t.Fatal(err)
	}
	return out
}

// nonce is the address's transaction count at the latest block (eth_getTransactionCount).
func (s *suite) nonce(t *testing.T, who common.Address) uint64 {
	t.Helper()
	n, err := s.eth.NonceAt(rpcContext(t), who, nil)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// mined is one transaction as the node has it: the transaction, its sender and its receipt.
type mined struct {
	tx      *types.Transaction
	from    common.Address
	receipt *types.Receipt
}

// fee is what the transaction cost its sender in gas.
func (m mined) fee() *big.Int {
	return new(big.Int).Mul(new(big.Int).SetUint64(m.receipt.GasUsed), m.receipt.EffectiveGasPrice)
}

// lookup reads a transaction and its receipt from the node; it must be mined.
func (s *suite) lookup(t *testing.T, hash string) mined {
	t.Helper()
	ctx := rpcContext(t)
	h := common.HexToHash(hash)
	tx, pending, err := s.eth.TransactionByHash(ctx, h)
	if err != nil {
		t.Fatalf("transaction %s: %v", hash, err)
	}
	if pending {
		t.Fatalf("transaction %s is still pending", hash)
	}
	r, err := s.eth.TransactionReceipt(ctx, h)
	if err != nil {
		t.Fatalf("receipt of %s: %v", hash, err)
	}
	from, err := types.Sender(types.LatestSignerForChainID(tx.ChainId()), tx)
	if err != nil {
		t.Fatal(err)
	}
	return mined{tx: tx, from: from, receipt: r}
}

// erc20Transfer is one Transfer log of a receipt.
type erc20Transfer struct {
	token, from, to common.Address
	amount          *big.Int
}

func transfersIn(r *types.Receipt) []erc20Transfer {
	var out []erc20Transfer
	for _, l := range r.Logs {
		if len(l.Topics) == 3 && l.Topics[0] == transferTopic {
			out = append(out, erc20Transfer{token: l.Address, from: common.BytesToAddress(l.Topics[1].Bytes()),
				to: common.BytesToAddress(l.Topics[2].Bytes()), amount: new(big.Int).SetBytes(l.Data)})
		}
	}
	return out
}

// hasTransfer reports whether the receipt logs exactly this Transfer.
func hasTransfer(r *types.Receipt, want erc20Transfer) bool {
	return slices.ContainsFunc(transfersIn(r), func(got erc20Transfer) bool {
		return got.token == want.token && got.from == want.from && got.to == want.to && got.amount.Cmp(want.amount) == 0
	})
}

// What the test does through the API, as an integrator.

// place creates an order and submits it with the app's secret key, and returns its id.
func (s *suite) place(t *testing.T, domain client.Domain, req client.OrderRequest) string {
	t.Helper()
	id := s.create(t, domain, req)
	s.submit(t, domain, id)
	return id
}

func (s *suite) create(t *testing.T, domain client.Domain, req client.OrderRequest) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o, err := s.writers[domain.App()].CreateOrder(ctx, req)
	if err != nil {
		t.Fatalf("create %s: %v", domain, err)
	}
	return o.ID
}

func (s *suite) submit(t *testing.T, domain client.Domain, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := s.writers[domain.App()].SubmitOrder(ctx, domain, id); err != nil {
		t.Errorf("submit %s: %v", id, err)
	}
}

// submitAll submits the drafts all at once.
func (s *suite) submitAll(t *testing.T, domain client.Domain, ids []string) {
	t.Helper()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() { s.submit(t, domain, id) })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// ended is an order read at its end, and the node's head read right after: a leg confirmed
// at depth d has its receipt's block at most head-d+1.
type ended struct {
	order *client.Order
	head  uint64
}

// waitEnded reads the orders until each is confirmed, failed or rejected, for up to
// timeout; an order still running then fails the test.
func (s *suite) waitEnded(t *testing.T, domain client.Domain, ids []string, timeout time.Duration) map[string]ended {
	t.Helper()
	out := map[string]ended{}
	reader := s.readers[domain.App()]
	defer func() { // name the orders still running, should the wait fail
		for _, id := range ids {
			if _, done := out[id]; !done {
				t.Logf("order %s had not ended", id)
			}
		}
	}()
	wait.For(t, timeout, fmt.Sprintf("%d orders to end (confirmed, failed or rejected)", len(ids)), func() bool {
		for _, id := range ids {
			if _, done := out[id]; done {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			o, err := reader.GetOrder(ctx, domain, id)
			cancel()
			if err != nil {
				t.Fatalf("read %s: %v", id, err)
			}
			if slices.Contains([]string{"confirmed", "failed", "rejected"}, o.Status) {
				head, err := s.eth.BlockNumber(rpcContext(t))
				if err != nil {
					t.Fatal(err)
				}
				out[id] = ended{order: o, head: head}
			}
		}
		return len(out) == len(ids)
	})
	return out
}

// lifecycle is the statuses a one-leg order goes through without approval, in order.
var lifecycle = []string{"submitted", "pending_signature", "signed", "broadcast"}

// checkConfirmed checks a confirmed one-leg order against the node: its history went
// through the lifecycle in order; its transaction is mined, succeeded and was sent by the
// wallet; and its block was at least `confirmations` deep when the order read confirmed.
// It returns the leg's transaction.
func (s *suite) checkConfirmed(t *testing.T, e ended, wallet common.Address) mined {
	t.Helper()
	o := e.order
	if o.Status != "confirmed" {
		t.Fatalf("order %s is %s (%+v), not confirmed", o.ID, o.Status, o.Failure)
	}
	checkHistory(t, o, append(slices.Clone(lifecycle), "confirmed"))
	if len(o.Legs) != 1 || o.Legs[0].TxHash == nil {
		t.Fatalf("order %s: legs %+v, want one with its transaction hash", o.ID, o.Legs)
	}
	m := s.lookup(t, *o.Legs[0].TxHash)
	if m.receipt.Status != types.ReceiptStatusSuccessful {
		t.Fatalf("order %s is confirmed, its transaction %s reverted on chain", o.ID, m.tx.Hash())
	}
	if m.from != wallet {
		t.Fatalf("order %s: %s was sent by %s, not the wallet %s", o.ID, m.tx.Hash(), m.from, wallet)
	}
	if block := m.receipt.BlockNumber.Uint64(); e.head+1 < block+confirmations {
		t.Fatalf("order %s read confirmed with its block %d at depth %d (head %d); want %d", o.ID, block,
			e.head+1-block, e.head, confirmations)
	}
	return m
}

// checkHistory checks that the order's history holds the statuses in this order.
func checkHistory(t *testing.T, o *client.Order, want []string) {
	t.Helper()
	var got []string
	for _, h := range o.History {
		got = append(got, h.Status)
	}
	i := 0
	for _, st := range got {
		if i < len(want) && st == want[i] {
			i++
		}
	}
	if i < len(want) || got[len(got)-1] != want[len(want)-1] {
		t.Fatalf("order %s went through %v; want %v in this order, ending %s", o.ID, got, want, want[len(want)-1])
	}
}

// checkOneSigningAndBroadcast checks, from the order's events, that its one leg was asked
// to be signed once and broadcast once: nothing was signed again, replaced or resent.
func (s *suite) checkOneSigningAndBroadcast(t *testing.T, domain client.Domain, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	count := map[string]int{}
	for ev, err := range s.readers[domain.App()].Events(ctx, client.EventFilter{OrderID: id}) {
		if err != nil {
			t.Fatal(err)
		}
		count[ev.Event]++
	}
	if count[events.WalletSigningRequested] != 1 || count[events.OrderBroadcast] != 1 {
		t.Errorf("order %s: %d %s and %d %s events, want one of each", id, count[events.WalletSigningRequested],
			events.WalletSigningRequested, count[events.OrderBroadcast], events.OrderBroadcast)
	}
}

// nonceOf is the nonce the order's signing request gave its leg's transaction.
func (s *suite) nonceOf(t *testing.T, domain client.Domain, o *client.Order) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := s.readers[domain.App()].GetSigningRequest(ctx, *o.Legs[0].SigningRequestID)
	if err != nil {
		t.Fatal(err)
	}
	var tx struct {
		Nonce uint64 `json:"nonce"`
	}
	if err := json.Unmarshal([]byte(req.UnsignedTx), &tx); err != nil {
		t.Fatal(err)
	}
	return tx.Nonce
}
