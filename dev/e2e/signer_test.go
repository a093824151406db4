package e2e

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/dev/wait"
	"github.com/opentreasury/treasury/internal/approvers"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/evm"
	"github.com/opentreasury/treasury/internal/chain/evm/contracts"
	"github.com/opentreasury/treasury/internal/signer"
)

// TestASignerWithItsOwnQuorumRefusesACompromisedService runs the dev bundle with the
// policy rule signedApprovals, an approvals bot holding an approver key, and the manual
// wallet's signer pinning that key. Each payment is approved with the bot's signature over
// its statement. Playing a compromised database between approval and signing, the test
// then rewrites signing requests: (a) to pay another address (one the signer's
// destinations even allow), (b) to pay a thousand times the amount, intent included,
// (c) with a forged approval and with an unsigned one, (d) to call another contract and
// to approve the attacker without limit. The signer decodes each transaction itself, finds
// what the approvers did not sign or its rules do not allow, and refuses: those orders end
// failed signer_refused with the check's reason and the wallet sends nothing. The
// untouched payment confirms.
func TestASignerWithItsOwnQuorumRefusesACompromisedService(t *testing.T) {
	dataDir := t.TempDir()
	b := startBundle(t, dataDir, "")
	defer func() { _ = b.Shutdown() }()
	api := b.APIURL + "/api/v1"
	pay := b.Credentials.Keys["pay"]
	manual := manualWallet(b.Credentials)
	payee := common.HexToAddress("0x1111111111111111111111111111111111111111")
	attacker := common.HexToAddress("0x2222222222222222222222222222222222222222")

	// The approvals bot, with its approver key; the policy that wants signed decisions.
	botPub, botKey, _ := ed25519.GenerateKey(rand.Reader)
	bot := send(t, "POST", b.APIURL+"/developer/api-keys", pay.SK, `{"kind":"tk","actions":["approve"],"label":"approvals bot",`+
		`"approverKey":{"scheme":"ed25519","publicKey":"`+base64.StdEncoding.EncodeToString(botPub)+`"}}`)
	if bot.status != 201 {
		t.Fatalf("the bot's key: %d %s", bot.status, bot.raw)
	}
	botToken, botKeyID := bot.body["secret"].(string), bot.body["approverKeyId"].(string)
	if r := send(t, "PUT", api+"/policies/pay", pay.SK, `{"signedApprovals":true,"approvalTiers":[{"minUsd":"0","quorum":1}]}`); r.status != 200 {
		t.Fatalf("policy %d %s", r.status, r.raw)
	}

	// Three payments, each approved with the bot's signature over its own statement.
	approved := func(amount string) (orderID, requestID string) {
		t.Helper()
		r := send(t, "POST", api+"/payments", pay.SK, fmt.Sprintf(`{"walletId":%q,"asset":"USDC","amount":%q,"destination":{"address":%q}}`,
			manual.ID, amount, payee.Hex()))
		orderID = r.body["id"].(string)
		if r := send(t, "POST", api+"/payments/"+orderID+"/submit", pay.SK, "{}"); r.status != 202 {
			t.Fatalf("submit %d %s", r.status, r.raw)
		}
		o := waitStatus(t, api+"/payments/"+orderID, pay.Read, "pending_approval")
		itemID := o["approval"].(map[string]any)["itemId"].(string)
		type approvalItem struct {
			ID, Statement string
			Simulation    *chain.Simulation
		}
		var item approvalItem
		list := call(t, "GET", api+"/approvals", botToken)
		var page struct{ Data []json.RawMessage }
		_ = json.Unmarshal(list.raw, &page)
		for _, raw := range page.Data {
			var it approvalItem
			if json.Unmarshal(raw, &it) == nil && it.ID == itemID {
				item = it
			}
		}
		if item.Statement == "" {
			t.Fatalf("no statement on item %s: %s", itemID, list.raw)
		}
		// Beside the statement, what the chain's node says the payment moves now.
		if sim := item.Simulation; sim == nil || len(sim.Legs) != 1 || sim.Legs[0].Reverted ||
			!slices.Contains(sim.Legs[0].BalanceChanges, chain.BalanceChange{Address: common.HexToAddress(manual.Address).Hex(), Asset: "USDC", Amount: "-" + amount, BaseUnits: "-" + amount + "000000"}) ||
			!slices.Contains(sim.Legs[0].BalanceChanges, chain.BalanceChange{Address: payee.Hex(), Asset: "USDC", Amount: amount, BaseUnits: amount + "000000"}) {
			t.Fatalf("the simulation on item %s: %+v", itemID, item.Simulation)
		}
		sig := ed25519.Sign(botKey, approvers.DecisionDigest("APPROVE", []byte(item.Statement)))
		if r := send(t, "POST", api+"/approvals/payment/"+itemID+"/decide", botToken, fmt.Sprintf(`{"decision":"APPROVE","keyId":%q,"signature":%q}`,
			botKeyID, base64.StdEncoding.EncodeToString(sig))); r.status != 202 {
			t.Fatalf("signed approval %d %s", r.status, r.raw)
		}
		o = waitStatus(t, api+"/payments/"+orderID, pay.Read, "pending_signature")
		return orderID, o["legs"].([]any)[0].(map[string]any)["signingRequestId"].(string)
	}
	honest, _ := approved("10")
	redirected, redirectedReq := approved("11")
	forged, forgedReq := approved("12")
	raised, raisedReq := approved("13")
	unsigned, unsignedReq := approved("14")
	elsewhere, elsewhereReq := approved("15")
	unlimited, unlimitedReq := approved("16")

	// The compromised database.
	db, err := sql.Open("sqlite", filepath.Join(dataDir, "treasury.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// rewrite replaces a request's transaction, keeping its readable fields, raw bytes and
	// digest consistent with each other, as an attacker who controls the database would.
	rewrite := func(requestID string, change func(tx *types.Transaction, call evm.Call) *types.DynamicFeeTx) *types.Transaction {
		t.Helper()
		var rawHex, fields string
		if err := db.QueryRow(`SELECT raw_unsigned_tx, unsigned_tx FROM signing_requests WHERE id = ?`, requestID).Scan(&rawHex, &fields); err != nil {
			t.Fatal(err)
		}
		raw, _ := hex.DecodeString(rawHex)
		tx, _, err := evm.DecodeUnsigned(raw)
		if err != nil {
			t.Fatal(err)
		}
		call, err := evm.DecodeCall(tx.Data())
		if err != nil || call.Method != "transfer" {
			t.Fatalf("the request's call: %+v %v", call, err)
		}
		evil := types.NewTx(change(tx, call))
		evilRaw, _ := evm.UnsignedBytes(evil)
		var readable map[string]any
		_ = json.Unmarshal([]byte(fields), &readable)
		readable["to"], readable["data"] = evil.To().Hex(), "0x"+hex.EncodeToString(evil.Data())
		evilFields, _ := json.Marshal(readable)
		evilDigest := hex.EncodeToString(types.LatestSignerForChainID(evil.ChainId()).Hash(evil).Bytes())
		if _, err := db.Exec(`UPDATE signing_requests SET raw_unsigned_tx = ?, unsigned_tx = ?, digest = ? WHERE id = ?`,
			hex.EncodeToString(evilRaw), string(evilFields), evilDigest, requestID); err != nil {
			t.Fatal(err)
		}
		return tx
	}
	token := contracts.ABI(contracts.Token)
	like := func(tx *types.Transaction, to common.Address, data []byte) *types.DynamicFeeTx {
		return &types.DynamicFeeTx{ChainID: tx.ChainId(), Nonce: tx.Nonce(), GasTipCap: tx.GasTipCap(), GasFeeCap: tx.GasFeeCap(),
			Gas: tx.Gas(), To: &to, Value: tx.Value(), Data: data}
	}
	// (a) Another destination, the intent left as approved.
	tx := rewrite(redirectedReq, func(tx *types.Transaction, call evm.Call) *types.DynamicFeeTx {
		data, _ := token.Pack("transfer", attacker, call.Args[1].(*big.Int))
		return like(tx, *tx.To(), data)
	})
	// (b) A thousand times the amount, with the intent and the approvals' copies of it
	// rewritten to match: the approvers' signatures are over the statement they saw.
	rewrite(raisedReq, func(tx *types.Transaction, call evm.Call) *types.DynamicFeeTx {
		data, _ := token.Pack("transfer", call.Args[0].(common.Address), new(big.Int).Mul(call.Args[1].(*big.Int), big.NewInt(1000)))
		return like(tx, *tx.To(), data)
	})
	var intent, evidence string
	if err := db.QueryRow(`SELECT intent, approvals FROM signing_requests WHERE id = ?`, raisedReq).Scan(&intent, &evidence); err != nil {
		t.Fatal(err)
	}
	var st approvers.Statement
	if err := json.Unmarshal([]byte(intent), &st); err != nil {
		t.Fatal(err)
	}
	base, _ := new(big.Int).SetString(st.Intent[0].Amount, 10)
	st.Intent[0].Amount = new(big.Int).Mul(base, big.NewInt(1000)).String()
	raisedIntent, _ := st.Canonical()
	var approvals []approvers.Evidence
	_ = json.Unmarshal([]byte(evidence), &approvals)
	for i := range approvals {
		approvals[i].Statement = string(raisedIntent)
	}
	raisedApprovals, _ := json.Marshal(approvals)
	if _, err := db.Exec(`UPDATE signing_requests SET intent = ?, approvals = ? WHERE id = ?`, string(raisedIntent), string(raisedApprovals), raisedReq); err != nil {
		t.Fatal(err)
	}
	// (c) Approvals replaced: one signed by another key under the bot's key id, one
	// with no signature at all.
	setApprovals := func(requestID string, sign func(statement string) string) {
		t.Helper()
		var intent string
		if err := db.QueryRow(`SELECT intent FROM signing_requests WHERE id = ?`, requestID).Scan(&intent); err != nil {
			t.Fatal(err)
		}
		forgery, _ := json.Marshal([]approvers.Evidence{{Decision: "APPROVE", DecidedBy: "key_forged", KeyID: botKeyID, Scheme: "ed25519",
			Signature: sign(intent), Statement: intent, DecidedAt: "2026-11-29T00:00:00.000Z"}})
		if _, err := db.Exec(`UPDATE signing_requests SET approvals = ? WHERE id = ?`, string(forgery), requestID); err != nil {
			t.Fatal(err)
		}
	}
	_, otherKey, _ := ed25519.GenerateKey(rand.Reader)
	setApprovals(forgedReq, func(statement string) string {
		return base64.StdEncoding.EncodeToString(ed25519.Sign(otherKey, approvers.DecisionDigest("APPROVE", []byte(statement))))
	})
	setApprovals(unsignedReq, func(string) string { return "" })
	// (d) The same transfer sent to another contract, and an unlimited approve of the
	// token to the attacker.
	rewrite(elsewhereReq, func(tx *types.Transaction, _ evm.Call) *types.DynamicFeeTx {
		return like(tx, attacker, tx.Data())
	})
	rewrite(unlimitedReq, func(tx *types.Transaction, _ evm.Call) *types.DynamicFeeTx {
		data, _ := token.Pack("approve", attacker, new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1)))
		return like(tx, *tx.To(), data)
	})

	// The signer: its own rules allow both addresses; only its quorum stands in the way.
	policy := `{"chains": {"ethereum": {"chainId": 1337, "maxFeeWei": "100000000000000000"}},
  "allow": {"destinations": ["` + payee.Hex() + `", "` + attacker.Hex() + `"], "contracts": [{"address": "` + tx.To().Hex() + `", "methods": ["transfer", "approve"]}]},
  "approvers": {"keys": [{"id": "` + botKeyID + `", "scheme": "ed25519", "publicKey": "` + base64.StdEncoding.EncodeToString(botPub) + `"}],
    "tiers": [{"minAmount": "0", "approvals": 1}]}}`
	treasuryKey := b.Credentials.Keys["treasury"]
	device := send(t, "POST", b.APIURL+"/developer/api-keys", treasuryKey.SK,
		fmt.Sprintf(`{"kind":"tk","actions":["sign"],"resourceIds":[%q],"label":"verifying signer"}`, manual.ID))
	if device.status != 201 {
		t.Fatalf("device %d %s", device.status, device.raw)
	}
	nonceBefore := walletNonce(t, b.APIURL, pay.SK, manual.Address)
	runVerifyingSigner(t, b.APIURL, device.body["secret"].(string), manual, policy)

	waitStatus(t, api+"/payments/"+honest, pay.Read, "confirmed")
	for id, reason := range map[string]string{redirected: "intent_mismatch", forged: "quorum_not_met", raised: "quorum_not_met",
		unsigned: "quorum_not_met", elsewhere: "contract_not_allowed", unlimited: "unlimited_approve"} {
		o := waitStatusWithin(t, api+"/payments/"+id, pay.Read, "failed", time.Minute)
		failure, _ := o["failure"].(map[string]any)
		if failure["code"] != "signer_refused" || !strings.Contains(fmt.Sprint(failure["message"]), reason) {
			t.Fatalf("payment %s: %v, want signer_refused (%s)", id, o["failure"], reason)
		}
	}
	// Only the honest payment left the wallet.
	wait.For(t, 30*time.Second, "the wallet's nonce to count the honest payment alone", func() bool {
		return walletNonce(t, b.APIURL, pay.SK, manual.Address) == nonceBefore+1
	})
}

// runVerifyingSigner runs treasury signer for a wallet, with its own rules (a policy
// document), until the test ends.
func runVerifyingSigner(t *testing.T, base, token string, wallet seed.Wallet, policy string) {
	t.Helper()
	rules, err := signer.ParsePolicy([]byte(policy))
	if err != nil {
		t.Fatal(err)
	}
	key, err := signer.LoadKey(writeKey(t, wallet.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		_ = signer.Run(ctx, signer.Config{BaseURL: base, Token: token, WalletID: wallet.ID, Key: key, Interval: 200 * time.Millisecond, Policy: rules})
	}()
}

// writeKey writes a wallet's private key to a file as treasury signer reads it.
func writeKey(t *testing.T, private string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "wallet.key")
	if err := os.WriteFile(path, []byte(private+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// walletNonce is how many transactions the chain has mined from address.
func walletNonce(t *testing.T, base, token, address string) uint64 {
	t.Helper()
	var answer rpcAnswer
	postRPC(t, base+"/api/v1/rpc/ethereum", token,
		fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"eth_getTransactionCount","params":[%q,"latest"]}`, address), &answer)
	var hexCount string
	if answer.Error != nil || json.Unmarshal(answer.Result, &hexCount) != nil {
		t.Fatalf("eth_getTransactionCount: %+v %s", answer.Error, answer.Result)
	}
	n, ok := new(big.Int).SetString(strings.TrimPrefix(hexCount, "0x"), 16)
	if !ok {
		t.Fatalf("eth_getTransactionCount answered %q", hexCount)
	}
	return n.Uint64()
}
