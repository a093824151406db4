package gethe2e

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/shopspring/decimal"
	enumspb "go.temporal.io/api/enums/v1"
	temporalclient "go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"encoding/json"
	"github.com/ethereum/go-ethereum"
	"github.com/opentreasury/treasury/client"
	"github.com/opentreasury/treasury/dev/cluster"
	"github.com/opentreasury/treasury/dev/wait"
	"github.com/opentreasury/treasury/internal/orders"
)

// Destinations on the seeded payment policy's whitelist (SPEC 10): ordinary addresses, not
// precompiles; 0x…dEaD is the documented failure (the dev token refuses transfers to it).
var (
	dest1 = common.HexToAddress("0x1111111111111111111111111111111111111111")
	dest2 = common.HexToAddress("0x2222222222222222222222222222222222222222")
	dead  = common.HexToAddress("0x000000000000000000000000000000000000dEaD")
)

func payment(w string, asset, amount string, to common.Address) client.PaymentRequest {
	return client.PaymentRequest{WalletID: w, Asset: asset, Amount: amount, Destination: client.Destination{Address: to.Hex()}}
}

// A payment of ETH and one of USDC go through the lifecycle to confirmed on geth: each is
// one transaction from the wallet, at least two blocks deep when confirmed; the ETH one
// carries the exact value to the destination, the USDC one's receipt logs a Transfer of the
// exact amount; the balances on the node move by exactly that (and the gas, for ETH); and
// the service's positions, read back from the chain, come to the node's figures.
func TestPaymentsOfETHAndOfUSDCConfirmOnGeth(t *testing.T) {
	s := env(t)
	wallet := common.HexToAddress(s.payer.Address)
	usdc := s.token(t, "USDC")
	ethAmount, usdcAmount := s.units(t, "ETH", "1.5"), s.units(t, "USDC", "1234.56")
	before := map[string]*big.Int{
		"wallet ETH": s.balance(t, "ETH", wallet), "wallet USDC": s.balance(t, "USDC", wallet),
		"dest1 ETH": s.balance(t, "ETH", dest1), "dest2 USDC": s.balance(t, "USDC", dest2),
	}
	ethID := s.place(t, client.DomainPayment, payment(s.payer.ID, "ETH", "1.5", dest1))
	usdcID := s.place(t, client.DomainPayment, payment(s.payer.ID, "USDC", "1234.56", dest2))
	done := s.waitEnded(t, client.DomainPayment, []string{ethID, usdcID}, 3*time.Minute)

	ethTx := s.checkConfirmed(t, done[ethID], wallet)
	if to := ethTx.tx.To(); to == nil || *to != dest1 || ethTx.tx.Value().Cmp(ethAmount) != 0 || len(ethTx.tx.Data()) != 0 {
		t.Errorf("the ETH payment sent %s wei to %v with %d bytes of data; want %s wei to %s, no data",
			ethTx.tx.Value(), ethTx.tx.To(), len(ethTx.tx.Data()), ethAmount, dest1)
	}
	usdcTx := s.checkConfirmed(t, done[usdcID], wallet)
	if to := usdcTx.tx.To(); to == nil || *to != usdc.Address || usdcTx.tx.Value().Sign() != 0 {
		t.Errorf("the USDC payment called %v with %s wei; want the token %s, no value", usdcTx.tx.To(), usdcTx.tx.Value(), usdc.Address)
	}
	want := erc20Transfer{token: usdc.Address, from: wallet, to: dest2, amount: usdcAmount}
	if got := transfersIn(usdcTx.receipt); len(got) != 1 || !hasTransfer(usdcTx.receipt, want) {
		t.Errorf("the USDC payment's receipt logs %+v; want one Transfer of %s units from %s to %s", got, usdcAmount, wallet, dest2)
	}
	for _, id := range []string{ethID, usdcID} {
		s.checkOneSigningAndBroadcast(t, client.DomainPayment, id)
	}

	gas := new(big.Int).Add(ethTx.fee(), usdcTx.fee())
	after := map[string]*big.Int{
		"wallet ETH":  new(big.Int).Sub(new(big.Int).Sub(before["wallet ETH"], ethAmount), gas),
		"wallet USDC": new(big.Int).Sub(before["wallet USDC"], usdcAmount),
		"dest1 ETH":   new(big.Int).Add(before["dest1 ETH"], ethAmount),
		"dest2 USDC":  new(big.Int).Add(before["dest2 USDC"], usdcAmount),
	}
	for name, got := range map[string]*big.Int{
		"wallet ETH": s.balance(t, "ETH", wallet), "wallet USDC": s.balance(t, "USDC", wallet),
		"dest1 ETH": s.balance(t, "ETH", dest1), "dest2 USDC": s.balance(t, "USDC", dest2),
	} {
		if got.Cmp(after[name]) != 0 {
			t.Errorf("%s on geth is %s, want %s (before %s)", name, got, after[name], before[name])
		}
	}
	s.waitPositions(t, s.payer.ID, map[string]decimal.Decimal{
		"ETH":  decimal.NewFromBigInt(after["wallet ETH"], -18),
		"USDC": decimal.NewFromBigInt(after["wallet USDC"], -usdc.Decimals),
	}, 2*time.Minute)
}

// waitPositions waits until the service's positions of the wallet (GET /treasury/positions,
// refreshed from the chain by the balance sync) read exactly these amounts.
func (s *suite) waitPositions(t *testing.T, walletID string, want map[string]decimal.Decimal, timeout time.Duration) {
	t.Helper()
	var got map[string]decimal.Decimal
	same := false
	defer func() { // what the service said last, should it never agree with the node
		if !same {
			t.Logf("the service's positions of %s: %v", walletID, got)
		}
	}()
	wait.For(t, timeout, fmt.Sprintf("the service's positions of %s to read the node's %v", walletID, want), func() bool {
		got = map[string]decimal.Decimal{}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for p, err := range s.readers["treasury"].Positions(ctx, client.ListOptions{Limit: 200}) {
			if err != nil {
				t.Fatal(err)
			}
			if p.WalletID == walletID {
				got[p.Asset] = decimal.RequireFromString(p.Amount)
			}
		}
		same = true
		for asset, amount := range want {
			same = same && got[asset].Equal(amount)
		}
		return same
	})
}

// A USDC transfer to 0x…dEaD reverts on chain: the order ends failed with tx_reverted and
// the token's reason, its transaction is mined with status 0, and no USDC moved.
func TestATransferThatRevertsEndsFailedWithTheReason(t *testing.T) {
	s := env(t)
	wallet := common.HexToAddress(s.payer.Address)
	held := s.balance(t, "USDC", wallet)
	id := s.place(t, client.DomainPayment, payment(s.payer.ID, "USDC", "5", dead))
	o := s.waitEnded(t, client.DomainPayment, []string{id}, 3*time.Minute)[id].order
	if o.Status != "failed" || o.Failure == nil || o.Failure.Code != "tx_reverted" {
		t.Fatalf("order %s is %s with failure %+v; want failed, tx_reverted", o.ID, o.Status, o.Failure)
	}
	const reason = "DevToken: transfers to 0x...dEaD always revert"
	if !strings.Contains(o.Failure.Message, reason) {
		t.Errorf("the failure says %q; want the revert reason %q", o.Failure.Message, reason)
	}
	checkHistory(t, o, append(slices.Clone(lifecycle), "failed"))
	if len(o.Legs) != 1 || o.Legs[0].TxHash == nil {
		t.Fatalf("legs %+v: the reverted transaction's hash is missing", o.Legs)
	}
	m := s.lookup(t, *o.Legs[0].TxHash)
	if m.receipt.Status != types.ReceiptStatusFailed || m.from != wallet {
		t.Errorf("transaction %s: status %d from %s; want a revert (0) from %s", m.tx.Hash(), m.receipt.Status, m.from, wallet)
	}
	if len(m.receipt.Logs) != 0 {
		t.Errorf("the reverted transaction logged %d events", len(m.receipt.Logs))
	}
	if got := s.balance(t, "USDC", wallet); got.Cmp(held) != 0 {
		t.Errorf("the wallet's USDC went from %s to %s on a reverted transfer", held, got)
	}
}

// Fifty payments submitted at once from one wallet that never sent a transaction all
// confirm: their transactions carry nonces 0 to 49, one each, with no gap; each order was
// signed and broadcast once (no replacement); the node counts exactly fifty transactions
// from the wallet; and the destination got exactly fifty times the amount.
func TestFiftyPaymentsFromOneWalletTakeNoncesZeroToFortyNine(t *testing.T) {
	s := env(t)
	const n = 50
	wallet := common.HexToAddress(s.fresh.Address)
	if got := s.nonce(t, wallet); got != 0 {
		t.Fatalf("the wallet has sent %d transactions before the test", got)
	}
	received := s.balance(t, "USDC", dest2)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = s.create(t, client.DomainPayment, payment(s.fresh.ID, "USDC", "1.25", dest2))
	}
	s.submitAll(t, client.DomainPayment, ids)
	done := s.waitEnded(t, client.DomainPayment, ids, 6*time.Minute)

	nonces := make([]uint64, 0, n)
	hashes := map[common.Hash]bool{}
	for _, id := range ids {
		m := s.checkConfirmed(t, done[id], wallet)
		if asked := s.nonceOf(t, client.DomainPayment, done[id].order); asked != m.tx.Nonce() {
			t.Errorf("order %s: its signing request named nonce %d, the mined transaction has %d", id, asked, m.tx.Nonce())
		}
		nonces = append(nonces, m.tx.Nonce())
		hashes[m.tx.Hash()] = true
		s.checkOneSigningAndBroadcast(t, client.DomainPayment, id)
	}
	slices.Sort(nonces)
	for i, got := range nonces {
		if got != uint64(i) {
			t.Fatalf("nonces %v; want 0..%d, each once", nonces, n-1)
		}
	}
	if len(hashes) != n {
		t.Errorf("%d distinct transactions for %d payments", len(hashes), n)
	}
	if got := s.nonce(t, wallet); got != n {
		t.Errorf("geth counts %d transactions from the wallet; want %d", got, n)
	}
	want := new(big.Int).Add(received, new(big.Int).Mul(big.NewInt(n), s.units(t, "USDC", "1.25")))
	if got := s.balance(t, "USDC", dest2); got.Cmp(want) != 0 {
		t.Errorf("the destination holds %s USDC units, want %s", got, want)
	}
}

// A worker killed between a broadcast and its commit sends no second transaction. The
// workers reach geth through the test's proxy, which, armed, lets a transaction reach geth
// and then kills both workers (it cannot tell which one sent it) before they hear geth's
// answer; the cluster starts them again half a second later and the proxy is armed again
// two seconds after, while payments submitted one after another from one wallet are
// signed, broadcast and confirmed. Every order still confirms, each with its own
// transaction on chain; every broadcast step a kill cut short ran again (the orders'
// Temporal histories say so); and the wallet's transaction count on geth rises by exactly
// the number of orders: no retry took a second nonce or sent another transaction.
func TestAWorkerKilledBetweenBroadcastAndCommitSendsNoSecondTransaction(t *testing.T) {
	s := env(t)
	const n, most = 16, 4
	wallet := common.HexToAddress(s.payer.Address)
	sent := s.nonce(t, wallet)
	ids := make([]string, n)
	for i := range ids {
		asset, amount := "USDC", "2.5"
		if i%2 == 1 {
			asset, amount = "ETH", "0.001"
		}
		ids[i] = s.create(t, client.DomainPayment, payment(s.payer.ID, asset, amount, dest1))
	}
	done, kills := s.payUnderKills(t, s.proxy, ids, most)

	hashes := map[common.Hash]bool{}
	var nonces []uint64
	for _, id := range ids {
		m := s.checkConfirmed(t, done[id], wallet)
		hashes[m.tx.Hash()] = true
		nonces = append(nonces, m.tx.Nonce())
		s.checkOneSigningAndBroadcast(t, client.DomainPayment, id)
	}
	slices.Sort(nonces)
	for i, got := range nonces {
		if got != sent+uint64(i) {
			t.Fatalf("nonces %v; want %d..%d, each once", nonces, sent, sent+n-1)
		}
	}
	if len(hashes) != n {
		t.Errorf("%d distinct transactions for %d payments", len(hashes), n)
	}
	if got := s.nonce(t, wallet); got != sent+n {
		t.Errorf("geth counts %d transactions from the wallet, %d before %d payments: %d more than one each",
			got, sent, n, int64(got)-int64(sent+n))
	}
	retried := s.checkRetried(t, done, kills)
	t.Logf("%d payments confirmed; the workers were killed %d times between a broadcast and its commit, %d broadcast steps ran again; %d transactions from the wallet, one each",
		n, kills, retried, s.nonce(t, wallet)-sent)
}

// payUnderKills submits the drafts one after another while the workers are killed between
// a broadcast through proxy and its commit (killAfterSends), and waits for every order to
// end. It returns the orders at their end and how many times the workers were killed.
func (s *suite) payUnderKills(t *testing.T, proxy *rpcProxy, ids []string, most int) (map[string]ended, int) {
	t.Helper()
	stopKilling := s.killAfterSends(proxy, most)
	defer stopKilling()
	// One after another, so that transactions are still being sent when the proxy is
	// armed again.
	for _, id := range ids {
		s.submit(t, client.DomainPayment, id)
		time.Sleep(500 * time.Millisecond) // the pacing is the point: no state to wait for
	}
	done := s.waitEnded(t, client.DomainPayment, ids, 8*time.Minute)
	kills, err := stopKilling()
	if err != nil {
		t.Errorf("kill: %v", err)
	}
	if kills == 0 {
		t.Fatal("no transaction went through the armed proxy: no worker was killed")
	}
	return done, kills
}

// checkRetried checks that every broadcast step a kill cut short ran again, from the
// orders' Temporal histories, and returns how many did.
func (s *suite) checkRetried(t *testing.T, done map[string]ended, kills int) int {
	t.Helper()
	workflowIDs := make([]string, 0, len(done))
	for _, e := range done {
		workflowIDs = append(workflowIDs, e.order.WorkflowID)
	}
	retried := s.retriedBroadcasts(t, workflowIDs)
	if retried < kills {
		t.Errorf("%d kills between a broadcast and its commit, yet only %d broadcast steps ran again", kills, retried)
	}
	return retried
}

// killAfterSends arms a proxy: the next transaction that reaches its node through it kills
// both workers before its sender hears back, up to most times, re-armed 2 s after each. The
// function it returns disarms the proxy and says how many times it killed.
func (s *suite) killAfterSends(proxy *rpcProxy, most int) (stop func() (kills int, err error)) {
	var (
		mu      sync.Mutex
		kills   int
		errs    []error
		stopped bool
		hook    func()
	)
	hook = func() {
		for i := 1; i <= 2; i++ {
			if err := s.cluster.Kill(cluster.Worker(i)); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if kills++; kills < most && !stopped {
			time.AfterFunc(2*time.Second, func() {
				mu.Lock()
				defer mu.Unlock()
				if !stopped {
					proxy.arm(hook)
				}
			})
		}
	}
	proxy.arm(hook)
	return func() (int, error) {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		proxy.arm(nil)
		return kills, errors.Join(errs...)
	}
}

// retriedBroadcasts counts, in the orders' Temporal histories (the operator's view, not the
// integrator's), the broadcast steps that completed only at a second or later attempt: a
// worker died while running them.
func (s *suite) retriedBroadcasts(t *testing.T, workflowIDs []string) int {
	t.Helper()
	c, err := temporalclient.Dial(temporalclient.Options{HostPort: s.cluster.TemporalAddr, Namespace: "default",
		Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	retried := 0
	for _, id := range workflowIDs {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		broadcasts := map[int64]bool{} // scheduled event ids of BroadcastLeg
		it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				cancel()
				t.Fatal(err)
			}
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == orders.StepBroadcast.Activity {
				broadcasts[ev.GetEventId()] = true
			}
			if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && broadcasts[a.GetScheduledEventId()] && a.GetAttempt() > 1 {
				retried++
			}
		}
		cancel()
	}
	return retried
}

// A trade (ETH for USDC on the dev swap router), an earn deposit (USDC into the aave vault)
// and a borrow draw (USDC from the aave pool) reach confirmed on geth, each one transaction
// whose receipt logs the USDC it moved, and the wallet's balances on the node move by
// exactly that.
func TestATradeAnEarnDepositAndABorrowDrawConfirmOnGeth(t *testing.T) {
	s := env(t)
	wallet := common.HexToAddress(s.payer.Address)
	usdc := s.token(t, "USDC")
	router, vault, pool := s.chain.SwapRouter.Address, s.chain.Vaults["aave"]["USDC"], s.chain.Pools["aave"].Address
	ethBefore, usdcBefore := s.balance(t, "ETH", wallet), s.balance(t, "USDC", wallet)
	placed := []struct {
		domain client.Domain
		id     string
		moved  erc20Transfer
	}{
		{client.DomainTrade, s.place(t, client.DomainTrade, client.TradeRequest{WalletID: s.payer.ID, SellAsset: "ETH",
			BuyAsset: "USDC", SellAmount: "0.01", MaxSlippageBps: 50}),
			// 0.01 ETH at 3000 USD for USDC at 1 USD, at the router's fixed prices.
			erc20Transfer{token: usdc.Address, from: router, to: wallet, amount: s.units(t, "USDC", "30")}},
		{client.DomainEarn, s.place(t, client.DomainEarn, client.EarnRequest{WalletID: s.payer.ID, Protocol: "aave",
			Action: client.EarnDeposit, Asset: "USDC", Amount: "10"}),
			erc20Transfer{token: usdc.Address, from: wallet, to: vault, amount: s.units(t, "USDC", "10")}},
		{client.DomainBorrow, s.place(t, client.DomainBorrow, client.BorrowRequest{WalletID: s.payer.ID, Protocol: "aave",
			Action: client.BorrowDraw, Asset: "USDC", Amount: "10"}),
			erc20Transfer{token: usdc.Address, from: pool, to: wallet, amount: s.units(t, "USDC", "10")}},
	}
	gas := new(big.Int)
	sold := s.units(t, "ETH", "0.01")
	for _, p := range placed {
		e := s.waitEnded(t, p.domain, []string{p.id}, 3*time.Minute)[p.id]
		m := s.checkConfirmed(t, e, wallet)
		if !hasTransfer(m.receipt, p.moved) {
			t.Errorf("the %s's receipt logs %+v; want a Transfer of %s USDC units from %s to %s", p.domain,
				transfersIn(m.receipt), p.moved.amount, p.moved.from, p.moved.to)
		}
		if p.domain == client.DomainTrade && m.tx.Value().Cmp(sold) != 0 {
			t.Errorf("the trade sent %s wei to the router, want %s", m.tx.Value(), sold)
		}
		gas.Add(gas, m.fee())
	}
	wantETH := new(big.Int).Sub(new(big.Int).Sub(ethBefore, sold), gas)
	wantUSDC := new(big.Int).Add(usdcBefore, s.units(t, "USDC", "30")) // +30 bought, -10 deposited, +10 drawn
	if got := s.balance(t, "ETH", wallet); got.Cmp(wantETH) != 0 {
		t.Errorf("the wallet holds %s wei, want %s", got, wantETH)
	}
	if got := s.balance(t, "USDC", wallet); got.Cmp(wantUSDC) != 0 {
		t.Errorf("the wallet holds %s USDC units, want %s", got, wantUSDC)
	}
}

// A payment whose transaction was priced below the base fee (the node it was prepared
// through understated the market) sits in geth's pool unmined; after REPLACE_STUCK_AFTER
// the worker has it replaced at the same nonce for a fee the chain takes, the dev signer
// signs again, and the order confirms on the replacement. Only the replacement is mined,
// the wallet's transaction count rises by one, and the order names both transactions.
func TestATransactionPricedBelowTheBaseFeeIsReplaced(t *testing.T) {
	s := env(t)
	wallet := common.HexToAddress(s.payer.Address)
	sent := s.nonce(t, wallet)
	s.proxy.understate()
	id := s.place(t, client.DomainPayment, payment(s.payer.ID, "USDC", "3.5", dest1))
	e := s.waitEnded(t, client.DomainPayment, []string{id}, 3*time.Minute)[id]
	replacement := s.checkConfirmed(t, e, wallet)
	leg := e.order.Legs[0]
	if len(leg.ReplacedTxHashes) != 1 || leg.ReplacedTxHashes[0] == *leg.TxHash {
		t.Fatalf("the leg %+v: want its confirmed transaction and the one it replaced", leg)
	}
	stuck := common.HexToHash(leg.ReplacedTxHashes[0])
	if _, err := s.eth.TransactionReceipt(rpcContext(t), stuck); !errors.Is(err, ethereum.NotFound) {
		t.Fatalf("the replaced transaction %s has a receipt (%v): it was mined", stuck, err)
	}
	if got := s.nonce(t, wallet); got != sent+1 {
		t.Fatalf("the wallet sent %d transactions, want 1 (the replacement only)", got-sent)
	}
	if replacement.tx.Nonce() != sent {
		t.Fatalf("the replacement has nonce %d, want the stuck one's %d", replacement.tx.Nonce(), sent)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var broadcasts []string
	for ev, err := range s.readers["pay"].Events(ctx, client.EventFilter{OrderID: id}) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Event == "Order.Broadcast" {
			var data struct {
				TxHash         string `json:"txHash"`
				ReplacesTxHash string `json:"replacesTxHash"`
			}
			_ = json.Unmarshal(ev.Data, &data)
			broadcasts = append(broadcasts, data.TxHash+" replaces "+data.ReplacesTxHash)
		}
	}
	want := []string{stuck.Hex() + " replaces ", *leg.TxHash + " replaces " + stuck.Hex()}
	if !slices.Equal(lower(broadcasts), lower(want)) {
		t.Fatalf("Order.Broadcast events %v, want %v", broadcasts, want)
	}
}

func lower(in []string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = strings.ToLower(s)
	}
	return out
}
