package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mr-tron/base58"
	"github.com/shopspring/decimal"

	treasury "github.com/opentreasury/treasury/client"
	"github.com/opentreasury/treasury/dev/devstack"
	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/dev/wait"
	"github.com/opentreasury/treasury/internal/chain/keys"
)

// solanaNode reads the dev Solana chain over its own JSON-RPC, as an integrator's tools
// would, not through the service's adapter.
type solanaNode struct {
	t   *testing.T
	url string
}

func (n solanaNode) call(method string, params []any, out any) {
	n.t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequest("POST", n.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Result json.RawMessage `json:"result"`
		Error  *struct{ Message string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil || env.Error != nil {
		n.t.Fatalf("%s: %v %+v", method, err, env.Error)
	}
	if err := json.Unmarshal(env.Result, out); err != nil {
		n.t.Fatalf("%s: %v: %s", method, err, env.Result)
	}
}

// lamports is an address's SOL in lamports.
func (n solanaNode) lamports(address string) uint64 {
	var out struct{ Value uint64 }
	n.call("getBalance", []any{address, map[string]any{"commitment": "confirmed"}}, &out)
	return out.Value
}

// usdc is an owner's USDC over all its token accounts of the mint, in base units, and
// whether it has any.
func (n solanaNode) usdc(owner, mint string) (decimal.Decimal, bool) {
	var out struct {
		Value []struct {
			Account struct {
				Data struct {
					Parsed struct {
						Info struct {
							TokenAmount struct{ Amount string } `json:"tokenAmount"`
						} `json:"info"`
					} `json:"parsed"`
				} `json:"data"`
			} `json:"account"`
		} `json:"value"`
	}
	n.call("getTokenAccountsByOwner", []any{owner, map[string]any{"mint": mint}, map[string]any{"encoding": "jsonParsed", "commitment": "confirmed"}}, &out)
	total := decimal.Zero
	for _, a := range out.Value {
		total = total.Add(decimal.RequireFromString(a.Account.Data.Parsed.Info.TokenAmount.Amount))
	}
	return total, len(out.Value) > 0
}

// fee is what the chain charged a transaction, in lamports.
func (n solanaNode) fee(signature string) uint64 {
	var out struct {
		Meta struct{ Fee uint64 } `json:"meta"`
	}
	n.call("getTransaction", []any{signature, map[string]any{"encoding": "base64", "commitment": "confirmed"}}, &out)
	return out.Meta.Fee
}

func walletOn(c *seed.Credentials, chainName string, autoSign bool) seed.Wallet {
	for _, w := range c.Wallets {
		if w.Chain == chainName && w.AutoSign == autoSign {
			return w
		}
	}
	return seed.Wallet{}
}

// TestSolanaPaymentsOnSolanasOwnRuntime drives payments on the dev Solana chain (litesvm,
// a separate process) through the public API, and reads what moved over the chain's
// JSON-RPC: the manual wallet's lifecycle exactly as the EVM one's (create, submit,
// approve, sign with the key from credentials.json over the message, confirm), a refused
// tampered signature, a SOL payment by the dev signer, and the documented failure.
func TestSolanaPaymentsOnSolanasOwnRuntime(t *testing.T) {
	// Fifty payments at once go past the default burst.
	b := startBundle(t, t.TempDir(), "", func(o *devstack.Options) { o.RateLimit, o.RateBurst = 100000, 100000 })
	defer func() { _ = b.Shutdown() }()
	api := b.APIURL + "/api/v1"
	pay := b.Credentials.Keys["pay"]
	node := solanaNode{t: t, url: b.SolanaRPCURL()}
	var info struct {
		USDCMint string `json:"usdcMint"`
	}
	node.call("devsvm_info", []any{}, &info)

	t.Run("the manual wallet, signed with its key from credentials.json", func(t *testing.T) {
		manual := walletOn(b.Credentials, "solana", false)
		payee := seed.SolanaPayees[1]
		walletUSDC, _ := node.usdc(manual.Address, info.USDCMint)
		payeeUSDC, hadAccount := node.usdc(payee, info.USDCMint)
		walletSOL := node.lamports(manual.Address)

		r := send(t, "POST", api+"/payments", pay.SK, fmt.Sprintf(`{"walletId":%q,"asset":"USDC","amount":"15000","destination":{"address":%q}}`, manual.ID, payee))
		if r.status != 201 || r.body["chain"] != "solana" {
			t.Fatalf("create %d %s", r.status, r.raw)
		}
		id := r.body["id"].(string)
		if r := send(t, "POST", api+"/payments/"+id+"/submit", pay.SK, "{}"); r.status != 202 {
			t.Fatalf("submit %d %s", r.status, r.raw)
		}
		o := waitStatus(t, api+"/payments/"+id, pay.Read, "pending_approval")
		item := o["approval"].(map[string]any)["itemId"].(string)
		if r := send(t, "POST", api+"/approvals/payment/"+item+"/decide", pay.Approve, `{"decision":"APPROVE"}`); r.status != 202 {
			t.Fatalf("approve %d %s", r.status, r.raw)
		}
		o = waitStatus(t, api+"/payments/"+id, pay.Read, "pending_signature")
		reqID := o["legs"].([]any)[0].(map[string]any)["signingRequestId"].(string)
		got := call(t, "GET", api+"/signing-requests/"+reqID, pay.Sign)
		var request treasury.SigningRequest
		if err := json.Unmarshal(got.raw, &request); err != nil {
			t.Fatal(err)
		}
		raw, _ := hex.DecodeString(request.RawUnsignedTx)
		if request.Scheme != "ed25519" || !treasury.IsSolanaTransaction(request) || request.Message != base64.StdEncoding.EncodeToString(raw) {
			t.Fatalf("a Solana signing request carries its message (base64 of rawUnsignedTx): %s", got.raw)
		}
		key, err := keys.Parse(manual.Scheme, manual.PrivateKey)
		if err != nil || key.SolanaAddress() != manual.Address {
			t.Fatalf("the manual wallet's key from credentials.json does not make its address: %v", err)
		}
		sigURL := api + "/signing-requests/" + reqID + "/signature"

		// A signature over another message (a byte changed) is refused and changes nothing.
		tampered := append([]byte(nil), raw...)
		tampered[len(tampered)-1] ^= 1
		bad, _ := key.Sign(tampered)
		if r := send(t, "POST", sigURL, pay.Sign, fmt.Sprintf(`{"signature":%q}`, base64.StdEncoding.EncodeToString(bad))); r.status != 422 || r.body["code"] != "invalid_signature" {
			t.Fatalf("a signature over a tampered message: %d %s", r.status, r.raw)
		}
		if o := call(t, "GET", api+"/payments/"+id, pay.Read); o.body["status"] != "pending_signature" {
			t.Fatalf("after a refused signature the order is %v", o.body["status"])
		}

		signature, err := treasury.SignRequest(request, key)
		if err != nil {
			t.Fatal(err)
		}
		if r := send(t, "POST", sigURL, pay.Sign, fmt.Sprintf(`{"signature":%q}`, base64.StdEncoding.EncodeToString(signature))); r.status != 202 {
			t.Fatalf("sign %d %s", r.status, r.raw)
		}
		o = waitStatus(t, api+"/payments/"+id, pay.Read, "confirmed")
		txHash := o["legs"].([]any)[0].(map[string]any)["txHash"].(string)
		if txHash != base58.Encode(signature) {
			t.Fatalf("the leg's txHash %s is not the transaction's signature", txHash)
		}

		fifteenThousand := decimal.RequireFromString("15000000000") // base units
		if after, _ := node.usdc(manual.Address, info.USDCMint); !after.Equal(walletUSDC.Sub(fifteenThousand)) {
			t.Errorf("the wallet holds %s USDC base units, want %s", after, walletUSDC.Sub(fifteenThousand))
		}
		if after, _ := node.usdc(payee, info.USDCMint); !after.Equal(payeeUSDC.Add(fifteenThousand)) {
			t.Errorf("the payee holds %s USDC base units, want %s", after, payeeUSDC.Add(fifteenThousand))
		}
		// SOL pays the fee and, for a payee without a token account, its rent.
		spent := node.fee(txHash)
		if !hadAccount {
			var rent uint64
			node.call("getMinimumBalanceForRentExemption", []any{165}, &rent)
			spent += rent
		}
		if after := node.lamports(manual.Address); after != walletSOL-spent {
			t.Errorf("the wallet holds %d lamports, want %d (%d spent on fee and rent)", after, walletSOL-spent, spent)
		}
	})

	t.Run("SOL by the dev signer", func(t *testing.T) {
		auto := walletOn(b.Credentials, "solana", true)
		payee := seed.SolanaPayees[0]
		before := node.lamports(payee)
		r := send(t, "POST", api+"/payments", pay.SK, fmt.Sprintf(`{"walletId":%q,"asset":"SOL","amount":"2.5","destination":{"address":%q}}`, auto.ID, payee))
		id := r.body["id"].(string)
		if r := send(t, "POST", api+"/payments/"+id+"/submit", pay.SK, "{}"); r.status != 202 {
			t.Fatalf("submit %d %s", r.status, r.raw)
		}
		waitStatus(t, api+"/payments/"+id, pay.Read, "confirmed")
		if after := node.lamports(payee); after != before+2_500_000_000 {
			t.Fatalf("the payee holds %d lamports, want %d", after, before+2_500_000_000)
		}
	})

	t.Run("USDC to the frozen account fails with the token program's error", func(t *testing.T) {
		auto := walletOn(b.Credentials, "solana", true)
		before, _ := node.usdc(auto.Address, info.USDCMint)
		r := send(t, "POST", api+"/payments", pay.SK, fmt.Sprintf(`{"walletId":%q,"asset":"USDC","amount":"5","destination":{"address":%q}}`, auto.ID, b.Credentials.SolanaFailAddress))
		id := r.body["id"].(string)
		if r := send(t, "POST", api+"/payments/"+id+"/submit", pay.SK, "{}"); r.status != 202 {
			t.Fatalf("submit %d %s", r.status, r.raw)
		}
		o := waitStatus(t, api+"/payments/"+id, pay.Read, "failed")
		failure, _ := o["failure"].(map[string]any)
		if failure["code"] != "tx_reverted" || !strings.Contains(fmt.Sprint(failure["message"]), "frozen") {
			t.Fatalf("failure %v", failure)
		}
		if after, _ := node.usdc(auto.Address, info.USDCMint); !after.Equal(before) {
			t.Fatalf("the wallet holds %s USDC base units after a failed transfer, want %s", after, before)
		}
	})

	t.Run("signed after its blockhash died: built again, signed again, paid once", func(t *testing.T) {
		manual := walletOn(b.Credentials, "solana", false)
		key, err := keys.Parse(manual.Scheme, manual.PrivateKey)
		if err != nil {
			t.Fatal(err)
		}
		payee := seed.SolanaPayees[0]
		payeeUSDC, _ := node.usdc(payee, info.USDCMint)
		r := send(t, "POST", api+"/payments", pay.SK, fmt.Sprintf(`{"walletId":%q,"asset":"USDC","amount":"7.25","destination":{"address":%q}}`, manual.ID, payee))
		id := r.body["id"].(string)
		if r := send(t, "POST", api+"/payments/"+id+"/submit", pay.SK, "{}"); r.status != 202 {
			t.Fatalf("submit %d %s", r.status, r.raw)
		}
		o := waitStatus(t, api+"/payments/"+id, pay.Read, "pending_signature")
		first := o["legs"].([]any)[0].(map[string]any)["signingRequestId"].(string)
		// The signer holds the request while 200 slots pass: its blockhash (150 slots of
		// life) is dead, at the finalized block too (32 behind), before it is signed.
		var slot uint64
		node.call("devsvm_advanceSlots", []any{200}, &slot)
		signed := signWith(t, api, pay.Sign, first, key)
		lapsed := base58.Encode(signed)

		var again treasury.SigningRequest
		wait.For(t, time.Minute, "a new signing request replacing the lapsed transaction", func() bool {
			o := call(t, "GET", api+"/payments/"+id, pay.Read).body
			leg := o["legs"].([]any)[0].(map[string]any)
			if leg["signingRequestId"] == first {
				return false
			}
			got := call(t, "GET", api+"/signing-requests/"+leg["signingRequestId"].(string), pay.Sign)
			return json.Unmarshal(got.raw, &again) == nil && again.Status == "pending"
		})
		if again.ReplacesTxHash == nil || *again.ReplacesTxHash != lapsed {
			t.Fatalf("the new request replaces %v, want the lapsed %s", again.ReplacesTxHash, lapsed)
		}
		signWith(t, api, pay.Sign, again.ID, key)
		o = waitStatus(t, api+"/payments/"+id, pay.Read, "confirmed")
		landed := o["legs"].([]any)[0].(map[string]any)["txHash"].(string)
		if landed == lapsed {
			t.Fatal("the order confirmed on the lapsed transaction")
		}
		var statuses struct{ Value []any }
		node.call("getSignatureStatuses", []any{[]string{lapsed, landed}, map[string]any{"searchTransactionHistory": true}}, &statuses)
		if len(statuses.Value) != 2 || statuses.Value[0] != nil || statuses.Value[1] == nil {
			t.Fatalf("on the chain: the lapsed transaction %v, the new one %v; want only the new one", statuses.Value[0], statuses.Value[1])
		}
		if after, _ := node.usdc(payee, info.USDCMint); !after.Equal(payeeUSDC.Add(decimal.NewFromInt(7_250_000))) {
			t.Fatalf("the payee holds %s USDC base units, want %s: paid once", after, payeeUSDC.Add(decimal.NewFromInt(7_250_000)))
		}
		if got, want := eventNames(t, api, pay.Read, id), "Order.Created Order.Submitted Wallet.SigningRequested Wallet.TransactionSigned Order.Broadcast "+
			"Wallet.SigningRequested Wallet.TransactionSigned Order.Broadcast Order.Confirmed"; got != want {
			t.Fatalf("events\n got %s\nwant %s", got, want)
		}
	})

	t.Run("fifty at once from one wallet, one transaction each", func(t *testing.T) {
		auto := walletOn(b.Credentials, "solana", true)
		payee := seed.SolanaPayees[1]
		walletUSDC, _ := node.usdc(auto.Address, info.USDCMint)
		payeeUSDC, _ := node.usdc(payee, info.USDCMint)
		const n = 50
		ids := make([]string, n)
		total := decimal.Zero
		var wg sync.WaitGroup
		for i := range n {
			amount := decimal.New(int64(1_000_000+i), -6) // 1.000000 … 1.000049: each its own
			total = total.Add(amount.Shift(6))
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := send(t, "POST", api+"/payments", pay.SK, fmt.Sprintf(`{"walletId":%q,"asset":"USDC","amount":%q,"destination":{"address":%q}}`, auto.ID, amount, payee))
				if r.status != 201 {
					t.Errorf("create %d %s", r.status, r.raw)
					return
				}
				ids[i] = r.body["id"].(string)
				if r := send(t, "POST", api+"/payments/"+ids[i]+"/submit", pay.SK, "{}"); r.status != 202 {
					t.Errorf("submit %d %s", r.status, r.raw)
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		hashes := map[string]bool{}
		for _, id := range ids {
			o := waitStatusWithin(t, api+"/payments/"+id, pay.Read, "confirmed", 2*time.Minute)
			leg := o["legs"].([]any)[0].(map[string]any)
			hashes[leg["txHash"].(string)] = true
			if got := eventNames(t, api, pay.Read, id); got != "Order.Created Order.Submitted Wallet.SigningRequested Wallet.TransactionSigned Order.Broadcast Order.Confirmed" {
				t.Fatalf("order %s events %s: one transaction, sent once", id, got)
			}
		}
		if len(hashes) != n {
			t.Fatalf("%d distinct transactions for %d payments", len(hashes), n)
		}
		if after, _ := node.usdc(payee, info.USDCMint); !after.Equal(payeeUSDC.Add(total)) {
			t.Fatalf("the payee holds %s USDC base units, want %s", after, payeeUSDC.Add(total))
		}
		if after, _ := node.usdc(auto.Address, info.USDCMint); !after.Equal(walletUSDC.Sub(total)) {
			t.Fatalf("the wallet holds %s USDC base units, want %s", after, walletUSDC.Sub(total))
		}
	})

	t.Run("no trades, Earn or Borrow on Solana yet", func(t *testing.T) {
		auto := walletOn(b.Credentials, "solana", true)
		for _, c := range []struct{ app, collection, body string }{
			{"trade", "trade-orders", `{"walletId":%q,"sellAsset":"USDC","buyAsset":"SOL","sellAmount":"1","maxSlippageBps":50}`},
			{"earn", "earn-orders", `{"walletId":%q,"protocol":"aave","action":"deposit","asset":"USDC","amount":"1"}`},
			{"borrow", "borrow-orders", `{"walletId":%q,"protocol":"aave","action":"draw","asset":"USDC","amount":"1","collateralAsset":"SOL"}`},
		} {
			r := send(t, "POST", api+"/"+c.collection, b.Credentials.Keys[c.app].SK, fmt.Sprintf(c.body, auto.ID))
			if r.status != 422 || !strings.Contains(string(r.raw), `"field":"walletId"`) {
				t.Fatalf("a %s order on Solana: %d %s", c.app, r.status, r.raw)
			}
		}
	})
}

// signWith signs a signing request the Solana way (over its message) with key, checks the
// 202, and returns the signature.
func signWith(t *testing.T, api, token, requestID string, key *keys.Key) []byte {
	t.Helper()
	var request treasury.SigningRequest
	if err := json.Unmarshal(call(t, "GET", api+"/signing-requests/"+requestID, token).raw, &request); err != nil {
		t.Fatal(err)
	}
	signature, err := treasury.SignRequest(request, key)
	if err != nil {
		t.Fatal(err)
	}
	if r := send(t, "POST", api+"/signing-requests/"+requestID+"/signature", token, fmt.Sprintf(`{"signature":%q}`, base64.StdEncoding.EncodeToString(signature))); r.status != 202 {
		t.Fatalf("sign %s: %d %s", requestID, r.status, r.raw)
	}
	return signature
}
