package gethe2e

import (
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mr-tron/base58"
	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/client"
	"github.com/opentreasury/treasury/dev/devsvm"
	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/dev/wait"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/keys"
)

// solanaPayment is a payment from a wallet, placed (created and submitted) by the client.
func solanaPayment(walletID, asset, amount, payee string) client.PaymentRequest {
	return client.PaymentRequest{WalletID: walletID, Asset: asset, Amount: amount, Destination: client.Destination{Address: payee}}
}

// solanaFee is the fee the SVM charged a transaction, read from the chain.
func (s *suite) solanaFee(t *testing.T, signature string) decimal.Decimal {
	t.Helper()
	lamports, err := s.svm.Fee(rpcContext(t), signature)
	if err != nil {
		t.Fatalf("the fee of %s: %v", signature, err)
	}
	return decimal.NewFromUint64(lamports).Shift(-9)
}

// Payments on the SVM as a process of its own, through the public API with the Go client
// and read back from the node: exact moves and fees, the frozen account's failure, fifty
// at once from one wallet, a tampered signature refused, and a signature held past its
// blockhash's life.
func TestSolanaPaymentsAgainstTheSVM(t *testing.T) {
	s := env(t)
	payer := s.solPayer.Address

	t.Run("SOL and USDC, each moved exactly, the fees (and a new token account's rent) paid by the wallet", func(t *testing.T) {
		payee := seed.SolanaPayees[0]
		var accounts struct{ Value []any }
		if err := s.svm.Call(rpcContext(t), "getTokenAccountsByOwner", []any{payee, map[string]string{"mint": s.svmInfo.USDCMint},
			map[string]string{"encoding": "jsonParsed"}}, &accounts); err != nil {
			t.Fatal(err)
		}
		walletBefore, payeeBefore := s.solanaBalances(t, payer), s.solanaBalances(t, payee)
		solID := s.place(t, client.DomainPayment, solanaPayment(s.solPayer.ID, "SOL", "1.25", payee))
		usdcID := s.place(t, client.DomainPayment, solanaPayment(s.solPayer.ID, "USDC", "3.141592", payee))
		done := s.waitEnded(t, client.DomainPayment, []string{solID, usdcID}, 2*time.Minute)
		fees := decimal.Zero
		for _, id := range []string{solID, usdcID} {
			o := done[id].order
			if o.Status != "confirmed" || o.Legs[0].TxHash == nil {
				t.Fatalf("order %s is %s (%+v)", id, o.Status, o.Failure)
			}
			fees = fees.Add(s.solanaFee(t, *o.Legs[0].TxHash))
		}
		// The payee's token account is made by the payment, its rent paid by the wallet,
		// unless it was there before.
		var rent uint64
		if len(accounts.Value) == 0 {
			if err := s.svm.Call(rpcContext(t), "getMinimumBalanceForRentExemption", []any{165}, &rent); err != nil {
				t.Fatal(err)
			}
		}
		got := s.solanaBalances(t, payee)
		if !got["SOL"].Sub(payeeBefore["SOL"]).Equal(decimal.RequireFromString("1.25")) ||
			!got["USDC"].Sub(payeeBefore["USDC"]).Equal(decimal.RequireFromString("3.141592")) {
			t.Fatalf("the payee holds %v, held %v: want 1.25 SOL and 3.141592 USDC more", got, payeeBefore)
		}
		walletAfter := s.solanaBalances(t, payer)
		wantSOL := walletBefore["SOL"].Sub(decimal.RequireFromString("1.25")).Sub(fees).Sub(decimal.NewFromUint64(rent).Shift(-9))
		if !walletAfter["SOL"].Equal(wantSOL) || !walletAfter["USDC"].Equal(walletBefore["USDC"].Sub(decimal.RequireFromString("3.141592"))) {
			t.Fatalf("the wallet holds %v, want %s SOL (fees %s, rent %d lamports) and %s USDC", walletAfter, wantSOL, fees, rent,
				walletBefore["USDC"].Sub(decimal.RequireFromString("3.141592")))
		}
	})

	t.Run("USDC to the frozen account fails with the token program's error", func(t *testing.T) {
		before := s.solanaBalances(t, payer)
		id := s.place(t, client.DomainPayment, solanaPayment(s.solPayer.ID, "USDC", "5", devsvm.FrozenOwner))
		o := s.waitEnded(t, client.DomainPayment, []string{id}, 2*time.Minute)[id].order
		if o.Status != "failed" || o.Failure == nil || o.Failure.Code != "tx_reverted" || !strings.Contains(o.Failure.Message, "frozen") {
			t.Fatalf("order %s is %s, failure %+v: want failed, tx_reverted, frozen", id, o.Status, o.Failure)
		}
		if after := s.solanaBalances(t, payer); !after["USDC"].Equal(before["USDC"]) {
			t.Fatalf("the wallet holds %s USDC after a failed transfer, held %s", after["USDC"], before["USDC"])
		}
	})

	t.Run("fifty at once from one wallet, one transaction each", func(t *testing.T) {
		const n = 50
		payee := seed.SolanaPayees[1]
		walletBefore, payeeBefore := s.solanaBalances(t, payer), s.solanaBalances(t, payee)
		ids := make([]string, n)
		total := decimal.Zero
		for i := range ids {
			amount := decimal.New(int64(1_000_000+i), -6)
			total = total.Add(amount)
			ids[i] = s.create(t, client.DomainPayment, solanaPayment(s.solPayer.ID, "USDC", amount.String(), payee))
		}
		s.submitAll(t, client.DomainPayment, ids)
		done := s.waitEnded(t, client.DomainPayment, ids, 3*time.Minute)
		hashes := map[string]bool{}
		for _, id := range ids {
			o := done[id].order
			if o.Status != "confirmed" || o.Legs[0].TxHash == nil {
				t.Fatalf("order %s is %s (%+v)", id, o.Status, o.Failure)
			}
			hashes[*o.Legs[0].TxHash] = true
			s.checkOneSigningAndBroadcast(t, client.DomainPayment, id)
		}
		if len(hashes) != n {
			t.Fatalf("%d distinct transactions for %d payments", len(hashes), n)
		}
		if got := s.solanaBalances(t, payee)["USDC"].Sub(payeeBefore["USDC"]); !got.Equal(total) {
			t.Fatalf("the payee received %s USDC, the orders sent %s", got, total)
		}
		if got := walletBefore["USDC"].Sub(s.solanaBalances(t, payer)["USDC"]); !got.Equal(total) {
			t.Fatalf("the wallet sent %s USDC, the orders %s", got, total)
		}
	})

	t.Run("the manual wallet: a tampered message refused, then signed past its blockhash's life", func(t *testing.T) {
		var manual seed.Wallet
		for _, w := range s.cluster.Credentials.Wallets {
			if w.Chain == "solana" && !w.AutoSign {
				manual = w
			}
		}
		key, err := keys.Parse(manual.Scheme, manual.PrivateKey)
		if err != nil {
			t.Fatalf("the manual Solana wallet's key in credentials.json: %v", err)
		}
		signer, err := client.New(s.cluster.APIURLs[0], client.WithToken(s.cluster.Credentials.Keys["pay"].Sign))
		if err != nil {
			t.Fatal(err)
		}
		payee := seed.SolanaPayees[0]
		payeeBefore := s.solanaBalances(t, payee)
		id := s.place(t, client.DomainPayment, solanaPayment(manual.ID, "USDC", "7.25", payee))
		first := s.pendingRequest(t, id, "")

		// A signature over other bytes than the message is refused, and the order waits on.
		raw, err := hex.DecodeString(first.RawUnsignedTx)
		if err != nil {
			t.Fatal(err)
		}
		raw[len(raw)-1] ^= 0xff
		tampered, err := key.Sign(raw)
		if err != nil {
			t.Fatal(err)
		}
		var problem *client.Problem
		if _, err := signer.SubmitSignature(rpcContext(t), first.ID, tampered); !errors.As(err, &problem) || problem.Status != 422 {
			t.Fatalf("a signature over a tampered message: %v, want 422", err)
		}
		if o := s.order(t, id); o.Status != "pending_signature" {
			t.Fatalf("after the refused signature the order is %s, want pending_signature", o.Status)
		}

		// Held while 200 slots pass, its blockhash (150 slots of life) dead at the finalized
		// block too, the request is signed: the transaction lapses and is built again.
		if err := s.svm.AdvanceSlots(rpcContext(t), 200); err != nil {
			t.Fatal(err)
		}
		sig, err := client.SignRequest(*first, key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := signer.SubmitSignature(rpcContext(t), first.ID, sig); err != nil {
			t.Fatalf("the late signature: %v", err)
		}
		lapsed := base58.Encode(sig)
		again := s.pendingRequest(t, id, first.ID)
		if again.ReplacesTxHash == nil || *again.ReplacesTxHash != lapsed {
			t.Fatalf("the new request replaces %v, want the lapsed %s", again.ReplacesTxHash, lapsed)
		}
		sig, err = client.SignRequest(*again, key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := signer.SubmitSignature(rpcContext(t), again.ID, sig); err != nil {
			t.Fatal(err)
		}
		o := s.waitEnded(t, client.DomainPayment, []string{id}, 2*time.Minute)[id].order
		if o.Status != "confirmed" || o.Legs[0].TxHash == nil || *o.Legs[0].TxHash == lapsed {
			t.Fatalf("order %s is %s on %v: want confirmed on the new transaction", id, o.Status, o.Legs[0].TxHash)
		}
		if st, err := s.sol.Status(rpcContext(t), "solana", lapsed); err != nil || st.State != chain.TxPending {
			t.Fatalf("the lapsed transaction on the SVM: %+v %v; want never landed", st, err)
		}
		if got := s.solanaBalances(t, payee)["USDC"].Sub(payeeBefore["USDC"]); !got.Equal(decimal.RequireFromString("7.25")) {
			t.Fatalf("the payee received %s USDC, want 7.25: paid once", got)
		}
	})
}

// pendingRequest waits for the payment's leg to wait on a pending signing request other
// than not, and returns it.
func (s *suite) pendingRequest(t *testing.T, id, not string) *client.SigningRequest {
	t.Helper()
	var req *client.SigningRequest
	wait.For(t, time.Minute, "a pending signing request for "+id, func() bool {
		o := s.order(t, id)
		if len(o.Legs) != 1 || o.Legs[0].SigningRequestID == nil || *o.Legs[0].SigningRequestID == not {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		got, err := s.readers["pay"].GetSigningRequest(ctx, *o.Legs[0].SigningRequestID)
		if err != nil {
			t.Fatal(err)
		}
		req = got
		return got.Status == "pending"
	})
	return req
}

// order reads a payment.
func (s *suite) order(t *testing.T, id string) *client.Order {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o, err := s.readers["pay"].GetOrder(ctx, client.DomainPayment, id)
	if err != nil {
		t.Fatal(err)
	}
	return o
}
