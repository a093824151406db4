package approvers

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
)

// Assertion is a passkey's signature as WebAuthn gives it (navigator.credentials.get):
// the authenticator's data, the client's data, and the signature over both, each
// base64url as the browser encodes them.
type Assertion struct {
	AuthenticatorData string `json:"authenticatorData"`
	ClientDataJSON    string `json:"clientDataJSON"`
	Signature         string `json:"signature"`
}

// Passkey is what an assertion shows once verified: the origin the browser was at.
type Passkey struct {
	Origin string
}

// VerifyAssertion checks a passkey's assertion for a decision's digest: the client data
// is a webauthn.get whose challenge is the digest itself, the authenticator saw and
// verified the user (UP and UV), its data names rpID (when rpID is not ""), and the P-256 key (as ParsePublicKey
// returns it) signed authenticatorData ‖ SHA-256(clientDataJSON). The digest being the
// challenge is what binds the passkey's signature to the statement and the decision.
func VerifyAssertion(publicKey, digest []byte, rpID string, a Assertion) (Passkey, error) {
	authData, err1 := decode64(a.AuthenticatorData)
	clientData, err2 := decode64(a.ClientDataJSON)
	sig, err3 := decode64(a.Signature)
	if err := errors.Join(err1, err2, err3); err != nil {
		return Passkey{}, fmt.Errorf("the assertion's parts are not base64url: %w", err)
	}
	var cd struct {
		Type      string `json:"type"`
		Challenge string `json:"challenge"`
		Origin    string `json:"origin"`
	}
	if err := json.Unmarshal(clientData, &cd); err != nil {
		return Passkey{}, fmt.Errorf("the client data is not JSON: %w", err)
	}
	if cd.Type != "webauthn.get" {
		return Passkey{}, fmt.Errorf("the client data is a %q, not a webauthn.get", cd.Type)
	}
	challenge, err := decode64(cd.Challenge)
	if err != nil || !bytes.Equal(challenge, digest) {
		return Passkey{}, errors.New("the passkey signed another challenge than the decision's digest")
	}
	// rpIdHash (32 bytes), flags (1), signCount (4).
	if len(authData) < 37 {
		return Passkey{}, errors.New("the authenticator data is too short")
	}
	if rpID != "" {
		if want := sha256.Sum256([]byte(rpID)); !bytes.Equal(authData[:32], want[:]) {
			return Passkey{}, fmt.Errorf("the passkey is not one of the relying party %q", rpID)
		}
	}
	// UP (0x01) and UV (0x04): the person was there and unlocked the passkey (a PIN, a
	// fingerprint); a stolen security key alone does not approve.
	if authData[32]&0x05 != 0x05 {
		return Passkey{}, errors.New("the authenticator did not verify the user")
	}
	clientHash := sha256.Sum256(clientData)
	signed := sha256.Sum256(append(append([]byte{}, authData...), clientHash[:]...))
	if err := Verify(P256, publicKey, signed[:], sig); err != nil {
		return Passkey{}, err
	}
	return Passkey{Origin: cd.Origin}, nil
}

// Challenge is a decision's digest as a WebAuthn challenge travels in client data:
// base64url without padding.
func Challenge(digest []byte) string { return base64.RawURLEncoding.EncodeToString(digest) }
