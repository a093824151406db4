// Package approvers holds approver keys: the public keys with which people and approving
// credentials sign their decisions (SPEC 3.5a), in the schemes an approver may use. It is
// pure: it parses keys and verifies signatures, and stores nothing.
package approvers

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/ethereum/go-ethereum/crypto"
)

// The schemes of approver keys.
const (
	Ed25519   = "ed25519"
	Secp256k1 = "secp256k1"
	P256      = "p256"
)

// Schemes lists them.
var Schemes = []string{Ed25519, Secp256k1, P256}

// The kinds of approver keys: a person's passkey, or a credential's key given at its
// creation.
const (
	KindPasskey = "passkey"
	KindKey     = "key"
)

// ErrBadSignature: the signature does not verify under the key.
var ErrBadSignature = errors.New("approvers: the signature does not verify")

// ParsePublicKey reads a public key given in base64 (standard or URL alphabet, padded or
// not): 32 bytes for ed25519, the 33-byte compressed point for secp256k1 and p256. It
// returns the key's bytes, in which form it is stored and shown again.
func ParsePublicKey(scheme, text string) ([]byte, error) {
	raw, err := decode64(text)
	if err != nil {
		return nil, errors.New("must be base64")
	}
	switch scheme {
	case Ed25519:
		if len(raw) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("an ed25519 key is %d bytes, this is %d", ed25519.PublicKeySize, len(raw))
		}
	case Secp256k1:
		if len(raw) != 33 {
			return nil, fmt.Errorf("a secp256k1 key is the 33-byte compressed point, this is %d bytes", len(raw))
		}
		if _, err := crypto.DecompressPubkey(raw); err != nil {
			return nil, errors.New("is not a point of secp256k1")
		}
	case P256:
		if len(raw) != 33 {
			return nil, fmt.Errorf("a p256 key is the 33-byte compressed point, this is %d bytes", len(raw))
		}
		if x, _ := elliptic.UnmarshalCompressed(elliptic.P256(), raw); x == nil {
			return nil, errors.New("is not a point of P-256")
		}
	default:
		return nil, fmt.Errorf("unknown scheme %q (ed25519, secp256k1 or p256)", scheme)
	}
	return raw, nil
}

// Verify checks a signature over the 32-byte digest under a public key as ParsePublicKey
// returns it: ed25519 64 bytes; secp256k1 65 bytes r‖s‖v (v 0/1 or 27/28) recovering to
// the key; p256 ASN.1 DER.
func Verify(scheme string, publicKey, digest, signature []byte) error {
	switch scheme {
	case Ed25519:
		if len(publicKey) == ed25519.PublicKeySize && ed25519.Verify(publicKey, digest, signature) {
			return nil
		}
	case Secp256k1:
		if len(signature) != 65 {
			return ErrBadSignature
		}
		sig := append([]byte{}, signature...)
		if sig[64] >= 27 {
			sig[64] -= 27
		}
		recovered, err := crypto.SigToPub(digest, sig)
		if err == nil && string(crypto.CompressPubkey(recovered)) == string(publicKey) {
			return nil
		}
	case P256:
		x, y := elliptic.UnmarshalCompressed(elliptic.P256(), publicKey)
		if x != nil && ecdsa.VerifyASN1(&ecdsa.PublicKey{Curve: elliptic.P256(), X: x, Y: y}, digest, signature) {
			return nil
		}
	}
	return ErrBadSignature
}

// DecisionDigest is what an approver signs for a decision on a statement:
// SHA-256("treasury-approval:v1:" + decision + ":" + statement).
func DecisionDigest(decision string, statement []byte) []byte {
	h := sha256.New()
	h.Write([]byte("treasury-approval:v1:" + decision + ":"))
	h.Write(statement)
	return h.Sum(nil)
}

func decode64(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("not base64")
}
