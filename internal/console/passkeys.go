package console

import (
	"encoding/json"
	"net/http"

	"github.com/opentreasury/treasury/internal/approvers"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
)

func (c *console) passkeyRoutes() []route {
	return []route{
		{"GET /console/{app}/passkeys", "passkeys", c.passkeys},
		{"POST /console/{app}/passkeys/options", "passkeys", c.passkeyOptions},
		{"POST /console/{app}/passkeys", "passkeys", c.registerPasskey},
		{"POST /console/{app}/passkeys/{id}/revoke", "passkeys", c.revokePasskey},
	}
}

type passkeysPage struct {
	Keys    []store.ApproverKey
	Enabled bool
	// Origins are where passkeys work, for a person who opened the console elsewhere.
	Origins []string
}

// passkeys lists the person's passkeys: the approver keys with which the Approve button
// signs (SPEC 3.5a). They are the person's, the same on every app.
func (c *console) passkeys(w http.ResponseWriter, r *http.Request, rq *request) {
	rq.v.Title = "Passkeys"
	keys, err := c.Service.ListPasskeys(r.Context(), rq.caller(r))
	if err != nil {
		c.failed(w, r, rq, err)
		return
	}
	c.render(w, r, rq, http.StatusOK, "passkeys", passkeysPage{Keys: keys, Enabled: c.Service.Passkeys.Enabled(),
		Origins: c.Service.Passkeys.Origins})
}

// passkeyOptions answers the script's first step: the options for
// navigator.credentials.create, as JSON.
func (c *console) passkeyOptions(w http.ResponseWriter, r *http.Request, rq *request) {
	options, err := c.Service.BeginPasskeyRegistration(r.Context(), rq.caller(r), rq.email, r.PostFormValue("password"))
	if err != nil {
		http.Error(w, message(err), c.statusOf(r, err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(options)
}

// registerPasskey takes the browser's answer (the credential as JSON, in a form field).
func (c *console) registerPasskey(w http.ResponseWriter, r *http.Request, rq *request) {
	k, err := c.Service.FinishPasskeyRegistration(r.Context(), rq.caller(r), rq.email, []byte(r.PostFormValue("credential")))
	done := ""
	if err == nil {
		done = "Passkey " + k.ID + " registered: the Approve button now signs with it."
	}
	c.back(w, r, "/console/"+rq.app+"/passkeys", err, done)
}

func (c *console) revokePasskey(w http.ResponseWriter, r *http.Request, rq *request) {
	err := c.Service.RevokePasskey(r.Context(), rq.caller(r), r.PathValue("id"))
	c.back(w, r, "/console/"+rq.app+"/passkeys", err, "Passkey revoked: it signs no new decision.")
}

// passkeySigning is what the approvals page's script needs to have a passkey sign a
// decision: the person's live passkeys, by WebAuthn credential id, with their key ids.
type passkeySigning struct {
	// Keys maps each WebAuthn credential id (base64url) to its approver key id, as JSON.
	Keys string
}

func (c *console) passkeySigning(r *http.Request, rq *request) *passkeySigning {
	if !c.Service.Passkeys.Enabled() {
		return nil
	}
	keys, err := c.Service.ListPasskeys(r.Context(), rq.caller(r))
	if err != nil {
		return nil
	}
	live := map[string]string{}
	for _, k := range keys {
		if k.RevokedAt == nil && k.CredentialID != nil {
			live[*k.CredentialID] = k.ID
		}
	}
	if len(live) == 0 {
		return nil
	}
	raw, _ := json.Marshal(live)
	return &passkeySigning{Keys: string(raw)}
}

// challenge is what a passkey signs to make a decision on a statement: its digest.
func challenge(decision, statement string) string {
	return approvers.Challenge(approvers.DecisionDigest(decision, []byte(statement)))
}

// decisionOf reads the approvals form: a decision, and the passkey's assertion the
// script put beside it, if any.
func decisionOf(r *http.Request) service.Decision {
	d := service.Decision{Decision: r.PostFormValue("decision"), Comment: r.PostFormValue("comment")}
	if keyID := r.PostFormValue("keyId"); keyID != "" {
		d.KeyID = keyID
		d.WebAuthn = &approvers.Assertion{AuthenticatorData: r.PostFormValue("authenticatorData"),
			ClientDataJSON: r.PostFormValue("clientDataJSON"), Signature: r.PostFormValue("signature")}
	}
	return d
}
