package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"

	"github.com/opentreasury/treasury/dev/browser"
	"github.com/opentreasury/treasury/dev/wait"
)

// TestAPasskeyApprovesAndTheSignerAcceptsIt: in Chromium with a virtual authenticator
// (DevTools' WebAuthn domain), the member registers a passkey on the console's Passkeys
// page, at http://localhost (passkeys want a domain). With signedApprovals on, the member
// approves a payment from the manual wallet on the Approvals page: the Approve button has
// the passkey sign the decision's digest over the item's statement. The service verifies
// the assertion; the signing request carries it; treasury signer, pinning only the
// passkey's public key as GET /approver-keys lists it, counts it toward its own quorum and
// signs; the payment confirms. A decision without the passkey is refused.
func TestAPasskeyApprovesAndTheSignerAcceptsIt(t *testing.T) {
	browserPath := browser.Chromium(t)
	b := startBundle(t, t.TempDir(), "")
	defer func() { _ = b.Shutdown() }()
	api := b.APIURL + "/api/v1"
	pay := b.Credentials.Keys["pay"]
	manual := manualWallet(b.Credentials)

	ctx, stopBrowser := browser.Start(t, browserPath)
	defer stopBrowser()
	if _, err := chromedp.Call(ctx, webauthn.Enable, webauthn.EnableParams{}); err != nil {
		t.Fatalf("WebAuthn.enable: %v", err)
	}
	if _, err := chromedp.Call(ctx, webauthn.AddVirtualAuthenticator, webauthn.AddVirtualAuthenticatorParams{
		Options: &webauthn.VirtualAuthenticatorOptions{Protocol: webauthn.AuthenticatorProtocolCtap2, Transport: webauthn.AuthenticatorTransportInternal,
			HasResidentKey: true, HasUserVerification: true, IsUserVerified: true, AutomaticPresenceSimulation: true}}); err != nil {
		t.Fatalf("WebAuthn.addVirtualAuthenticator: %v", err)
	}
	member := &tab{T: t, Ctx: ctx, Base: strings.Replace(b.APIURL, "127.0.0.1", "localhost", 1), Shots: os.Getenv("CONSOLE_SCREENSHOTS")}
	member.SignIn(b.Credentials.Member.Email, b.Credentials.Member.Password)

	// Register the passkey.
	if status := member.Open("/console/pay/passkeys"); status != http.StatusOK {
		t.Fatalf("the passkeys page: HTTP %d", status)
	}
	// A wrong password registers nothing; the person's own does.
	member.Do("a wrong password", chromedp.SetValue(chromedp.CSS("#passkey-password"), "not-the-password"),
		chromedp.Click(chromedp.CSS(`#register-passkey button`)))
	member.WaitFor("the refusal", `document.querySelector("#register-passkey [role=status]").textContent.includes("password")`)
	member.Do("the password", chromedp.SetValue(chromedp.CSS("#passkey-password"), b.Credentials.Member.Password))
	if status := member.Submit("register a passkey", chromedp.Click(chromedp.CSS(`#register-passkey button`))); status != http.StatusOK ||
		!strings.HasPrefix(member.Text("p.notice"), "Passkey apk_") {
		t.Fatalf("the registration: HTTP %d, %q", status, member.Text("main"))
	}
	member.Screenshot("passkeys")
	var keys struct {
		Data []struct{ ID, Scheme, PublicKey, Kind string }
	}
	if err := json.Unmarshal(call(t, "GET", api+"/approver-keys", pay.Read).raw, &keys); err != nil {
		t.Fatal(err)
	}
	if len(keys.Data) == 0 || keys.Data[0].Kind != "passkey" || keys.Data[0].Scheme != "p256" {
		t.Fatalf("the approver keys after the registration: %+v", keys.Data)
	}
	passkey := keys.Data[0]

	// The payment, under a policy that wants signed decisions.
	if r := send(t, "PUT", api+"/policies/pay", pay.SK, `{"signedApprovals":true,"approvalTiers":[{"minUsd":"0","quorum":1}]}`); r.status != 200 {
		t.Fatalf("policy %d %s", r.status, r.raw)
	}
	const payee = "0x1111111111111111111111111111111111111111"
	r := send(t, "POST", api+"/payments", pay.SK, fmt.Sprintf(`{"walletId":%q,"asset":"USDC","amount":"25","destination":{"address":%q}}`, manual.ID, payee))
	orderID, _ := r.body["id"].(string)
	if r := send(t, "POST", api+"/payments/"+orderID+"/submit", pay.SK, "{}"); r.status != 202 {
		t.Fatalf("submit %d %s", r.status, r.raw)
	}
	o := waitStatus(t, api+"/payments/"+orderID, pay.Read, "pending_approval")
	itemID := o["approval"].(map[string]any)["itemId"].(string)
	// Without the passkey's signature the decision does not count.
	if r := send(t, "POST", api+"/approvals/payment/"+itemID+"/decide", pay.Approve, `{"decision":"APPROVE"}`); r.status != 422 {
		t.Fatalf("an unsigned decision: %d %s", r.status, r.raw)
	}

	// The member approves in the browser: the passkey signs.
	wait.For(t, 30*time.Second, "the item on the approvals page", func() bool {
		member.Open("/console/pay/approvals")
		return strings.Contains(member.Text("main"), orderID)
	})
	if n := browser.Eval[int](member, `document.querySelectorAll("form.decide[data-passkeys]").length`); n != 1 {
		t.Fatalf("%d approval forms sign with a passkey", n)
	}
	// Beside the buttons, what the passkey signs: the statement's legs, in base units.
	if signed := member.Text("table.statement"); !strings.Contains(signed, payee) || !strings.Contains(signed, "25,000,000") {
		t.Fatalf("the approvals page shows the statement as %q", signed)
	}
	// And what the chain's node says the payment moves: 25 USDC from the wallet to the payee.
	if sim := member.Text("table.simulation"); !strings.Contains(sim, payee) || !strings.Contains(sim, "(the wallet)") ||
		!strings.Contains(sim, "-25") || strings.Contains(sim, "would revert") {
		t.Fatalf("the approvals page shows the simulation as %q", sim)
	}
	member.Screenshot("approvals-passkey")
	if status := member.Submit("approve", chromedp.Click(chromedp.CSS(`form.decide button[value="APPROVE"]`))); status != http.StatusOK ||
		!strings.HasPrefix(member.Text("p.notice"), "Approved") {
		t.Fatalf("the approval: HTTP %d, %q", status, member.Text("main"))
	}
	var items struct {
		Data []struct {
			ID        string
			Decisions []struct{ KeyID, Signature, AuthenticatorData, ClientDataJSON string }
		}
	}
	if err := json.Unmarshal(call(t, "GET", api+"/approvals?status=all", pay.Read).raw, &items); err != nil {
		t.Fatal(err)
	}
	if len(items.Data) == 0 || items.Data[0].ID != itemID || len(items.Data[0].Decisions) != 1 || items.Data[0].Decisions[0].KeyID != passkey.ID ||
		items.Data[0].Decisions[0].ClientDataJSON == "" || items.Data[0].Decisions[0].AuthenticatorData == "" {
		t.Fatalf("the decision is not the passkey's: %+v", items.Data)
	}
	o = waitStatus(t, api+"/payments/"+orderID, pay.Read, "pending_signature")

	// The signer pins the passkey alone, and signs on its approval.
	requestID := o["legs"].([]any)[0].(map[string]any)["signingRequestId"].(string)
	var request struct{ UnsignedTx string }
	var tx struct{ To string }
	if err := json.Unmarshal(call(t, "GET", api+"/signing-requests/"+requestID, pay.Sign).raw, &request); err != nil ||
		json.Unmarshal([]byte(request.UnsignedTx), &tx) != nil || tx.To == "" {
		t.Fatalf("the signing request: %+v %v", request, err)
	}
	policy := fmt.Sprintf(`{"chains": {"ethereum": {"chainId": 1337, "maxFeeWei": "100000000000000000"}},
  "allow": {"destinations": [%q], "contracts": [{"address": %q, "methods": ["transfer"]}]},
  "approvers": {"rpId": "localhost", "keys": [{"id": %q, "scheme": "p256", "publicKey": %q}], "tiers": [{"minAmount": "0", "approvals": 1}]}}`,
		payee, tx.To, passkey.ID, passkey.PublicKey)
	runVerifyingSigner(t, b.APIURL, pay.Sign, manual, policy)
	waitStatus(t, api+"/payments/"+orderID, pay.Read, "confirmed")
}
