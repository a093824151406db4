package gethe2e

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/ethereum/go-ethereum/common"
	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/client"
	"github.com/opentreasury/treasury/dev/browser"
	"github.com/opentreasury/treasury/dev/compromise"
	"github.com/opentreasury/treasury/dev/devevm"
	"github.com/opentreasury/treasury/dev/wait"
	"github.com/opentreasury/treasury/internal/approvers"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/keys"
)

// A compromised service against the verifying signer, on geth. An organisation of its own
// (made by the operator on the suite's cluster) wants signed approvals; the approvals bot of
// its second person signs seven USDC payments to the payee. Then the test plays whoever controls the
// PostgreSQL database between approval and signing: it redirects one payment (a), raises
// another a thousandfold with the intent rewritten to match (b), replaces two payments'
// approvals by a forgery and by an unsigned one (c), and turns two into a transfer to
// another contract and an unlimited approve (d). `treasury signer` runs with its own rules
// (the attacker's address allowed, so that only its quorum and checks stand in the way),
// its pinned approver key and geth as its own node. The honest payment confirms; each
// other ends failed signer_refused with the check that caught it; geth counts one
// transaction from the wallet, and the attacker received nothing.
func TestACompromisedServiceGetsNothingSignedOnGeth(t *testing.T) {
	s := env(t)
	browserPath := browser.Chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	api := s.cluster.APIURLs[0]
	payee := common.HexToAddress("0x6666666666666666666666666666666666666666")
	attacker := common.HexToAddress("0x7777777777777777777777777777777777777777")
	usdc := s.token(t, "USDC").Address

	// The organisation, its owner, its wallet and its keys.
	owner := operatorOrganisation(ctx, t, browserPath, api, s.cluster.DatabaseURL, "Attacked", "owner@attacked.example")
	walletKey, err := keys.Generate(chain.Secp256k1)
	if err != nil {
		t.Fatal(err)
	}
	walletAddr := common.HexToAddress(walletKey.Address())
	walletID := registerWallet(t, owner, walletKey)
	paySK := newKey(t, owner, "pay", "sk", nil, "")
	device := newKey(t, owner, "treasury", "tk", []string{"sign"}, walletID)
	faucet := &devevm.Deployer{Client: s.eth, Key: s.geth.faucet}
	for asset, amount := range map[string]int64{"ETH": 1, "USDC": 1000} {
		if err := faucet.Fund(ctx, s.chain, walletAddr, asset, decimal.NewFromInt(amount)); err != nil {
			t.Fatal(err)
		}
	}

	// The approvals bot belongs to a second person (the creator of an order may not decide
	// it): the owner invites them on the Team page; they open their link in a browser of
	// their own and make a pay key holding approve and developer, through which the bot's
	// key is made with its approver key.
	owner.Open("/console/pay/team")
	owner.Do("the member", chromedp.SetValue(chromedp.CSS("#email"), "approver@attacked.example"))
	for _, a := range []string{"read", "approve", "developer"} {
		owner.Do("tick "+a, chromedp.Click(chromedp.CSS(`form[action="team"] input[name="actions"][value="`+a+`"]`)))
	}
	if status := owner.Submit("invite", chromedp.Click(chromedp.CSS(`form[action="team"] button[type="submit"]`))); status != http.StatusCreated {
		t.Fatalf("the invitation: HTTP %d: %s", status, owner.Text("main"))
	}
	member := signedInByLink(t, browserPath, api, browser.Eval[string](owner, `document.getElementById("secret").value`),
		"the attacked approver's long password")
	memberKey, _ := client.New(api, client.WithToken(newKey(t, member, "pay", "tk", []string{"approve", "developer"}, "")))

	// The approvals bot with its approver key, and the policy that wants signed decisions.
	pay, _ := client.New(api, client.WithToken(paySK))
	botPub, botPriv, _ := ed25519.GenerateKey(rand.Reader)
	botKey, err := memberKey.CreateAPIKey(ctx, client.APIKeyRequest{Kind: "tk", Actions: []string{"approve"}, Label: "approvals bot",
		ApproverKey: &client.ApproverKeyRequest{Scheme: approvers.Ed25519, PublicKey: base64.StdEncoding.EncodeToString(botPub)}})
	if err != nil || botKey.ApproverKeyID == nil {
		t.Fatalf("the bot's key: %v %+v", err, botKey)
	}
	bot, _ := client.New(api, client.WithToken(botKey.Secret))
	if _, err := pay.PutPolicy(ctx, "pay", client.PolicyRules{SignedApprovals: true,
		ApprovalTiers: []client.ApprovalTier{{MinUSD: "0", Quorum: 1}}}); err != nil {
		t.Fatal(err)
	}

	// Seven payments, each approved with the bot's signature over its own statement; no
	// signer runs yet, so each waits with its signing request pending.
	approved := func(amount string) (orderID, requestID string) {
		t.Helper()
		o, err := pay.CreateOrder(ctx, payment(walletID, "USDC", amount, payee))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pay.SubmitOrder(ctx, client.DomainPayment, o.ID); err != nil {
			t.Fatal(err)
		}
		var item client.Approval
		wait.For(t, time.Minute, "the approval item of "+o.ID, func() bool {
			page, err := bot.ListApprovals(ctx, client.ApprovalFilter{})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range page.Data {
				if it.OrderID == o.ID && it.Statement != nil {
					item = it
					return true
				}
			}
			return false
		})
		sig := ed25519.Sign(botPriv, approvers.DecisionDigest("APPROVE", []byte(*item.Statement)))
		if _, err := bot.DecideApproval(ctx, client.DomainPayment, item.ID, client.Decision{Decision: "APPROVE", KeyID: *botKey.ApproverKeyID,
			Signature: base64.StdEncoding.EncodeToString(sig)}); err != nil {
			t.Fatal(err)
		}
		wait.For(t, time.Minute, "a signing request for "+o.ID, func() bool {
			if o, err = pay.GetOrder(ctx, client.DomainPayment, o.ID); err != nil {
				t.Fatal(err)
			}
			return len(o.Legs) == 1 && o.Legs[0].SigningRequestID != nil
		})
		return o.ID, *o.Legs[0].SigningRequestID
	}
	honest, _ := approved("10")
	attacks := compromise.Attacks(attacker, *botKey.ApproverKeyID)
	attacked, requests := make([]string, len(attacks)), make([]string, len(attacks))
	for i := range attacks {
		attacked[i], requests[i] = approved(fmt.Sprint(11 + i))
	}

	// The compromised database.
	raw, err := sql.Open("pgx", s.cluster.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for i, a := range attacks {
		if err := a.Do(ctx, compromise.DB{DB: raw}, requests[i]); err != nil {
			t.Fatalf("%s: %v", a.Name, err)
		}
	}

	// The signer: its rules allow the attacker too; its quorum, its checks and geth decide.
	sentBefore, attackerHeld := s.nonce(t, walletAddr), s.balance(t, "USDC", attacker)
	signerLog := startSigner(t, api, walletID, device, walletKey, `{"chains": {"ethereum": {"chainId": 1337, "maxFeeWei": "100000000000000000", "rpcUrl": "`+s.geth.url+`"}},
  "allow": {"destinations": ["`+payee.Hex()+`", "`+attacker.Hex()+`"], "contracts": [{"address": "`+usdc.Hex()+`", "methods": ["transfer", "approve"]}]},
  "approvers": {"keys": [{"id": "`+*botKey.ApproverKeyID+`", "scheme": "ed25519", "publicKey": "`+base64.StdEncoding.EncodeToString(botPub)+`"}],
    "tiers": [{"minAmount": "0", "approvals": 1}]}}`)

	outcome := func(id string) *client.Order {
		t.Helper()
		var o *client.Order
		wait.For(t, 3*time.Minute, "payment "+id+" to end", func() bool {
			if o, err = pay.GetOrder(ctx, client.DomainPayment, id); err != nil {
				t.Fatal(err)
			}
			return o.Status == "confirmed" || o.Status == "failed" || o.Status == "rejected"
		})
		return o
	}
	if o := outcome(honest); o.Status != "confirmed" {
		log, _ := os.ReadFile(signerLog)
		t.Fatalf("the honest payment is %s (%+v); the signer's log:\n%s", o.Status, o.Failure, log)
	}
	for i, a := range attacks {
		o := outcome(attacked[i])
		if o.Status != "failed" || o.Failure == nil || o.Failure.Code != "signer_refused" || !strings.Contains(o.Failure.Message, "("+a.Reason+")") {
			t.Errorf("%s, payment %s: %s %+v, want failed signer_refused (%s)", a.Name, o.ID, o.Status, o.Failure, a.Reason)
		}
	}
	// geth: one transaction from the wallet (the honest payment's), nothing to the attacker.
	if got := s.nonce(t, walletAddr); got != sentBefore+1 {
		t.Errorf("geth counts %d transactions from the wallet since the signer started, want 1", got-sentBefore)
	}
	if got := s.balance(t, "USDC", attacker); got.Cmp(attackerHeld) != 0 {
		t.Errorf("the attacker's USDC went from %s to %s", attackerHeld, got)
	}
	if got := s.balance(t, "USDC", payee); got.Cmp(big.NewInt(10_000_000)) < 0 {
		t.Errorf("the payee holds %s base units of USDC, want at least the honest 10", got)
	}
}
