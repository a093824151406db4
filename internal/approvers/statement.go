package approvers

import (
	"encoding/json"

	"github.com/opentreasury/treasury/auditchain"
	"github.com/opentreasury/treasury/internal/chain"
)

// Statement is what an approver approves (SPEC 3.5a): the order's intent on its chain,
// every leg of it, under the policy version and quorum that asked for approval, until the
// item expires. Its canonical JSON is what approvers sign and signers read.
type Statement struct {
	OrgID    string `json:"orgId"`
	App      string `json:"app"`
	Domain   string `json:"domain"`
	OrderID  string `json:"orderId"`
	Chain    string `json:"chain"`
	WalletID string `json:"walletId"`
	// From is the wallet's address on its chain.
	From              string         `json:"from"`
	Intent            []chain.Intent `json:"intent"`
	PolicyVersion     int            `json:"policyVersion"`
	RequiredApprovals int            `json:"requiredApprovals"`
	// ExpiresAt is when the approval item expires, RFC 3339 in UTC with milliseconds;
	// absent from the intent of an order that needed no approval.
	ExpiresAt string `json:"expiresAt,omitempty"`
}

// Canonical is the statement's canonical JSON: keys sorted, no whitespace.
func (s Statement) Canonical() ([]byte, error) {
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	return auditchain.CanonicalJSON(raw)
}

// Evidence is one decision on the statement as a signing request carries it, for a
// signer to check without the service's word: who decided, how, and, for a signed
// decision, the approver key, its scheme and the signature over DecisionDigest.
type Evidence struct {
	Decision string `json:"decision"`
	// DecidedBy is the credential that decided; DecidedByUser the person behind it, if any.
	DecidedBy     string `json:"decidedBy"`
	DecidedByUser string `json:"decidedByUser,omitempty"`
	KeyID         string `json:"keyId,omitempty"`
	Scheme        string `json:"scheme,omitempty"`
	Signature     string `json:"signature,omitempty"`
	// AuthenticatorData and ClientDataJSON, for a passkey's decision, are the rest of its
	// WebAuthn assertion (base64url), Signature being the assertion's signature.
	AuthenticatorData string `json:"authenticatorData,omitempty"`
	ClientDataJSON    string `json:"clientDataJSON,omitempty"`
	// Statement is the canonical JSON the decision was made on.
	Statement string `json:"statement"`
	DecidedAt string `json:"decidedAt"`
}
