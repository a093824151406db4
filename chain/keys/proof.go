package keys

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"strings"

	"github.com/ethereum/go-ethereum/accounts"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/mr-tron/base58"
)

// Proofs that someone holds a wallet's key: a message signed the way wallets and hardware
// signers sign text, which no chain would take as a transaction.

// RecoverPersonalSign returns the address and the public key (hex, compressed) that
// signed message by EIP-191 personal_sign: 0x and the hex of r‖s‖v, v 27/28 or 0/1.
func RecoverPersonalSign(message, signature string) (common.Address, string, error) {
	sig, err := hex.DecodeString(strings.TrimPrefix(strings.TrimPrefix(signature, "0x"), "0X"))
	if err != nil || len(sig) != crypto.SignatureLength {
		return common.Address{}, "", ErrBadSignature
	}
	digest := accounts.TextHash([]byte(message))
	address, err := Recover(digest, sig)
	if err != nil {
		return common.Address{}, "", err
	}
	pub, err := crypto.SigToPub(digest, Normalize(sig))
	if err != nil {
		return common.Address{}, "", ErrBadSignature
	}
	return address, hex.EncodeToString(crypto.CompressPubkey(pub)), nil
}

// SignPersonal signs message as personal_sign does (v 27/28), for tests and examples
// that hold a secp256k1 key.
func (k *Key) SignPersonal(message string) (string, error) {
	sig, err := k.Sign(accounts.TextHash([]byte(message)))
	if err != nil {
		return "", err
	}
	sig[64] += 27
	return "0x" + hex.EncodeToString(sig), nil
}

// VerifySolanaMessage checks an ed25519 signature (base58 of 64 bytes, as Solana's CLI
// prints it) over message's UTF-8 bytes by the base58 public key address, and returns
// the key as base64, as wallet records keep it.
func VerifySolanaMessage(address, message, signature string) (string, error) {
	pub, err := base58.Decode(address)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return "", ErrBadSignature
	}
	sig, err := base58.Decode(signature)
	if err != nil || len(sig) != ed25519.SignatureSize || !ed25519.Verify(pub, []byte(message), sig) {
		return "", ErrBadSignature
	}
	return base64.StdEncoding.EncodeToString(pub), nil
}

// SignSolanaMessage signs message's bytes with an ed25519 key, base58 as Solana's CLI
// prints it.
func (k *Key) SignSolanaMessage(message string) (string, error) {
	if k.ed == nil {
		return "", ErrBadSignature
	}
	return base58.Encode(ed25519.Sign(k.ed, []byte(message))), nil
}

// SolanaAddress is an ed25519 key's Solana address: base58 of its public key; "" for a
// secp256k1 key.
func (k *Key) SolanaAddress() string {
	if k.ed == nil {
		return ""
	}
	return base58.Encode(k.ed.Public().(ed25519.PublicKey))
}

// IsSolanaAddress reports whether s is base58 of 32 bytes.
func IsSolanaAddress(s string) bool {
	b, err := base58.Decode(s)
	return err == nil && len(b) == ed25519.PublicKeySize
}
