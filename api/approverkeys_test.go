package api

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/opentreasury/treasury/apitypes"
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
	keys := list(f.creds.Keys["treasury"].Read)
	if len(keys) != 1 || keys[0].ID != *key.ApproverKeyID || keys[0].Scheme != "ed25519" || keys[0].Kind != "key" ||
		keys[0].PublicKey != base64.StdEncoding.EncodeToString(pub) || keys[0].CredentialID == nil || *keys[0].CredentialID != key.ID ||
		keys[0].RevokedAt != nil {
		t.Fatalf("approver keys %+v", keys)
	}
	if other := list(f.creds.OtherOrg.Keys["pay"]["sk"]); len(other) != 0 {
		t.Fatalf("another organisation sees %+v", other)
	}
	f.do(t, "GET", "/api/v1/approver-keys", f.creds.Keys["treasury"].PK, nil).wantProblem(t, 403, apitypes.CodePermissionDenied)

	if r := f.do(t, "DELETE", "/developer/api-keys/"+key.ID, sk, nil); r.status != 200 {
		t.Fatalf("revoke %d %s", r.status, r.body)
	}
	if keys := list(f.creds.Keys["treasury"].Read); len(keys) != 1 || keys[0].RevokedAt == nil {
		t.Fatalf("after the credential's revocation: %+v", keys)
	}
}
