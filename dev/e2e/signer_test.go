package e2e

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
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

	"github.com/opentreasury/treasury/dev/compromise"
	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/dev/wait"
	"github.com/opentreasury/treasury/internal/approvers"
	"github.com/opentreasury/treasury/internal/chain"
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

	// Payments, each approved with the bot's signature over its own statement; usdc is the
	// token their statements name.
	var usdc common.Address
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
		var st approvers.Statement
		if err := json.Unmarshal([]byte(item.Statement), &st); err != nil || len(st.Intent) != 1 {
			t.Fatalf("the statement %s: %v", item.Statement, err)
		}
		usdc = common.HexToAddress(st.Intent[0].Contract)
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
	attacks := compromise.Attacks(attacker, botKeyID)
	attacked, requests := make([]string, len(attacks)), make([]string, len(attacks))
	for i := range attacks {
		attacked[i], requests[i] = approved(fmt.Sprint(11 + i))
	}

	// The compromised database.
	raw, err := sql.Open("sqlite", filepath.Join(dataDir, "treasury.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	db := compromise.DB{DB: raw}
	for i, a := range attacks {
		if err := a.Do(context.Background(), db, requests[i]); err != nil {
			t.Fatalf("%s: %v", a.Name, err)
		}
	}

	// The signer: its own rules allow both addresses; only its quorum stands in the way.
	policy := `{"chains": {"ethereum": {"chainId": 1337, "maxFeeWei": "100000000000000000"}},
  "allow": {"destinations": ["` + payee.Hex() + `", "` + attacker.Hex() + `"], "contracts": [{"address": "` + usdc.Hex() + `", "methods": ["transfer", "approve"]}]},
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
	for i, a := range attacks {
		o := waitStatusWithin(t, api+"/payments/"+attacked[i], pay.Read, "failed", time.Minute)
		failure, _ := o["failure"].(map[string]any)
		if failure["code"] != "signer_refused" || !strings.Contains(fmt.Sprint(failure["message"]), a.Reason) {
			t.Fatalf("%s, payment %s: %v, want signer_refused (%s)", a.Name, attacked[i], o["failure"], a.Reason)
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
