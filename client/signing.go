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
	"github.com/opentreasury/treasury/internal/chain/solana"
)

// CheckSigningRequest verifies, before anything is signed, that a request's Digest is
// derived from its UnsignedTx: for an EVM transaction (type eip1559) the EIP-1559 signing
// hash of the transaction it describes, sent from address; for a Solana one (type solana)
// the SHA-256 of its message, decoded from RawUnsignedTx and paid by address alone; in the
// simulated chain's form of earlier releases (no chain makes it now) the SHA-256 of its text. It does not judge the transaction itself: read UnsignedTx (its
// call, value and destination) for that.
func CheckSigningRequest(r SigningRequest, address string) error {
	if IsSolanaTransaction(r) {
		raw, err := hex.DecodeString(r.RawUnsignedTx)
		if err != nil {
			return fmt.Errorf("the unsigned bytes are not hex: %w", err)
		}
		if err := solana.CheckRequest([]byte(r.UnsignedTx), raw, r.Digest, address); err != nil {
			return fmt.Errorf("%w; refusing to sign", err)
		}
		return nil
	}
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

// IsSolanaTransaction reports whether a signing request describes a Solana transaction,
// whose signature is over its message (RawUnsignedTx, also Message in base64).
func IsSolanaTransaction(r SigningRequest) bool {
	var probe struct {
		Type string `json:"type"`
	}
	return json.Unmarshal([]byte(r.UnsignedTx), &probe) == nil && probe.Type == solana.FieldsType
}

// IsEVMTransaction reports whether a signing request describes an EVM transaction.
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

// SignRequest checks a signing request (CheckSigningRequest, with the key's own address)
// and signs it with the wallet's key: the digest with secp256k1, the message with ed25519
// (SPEC 3.5). Post the result with SubmitSignature.
func SignRequest(r SigningRequest, key *SigningKey) ([]byte, error) {
	if key.Scheme != cmp.Or(r.Scheme, chain.Ed25519) {
		return nil, fmt.Errorf("the request is signed with %s, the key is %s", r.Scheme, key.Scheme)
	}
	if err := CheckSigningRequest(r, cmp.Or(key.Address(), key.SolanaAddress())); err != nil {
		return nil, err
	}
	digest, err := hex.DecodeString(r.Digest)
	if err != nil {
		return nil, fmt.Errorf("the digest is not hex: %w", err)
	}
	message, err := hex.DecodeString(r.RawUnsignedTx)
	if err != nil {
		return nil, fmt.Errorf("the unsigned bytes are not hex: %w", err)
	}
	signed, err := keys.Signed(key.Scheme, digest, message)
	if err != nil {
		return nil, err
	}
	return key.Sign(signed)
}
