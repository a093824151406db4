package signer

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/opentreasury/treasury/client"
)

// CallbackTimeout is how long the signer waits for the customer's callback to answer.
const CallbackTimeout = 30 * time.Second

// Callback is the customer's own rule, asked before each signature once every check of
// the signer's has passed, in the shape the leading co-signers use: the signer POSTs a JWT
// it signs (EdDSA) describing the request to an HTTPS endpoint of the customer's, which
// answers a JWT of its own key saying APPROVE, REJECT or RETRY. No answer, a late one or
// one that does not verify is a RETRY: the request waits, unsigned, for the next pass.
type Callback struct {
	URL string `json:"url"`
	// SigningKeyFile holds the signer's ed25519 key for its JWTs (a base64 seed); the
	// customer's endpoint pins its public half.
	SigningKeyFile string `json:"signingKeyFile"`
	// PublicKey is the customer's endpoint's ed25519 public key (base64): its answers
	// are signed with it.
	PublicKey string `json:"publicKey"`

	signing ed25519.PrivateKey
	answers ed25519.PublicKey
}

// The callback's answers.
const (
	CallbackApprove = "APPROVE"
	CallbackReject  = "REJECT"
	CallbackRetry   = "RETRY"
)

// CallbackRequest is what the signer's JWT says of the request, in its "request" claim.
type CallbackRequest struct {
	ID            string                   `json:"id"`
	OrderID       string                   `json:"orderId"`
	Domain        string                   `json:"domain"`
	Leg           string                   `json:"leg"`
	WalletID      string                   `json:"walletId"`
	Chain         string                   `json:"chain"`
	Digest        string                   `json:"digest"`
	RawUnsignedTx string                   `json:"rawUnsignedTx"`
	Intent        *string                  `json:"intent"`
	Approvals     []client.SigningApproval `json:"approvals"`
}

// callbackClaims are the claims of the signer's JWT.
type callbackClaims struct {
	Request CallbackRequest `json:"request"`
	jwt.RegisteredClaims
}

// CallbackAnswer is what the customer's JWT says: Action, and for a REJECT the reason
// posted with the refusal. RequestID must name the request asked about.
type CallbackAnswer struct {
	Action    string `json:"action"`
	RequestID string `json:"requestId"`
	Reason    string `json:"reason,omitempty"`
	jwt.RegisteredClaims
}

func (c *Callback) load() error {
	u, err := url.Parse(c.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("callback.url %q: an https URL", c.URL)
	}
	raw, err := os.ReadFile(c.SigningKeyFile)
	if err != nil {
		return fmt.Errorf("callback.signingKeyFile: %w", err)
	}
	seed, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil || len(seed) != ed25519.SeedSize {
		return errors.New("callback.signingKeyFile: the base64 of a 32-byte ed25519 seed")
	}
	pub, err := base64.StdEncoding.DecodeString(c.PublicKey)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return errors.New("callback.publicKey: the base64 of a 32-byte ed25519 public key")
	}
	c.signing, c.answers = ed25519.NewKeyFromSeed(seed), pub
	return nil
}

// ask asks the callback about a request that passed every check, and returns its action
// (RETRY for anything but a verified APPROVE or REJECT about this request) and, for a
// REJECT, its reason.
func (c *Callback) ask(ctx context.Context, hc *http.Client, r client.SigningRequest) (action, reason string, err error) {
	now := time.Now()
	token, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, callbackClaims{
		Request: CallbackRequest{ID: r.ID, OrderID: r.OrderID, Domain: string(r.Domain), Leg: r.Leg, WalletID: r.WalletID, Chain: r.Chain,
			Digest: r.Digest, RawUnsignedTx: r.RawUnsignedTx, Intent: r.Intent, Approvals: r.Approvals},
		RegisteredClaims: jwt.RegisteredClaims{Issuer: "treasury-signer", Audience: jwt.ClaimStrings{c.URL}, ID: r.ID,
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(CallbackTimeout))},
	}).SignedString(c.signing)
	if err != nil {
		return CallbackRetry, "", err
	}
	ctx, cancel := context.WithTimeout(ctx, CallbackTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader([]byte(token)))
	if err != nil {
		return CallbackRetry, "", err
	}
	req.Header.Set("Content-Type", "application/jwt")
	resp, err := hc.Do(req)
	if err != nil {
		return CallbackRetry, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil || resp.StatusCode != http.StatusOK {
		return CallbackRetry, "", fmt.Errorf("the callback answered HTTP %d (%v)", resp.StatusCode, err)
	}
	var answer CallbackAnswer
	_, err = jwt.ParseWithClaims(strings.TrimSpace(string(body)), &answer, func(*jwt.Token) (any, error) { return c.answers, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}), jwt.WithIssuedAt())
	if err != nil {
		return CallbackRetry, "", fmt.Errorf("the callback's answer does not verify: %w", err)
	}
	if answer.RequestID != r.ID {
		return CallbackRetry, "", fmt.Errorf("the callback answered about %q, not %q", answer.RequestID, r.ID)
	}
	switch answer.Action {
	case CallbackApprove, CallbackReject:
		return answer.Action, answer.Reason, nil
	}
	return CallbackRetry, "", nil
}
