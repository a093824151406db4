package gethe2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/client"
	"github.com/opentreasury/treasury/dev/devsvm"
	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/internal/chain"
)

// solanaPayments creates n payments from the Solana payer to payee, USDC and SOL in turn,
// and returns their ids and what each asset should move in all.
func (s *suite) solanaPayments(t *testing.T, n int, payee string) (ids []string, total map[string]decimal.Decimal) {
	t.Helper()
	total = map[string]decimal.Decimal{}
	for i := range n {
		asset, amount := "USDC", decimal.New(int64(2_500_000+i), -6)
		if i%2 == 1 {
			asset, amount = "SOL", decimal.New(int64(1_000_000+i), -9)
		}
		total[asset] = total[asset].Add(amount)
		ids = append(ids, s.create(t, client.DomainPayment, solanaPayment(s.solPayer.ID, asset, amount.String(), payee)))
	}
	return ids, total
}

// solanaBalances reads an address's SOL and USDC on the SVM, straight from the node.
func (s *suite) solanaBalances(t *testing.T, address string) map[string]decimal.Decimal {
	t.Helper()
	b, err := s.sol.Balances(rpcContext(t), "solana", address)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkSolanaPaidOnce checks that every order confirmed, each on a transaction of its own
// that the SVM holds as succeeded, signed and broadcast once by its events, and that the
// payee received exactly the orders' amounts: no payment was sent twice.
func (s *suite) checkSolanaPaidOnce(t *testing.T, ids []string, done map[string]ended, payee string, before, total map[string]decimal.Decimal) {
	t.Helper()
	seen := map[string]bool{}
	for _, id := range ids {
		o := done[id].order
		if o.Status != "confirmed" || len(o.Legs) != 1 || o.Legs[0].TxHash == nil {
			t.Fatalf("order %s is %s (%+v), legs %+v: want confirmed with its transaction", id, o.Status, o.Failure, o.Legs)
		}
		checkHistory(t, o, append(slices.Clone(lifecycle), "confirmed"))
		hash := *o.Legs[0].TxHash
		if st, err := s.sol.Status(rpcContext(t), "solana", hash); err != nil || st.State != chain.TxConfirmed {
			t.Fatalf("order %s: its transaction %s on the SVM: %+v %v", id, hash, st, err)
		}
		seen[hash] = true
		s.checkOneSigningAndBroadcast(t, client.DomainPayment, id)
	}
	if len(seen) != len(ids) {
		t.Errorf("%d distinct transactions for %d payments", len(seen), len(ids))
	}
	after := s.solanaBalances(t, payee)
	for asset, sent := range total {
		if got := after[asset].Sub(before[asset]); !got.Equal(sent) {
			t.Errorf("the payee received %s %s, the orders sent %s", got, asset, sent)
		}
	}
}

// A worker killed between a Solana broadcast and its commit sends nothing twice: the SVM's
// proxy kills both workers once a transaction reached the node, before its sender hears
// back, while payments from one wallet are submitted one after another. The retried
// broadcast finds its transaction on the chain by its signature; every order confirms on
// its own transaction, and the payee receives exactly what the orders sent.
func TestSolanaWorkerKilledBetweenBroadcastAndCommitSendsNothingTwice(t *testing.T) {
	s := env(t)
	const n, most = 10, 3
	payee := seed.SolanaPayees[0]
	before := s.solanaBalances(t, payee)
	ids, total := s.solanaPayments(t, n, payee)
	done, kills := s.payUnderKills(t, s.svmProxy, ids, most)
	s.checkSolanaPaidOnce(t, ids, done, payee, before, total)
	retried := s.checkRetried(t, done, kills)
	t.Logf("%d Solana payments confirmed; the workers were killed %d times between a broadcast and its commit, %d broadcast steps ran again",
		n, kills, retried)
}

// The SVM stopped and started again mid-run (its state saved and restored, on another
// port the proxy follows) leaves no order behind: payments in flight when it stops, and
// submitted while it is down, all confirm after it, each paid once.
func TestSolanaNodeRestartedMidRunLeavesNoOrderBehind(t *testing.T) {
	s := env(t)
	const n = 12
	payee := seed.SolanaPayees[1]
	before := s.solanaBalances(t, payee)
	ids, total := s.solanaPayments(t, n, payee)
	s.submitAll(t, client.DomainPayment, ids[:n/2])
	if err := s.svm.Stop(); err != nil {
		t.Fatalf("stopping the SVM: %v", err)
	}
	s.submitAll(t, client.DomainPayment, ids[n/2:])
	time.Sleep(2 * time.Second) // down for a while: the workers' calls fail meanwhile
	node, err := devsvm.Start(context.Background(), devsvm.Options{Dir: s.svmDir(), SlotTime: svmSlot})
	if err != nil {
		t.Fatalf("starting the SVM again: %v", err)
	}
	s.svm = node
	s.svmProxy.retarget(node.URL())
	if s.sol, err = s.readerOf(node); err != nil {
		t.Fatal(err)
	}
	done := s.waitEnded(t, client.DomainPayment, ids, 5*time.Minute)
	s.checkSolanaPaidOnce(t, ids, done, payee, before, total)
}
