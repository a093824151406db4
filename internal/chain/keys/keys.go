// Package keys holds the two signature schemes of wallets (SPEC 3.5): secp256k1 over an
// EVM transaction's signing hash, and ed25519 over a Solana transaction's message. It
// verifies for the service and signs for the signers (the dev signer, `treasury signer`,
// the client's helper); the service itself holds no private key.
package keys

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/opentreasury/treasury/internal/chain"
)

// ErrBadSignature is a signature that does not verify.
var ErrBadSignature = errors.New("keys: the signature does not verify")

// Signed is what a wallet's signature of a signing request covers (SPEC 3.5): for
// secp256k1 the 32 digest bytes, for ed25519 the whole message (the request's unsigned
// bytes, as Solana's runtime verifies them), whose SHA-256 the digest must be.
func Signed(scheme string, digest, message []byte) ([]byte, error) {
	if len(digest) != 32 {
		return nil, fmt.Errorf("keys: a digest is 32 bytes, got %d", len(digest))
	}
	if scheme != chain.Ed25519 {
		return digest, nil
	}
	if sum := sha256.Sum256(message); !bytes.Equal(sum[:], digest) {
		return nil, fmt.Errorf("keys: the digest is not the SHA-256 of the message")
	}
	return message, nil
}

// Verify checks a signature against a wallet: for secp256k1 over the 32 digest bytes, and
// it must recover to address; for ed25519 over the message, and it must verify under
// publicKey (base64). Signed says which bytes those are for a signing request.
func Verify(scheme, address, publicKey string, signed, sig []byte) error {
	switch scheme {
	case chain.Secp256k1:
		if len(signed) != 32 {
			return fmt.Errorf("keys: a digest is 32 bytes, got %d", len(signed))
		}
		signer, err := Recover(signed, sig)
		if err != nil {
			return err
		}
		if !common.IsHexAddress(address) || signer != common.HexToAddress(address) {
			return ErrBadSignature
		}
		return nil
	case chain.Ed25519, "":
		pub, err := base64.StdEncoding.DecodeString(publicKey)
		if err != nil || len(pub) != ed25519.PublicKeySize {
			return fmt.Errorf("keys: the wallet has no valid ed25519 public key")
		}
		if len(sig) != ed25519.SignatureSize || !ed25519.Verify(pub, signed, sig) {
			return ErrBadSignature
		}
		return nil
	}
	return fmt.Errorf("keys: unknown scheme %q", scheme)
}

// Recover returns the address a 65-byte r‖s‖v signature over digest was made by. v may be
// 0/1 or 27/28; a signature a chain would refuse (s in the upper half) does not recover.
func Recover(digest, sig []byte) (common.Address, error) {
	if len(sig) != crypto.SignatureLength {
		return common.Address{}, ErrBadSignature
	}
	norm := Normalize(sig)
	r, s := new(big.Int).SetBytes(norm[:32]), new(big.Int).SetBytes(norm[32:64])
	if !crypto.ValidateSignatureValues(norm[64], r, s, true) {
		return common.Address{}, ErrBadSignature
	}
	pub, err := crypto.SigToPub(digest, norm)
	if err != nil {
		return common.Address{}, ErrBadSignature
	}
	return crypto.PubkeyToAddress(*pub), nil
}

// Normalize returns a copy of a 65-byte secp256k1 signature with v as 0 or 1.
func Normalize(sig []byte) []byte {
	out := append([]byte(nil), sig...)
	if len(out) == crypto.SignatureLength && out[64] >= 27 {
		out[64] -= 27
	}
	return out
}

// Key is a private key of either scheme.
type Key struct {
	Scheme string
	ec     *ecdsa.PrivateKey
	ed     ed25519.PrivateKey
}

// Generate makes a new key in a scheme.
func Generate(scheme string) (*Key, error) {
	switch scheme {
	case chain.Secp256k1:
		k, err := crypto.GenerateKey()
		if err != nil {
			return nil, err
		}
		return &Key{Scheme: scheme, ec: k}, nil
	case chain.Ed25519:
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		return &Key{Scheme: scheme, ed: k}, nil
	}
	return nil, fmt.Errorf("keys: unknown scheme %q", scheme)
}

// Parse reads a private key in its scheme's form (SPEC 10): secp256k1 as the hex of its 32
// bytes (0x optional), ed25519 as a base64 seed.
func Parse(scheme, text string) (*Key, error) {
	switch scheme {
	case chain.Secp256k1:
		k, err := crypto.HexToECDSA(strings.TrimPrefix(strings.TrimSpace(text), "0x"))
		if err != nil {
			return nil, fmt.Errorf("keys: a secp256k1 key is the hex of 32 bytes: %w", err)
		}
		return &Key{Scheme: scheme, ec: k}, nil
	case chain.Ed25519:
		seed, err := base64.StdEncoding.DecodeString(strings.TrimSpace(text))
		if err != nil || len(seed) != ed25519.SeedSize {
			return nil, fmt.Errorf("keys: an ed25519 key is a base64 seed of %d bytes", ed25519.SeedSize)
		}
		return &Key{Scheme: scheme, ed: ed25519.NewKeyFromSeed(seed)}, nil
	}
	return nil, fmt.Errorf("keys: unknown scheme %q", scheme)
}

// FromEd25519 wraps an ed25519 private key.
func FromEd25519(k ed25519.PrivateKey) *Key { return &Key{Scheme: chain.Ed25519, ed: k} }

// FromECDSA wraps a secp256k1 private key.
func FromECDSA(k *ecdsa.PrivateKey) *Key { return &Key{Scheme: chain.Secp256k1, ec: k} }

// ECDSA returns the secp256k1 key, or nil for an ed25519 one.
func (k *Key) ECDSA() *ecdsa.PrivateKey { return k.ec }

// Encode writes the key in its scheme's form (see Parse).
func (k *Key) Encode() string {
	if k.ec != nil {
		return hex.EncodeToString(crypto.FromECDSA(k.ec))
	}
	return base64.StdEncoding.EncodeToString(k.ed.Seed())
}

// PublicKey is what a wallet record keeps of the key: base64 of the ed25519 public key, or
// hex of the compressed secp256k1 one.
func (k *Key) PublicKey() string {
	if k.ec != nil {
		return hex.EncodeToString(crypto.CompressPubkey(&k.ec.PublicKey))
	}
	return base64.StdEncoding.EncodeToString(k.ed.Public().(ed25519.PublicKey))
}

// Address is the key's EVM address (checksummed), for a secp256k1 key; "" otherwise.
func (k *Key) Address() string {
	if k.ec == nil {
		return ""
	}
	return crypto.PubkeyToAddress(k.ec.PublicKey).Hex()
}

// Sign signs what Signed names: for secp256k1 the 32 digest bytes (65 bytes r‖s‖v, v 0 or
// 1), for ed25519 the message (64 bytes).
func (k *Key) Sign(signed []byte) ([]byte, error) {
	if k.ec != nil {
		if len(signed) != 32 {
			return nil, fmt.Errorf("keys: a digest is 32 bytes, got %d", len(signed))
		}
		return crypto.Sign(signed, k.ec)
	}
	return ed25519.Sign(k.ed, signed), nil
}
