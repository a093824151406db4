package client

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/evm"
	"github.com/opentreasury/treasury/internal/chain/keys"
)

// CheckSigningRequest verifies, before anything is signed, that a request's Digest is
// derived from its UnsignedTx: for an EVM transaction (type eip1559) the EIP-1559 signing
// hash of the transaction it describes, sent from address; on a simulated chain the
// SHA-256 of its text. It does not judge the transaction itself: read UnsignedTx (its
// call, value and destination) for that.
func CheckSigningRequest(r SigningRequest, address string) error {
	if !IsEVMTransaction(r) {
		sum := sha256.Sum256([]byte(r.UnsignedTx))
		if hex.EncodeToString(sum[:]) != strings.ToLower(r.Digest) {
			return errors.New("the digest is not the SHA-256 of the unsigned transaction; refusing to sign")
		}
		return nil
	}
	digest, from, err := evm.Digest([]byte(r.UnsignedTx))
	if err != nil {
		return err
	}
	if !strings.EqualFold(digest, r.Digest) {
		return errors.New("the digest is not the signing hash of the transaction shown; refusing to sign")
	}
	if !strings.EqualFold(from, address) {
		return fmt.Errorf("the transaction is sent from %s, not from this wallet (%s); refusing to sign", from, address)
	}
	return nil
}

// IsEVMTransaction reports whether a signing request describes an EVM transaction, as
// opposed to a simulated chain's.
func IsEVMTransaction(r SigningRequest) bool {
	var probe struct {
		Type string `json:"type"`
	}
	return json.Unmarshal([]byte(r.UnsignedTx), &probe) == nil && probe.Type == "eip1559"
}

// SigningKey is a wallet's private key, held by the device that signs for it.
type SigningKey = keys.Key

// ParseSigningKey reads a private key of a scheme: secp256k1 as the hex of its 32 bytes,
// ed25519 as the base64 of its 32-byte seed.
func ParseSigningKey(scheme, text string) (*SigningKey, error) { return keys.Parse(scheme, text) }

// SignRequest checks a signing request (CheckSigningRequest, with the key's own address on
// an EVM chain) and signs its digest with the wallet's key; post the result with
// SubmitSignature.
func SignRequest(r SigningRequest, key *SigningKey) ([]byte, error) {
	if key.Scheme != cmp.Or(r.Scheme, chain.Ed25519) {
		return nil, fmt.Errorf("the request is signed with %s, the key is %s", r.Scheme, key.Scheme)
	}
	if err := CheckSigningRequest(r, key.Address()); err != nil {
		return nil, err
	}
	digest, err := hex.DecodeString(r.Digest)
	if err != nil {
		return nil, fmt.Errorf("the digest is not hex: %w", err)
	}
	return key.Sign(digest)
}
