package api

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/approvers"
	"github.com/opentreasury/treasury/internal/store"
)

// An approving tk key may carry an approver key; the organisation's approver keys list
// it with the credential it belongs to, another organisation's do not, and revoking the
// credential revokes its approver key.
func TestApprovingKeysCarryApproverKeys(t *testing.T) {
	f := newFixture(t)
	sk := f.creds.Keys["pay"].SK
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	approverKey := `"approverKey":{"scheme":"ed25519","publicKey":"` + base64.StdEncoding.EncodeToString(pub) + `"}`

	r := f.post(t, "/developer/api-keys", sk, `{"kind":"tk","actions":["approve"],"label":"approvals bot",`+approverKey+`}`)
	var key apitypes.APIKey
	if r.status != 201 || json.Unmarshal(r.body, &key) != nil || key.ApproverKeyID == nil {
		t.Fatalf("create %d %s", r.status, r.body)
	}
	f.post(t, "/developer/api-keys", sk, `{"kind":"sk",`+approverKey+`}`).wantProblem(t, 422, apitypes.CodeValidationFailed)
	f.post(t, "/developer/api-keys", sk, `{"kind":"tk","actions":["read"],`+approverKey+`}`).wantProblem(t, 422, apitypes.CodeValidationFailed)
	f.post(t, "/developer/api-keys", sk, `{"kind":"tk","actions":["approve"],"approverKey":{"scheme":"ed25519","publicKey":"AAAA"}}`).
		wantProblem(t, 422, apitypes.CodeValidationFailed)
	f.post(t, "/developer/api-keys", sk, `{"kind":"tk","actions":["approve"],"approverKey":{"scheme":"rsa","publicKey":"AAAA"}}`).
		wantProblem(t, 422, apitypes.CodeValidationFailed)

	list := func(token string) (keys []apitypes.ApproverKey) {
		t.Helper()
		r := f.do(t, "GET", "/api/v1/approver-keys", token, nil)
		var page apitypes.Page[apitypes.ApproverKey]
		if r.status != 200 || json.Unmarshal(r.body, &page) != nil {
			t.Fatalf("list %d %s", r.status, r.body)
		}
		return page.Data
	}
	// The eight seeded approving keys carry approver keys too; the newest is this one;
	// another organisation sees none of them.
	otherOrg := len(list(f.creds.OtherOrg.Keys["pay"]["sk"]))
	keys := list(f.creds.Keys["treasury"].Read)
	if otherOrg != 0 || len(keys) != 9 || keys[0].ID != *key.ApproverKeyID || keys[0].Scheme != "ed25519" || keys[0].Kind != "key" ||
		keys[0].PublicKey != base64.StdEncoding.EncodeToString(pub) || keys[0].CredentialID == nil || *keys[0].CredentialID != key.ID ||
		keys[0].RevokedAt != nil {
		t.Fatalf("approver keys %+v", keys)
	}
	f.do(t, "GET", "/api/v1/approver-keys", f.creds.Keys["treasury"].PK, nil).wantProblem(t, 403, apitypes.CodePermissionDenied)

	if r := f.do(t, "DELETE", "/developer/api-keys/"+key.ID, sk, nil); r.status != 200 {
		t.Fatalf("revoke %d %s", r.status, r.body)
	}
	if keys := list(f.creds.Keys["treasury"].Read); keys[0].ID != *key.ApproverKeyID || keys[0].RevokedAt == nil {
		t.Fatalf("after the credential's revocation: %+v", keys)
	}

	// An OAuth client with the approve scope carries one too, and loses it with its
	// revocation; a client without that scope carries none.
	clientPub, _, _ := ed25519.GenerateKey(rand.Reader)
	approverKey = `"approverKey":{"scheme":"ed25519","publicKey":"` + base64.StdEncoding.EncodeToString(clientPub) + `"}`
	f.post(t, "/developer/oauth-clients", sk, `{"scopes":"pay:read",`+approverKey+`}`).wantProblem(t, 422, apitypes.CodeValidationFailed)
	r = f.post(t, "/developer/oauth-clients", sk, `{"scopes":"pay:read pay:approve",`+approverKey+`}`)
	var oc apitypes.OAuthClient
	if r.status != 201 || json.Unmarshal(r.body, &oc) != nil || oc.ApproverKeyID == nil {
		t.Fatalf("create a client %d %s", r.status, r.body)
	}
	keys = list(f.creds.Keys["treasury"].Read)
	if len(keys) != 10 || keys[0].ID != *oc.ApproverKeyID || keys[0].CredentialID == nil || *keys[0].CredentialID != oc.ClientID || keys[0].RevokedAt != nil {
		t.Fatalf("approver keys with the client's %+v", keys)
	}
	if r := f.do(t, "DELETE", "/developer/oauth-clients/"+oc.ID, sk, nil); r.status != 200 {
		t.Fatalf("revoke the client %d %s", r.status, r.body)
	}
	if keys := list(f.creds.Keys["treasury"].Read); keys[0].RevokedAt == nil {
		t.Fatalf("after the client's revocation: %+v", keys)
	}
}

// Where the policy sets signedApprovals, a decision counts only with its approver's own
// signature over the item's statement and the decision; the signature is kept with it.
func TestSignedApprovalsAreVerified(t *testing.T) {
	f, fw, id := newLifecycleFixture(t)
	sk := f.creds.Keys["pay"].SK
	if r := f.do(t, "PUT", "/api/v1/policies/pay", sk, strings.NewReader(`{"signedApprovals":true}`), "Content-Type", "application/json"); r.status != 200 {
		t.Fatalf("policy %d %s", r.status, r.body)
	}
	approver := func() (token, keyID string, key ed25519.PrivateKey) {
		pub, priv, _ := ed25519.GenerateKey(rand.Reader)
		r := f.post(t, "/developer/api-keys", sk, `{"kind":"tk","actions":["approve"],"approverKey":{"scheme":"ed25519","publicKey":"`+
			base64.StdEncoding.EncodeToString(pub)+`"}}`)
		var k apitypes.APIKey
		if r.status != 201 || json.Unmarshal(r.body, &k) != nil {
			t.Fatalf("approver %d %s", r.status, r.body)
		}
		return k.Secret, *k.ApproverKeyID, priv
	}
	bot, botKey, botPriv := approver()
	_, otherKey, otherPriv := approver()
	statement := `{"chain":"ethereum","orderId":"` + id + `"}`
	item := &store.ApprovalItem{ID: "apr_signed", OrgID: f.creds.OrgID, App: "pay", Domain: "payment", OrderID: id, Status: "pending",
		RequiredApprovals: 1, Reason: "r", PayloadHash: "h", Summary: "{}", Statement: statement, CreatedBy: "key_maker",
		CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}
	if err := f.store.CreateApprovalItem(context.Background(), item); err != nil {
		t.Fatal(err)
	}
	signed := func(decision, keyID string, priv ed25519.PrivateKey) string {
		sig := ed25519.Sign(priv, approvers.DecisionDigest(decision, []byte(statement)))
		return `{"decision":"APPROVE","keyId":"` + keyID + `","signature":"` + base64.StdEncoding.EncodeToString(sig) + `"}`
	}
	decide := "/api/v1/approvals/payment/apr_signed/decide"
	f.post(t, decide, bot, `{"decision":"APPROVE"}`).wantProblem(t, 422, apitypes.CodeInvalidSignature)
	f.post(t, decide, bot, signed("APPROVE", botKey, otherPriv)).wantProblem(t, 422, apitypes.CodeInvalidSignature)
	f.post(t, decide, bot, signed("REJECT", botKey, botPriv)).wantProblem(t, 422, apitypes.CodeInvalidSignature)
	f.post(t, decide, bot, signed("APPROVE", otherKey, otherPriv)).wantProblem(t, 422, apitypes.CodeInvalidSignature)
	f.post(t, decide, bot, signed("APPROVE", "apk_00000000000000000000000000000000", botPriv)).wantProblem(t, 422, apitypes.CodeInvalidSignature)
	if len(fw.approvals) != 0 {
		t.Fatal("a decision without a good signature reached the workflow")
	}
	r := f.post(t, decide, bot, signed("APPROVE", botKey, botPriv))
	var a struct {
		Status    string                      `json:"status"`
		Statement string                      `json:"statement"`
		Decisions []apitypes.ApprovalDecision `json:"decisions"`
	}
	if r.status != 202 || json.Unmarshal(r.body, &a) != nil || a.Status != "approved" || a.Statement != statement ||
		len(a.Decisions) != 1 || a.Decisions[0].KeyID != botKey || a.Decisions[0].Signature == "" {
		t.Fatalf("signed approval %d %s", r.status, r.body)
	}

	// An OAuth client decides with the approver key it was created with; the key of
	// another credential is not its to use.
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	r = f.post(t, "/developer/oauth-clients", sk, `{"scopes":"pay:approve","approverKey":{"scheme":"ed25519","publicKey":"`+
		base64.StdEncoding.EncodeToString(pub)+`"}}`)
	var oc apitypes.OAuthClient
	if r.status != 201 || json.Unmarshal(r.body, &oc) != nil {
		t.Fatalf("client %d %s", r.status, r.body)
	}
	status, body, _ := f.token(t, url.Values{"grant_type": {"client_credentials"}}, oc.ClientID, oc.ClientSecret)
	token, _ := body["access_token"].(string)
	if status != 200 || token == "" {
		t.Fatalf("token %d", status)
	}
	second := decodeOrder(t, f.post(t, "/api/v1/payments", sk, `{"walletId":"`+f.creds.Wallets[0].ID+
		`","asset":"USDC","amount":"20000","destination":{"address":"0x1111111111111111111111111111111111111111"}}`))["id"].(string)
	item = &store.ApprovalItem{ID: "apr_signed_by_client", OrgID: f.creds.OrgID, App: "pay", Domain: "payment", OrderID: second, Status: "pending",
		RequiredApprovals: 1, Reason: "r", PayloadHash: "h", Summary: "{}", Statement: statement, CreatedBy: "key_maker",
		CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}
	if err := f.store.CreateApprovalItem(context.Background(), item); err != nil {
		t.Fatal(err)
	}
	byClient := "/api/v1/approvals/payment/apr_signed_by_client/decide"
	f.post(t, byClient, token, signed("APPROVE", botKey, botPriv)).wantProblem(t, 422, apitypes.CodeInvalidSignature)
	if r := f.post(t, byClient, token, signed("APPROVE", *oc.ApproverKeyID, priv)); r.status != 202 {
		t.Fatalf("the client's signed approval %d %s", r.status, r.body)
	}
}

// One public key is one approver key of the organisation: a second credential given the
// same key (a person copying another's from the list) is refused.
func TestAnApproverKeyServesOneCredential(t *testing.T) {
	f := newFixture(t)
	sk := f.creds.Keys["pay"].SK
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	body := `{"kind":"tk","actions":["approve"],"approverKey":{"scheme":"ed25519","publicKey":"` + base64.StdEncoding.EncodeToString(pub) + `"}}`
	if r := f.post(t, "/developer/api-keys", sk, body); r.status != 201 {
		t.Fatalf("the first %d %s", r.status, r.body)
	}
	f.post(t, "/developer/api-keys", sk, body).wantProblem(t, 409, apitypes.CodeConflict)
	f.post(t, "/developer/oauth-clients", sk, `{"scopes":"pay:approve","approverKey":{"scheme":"ed25519","publicKey":"`+
		base64.StdEncoding.EncodeToString(pub)+`"}}`).wantProblem(t, 409, apitypes.CodeConflict)
}
