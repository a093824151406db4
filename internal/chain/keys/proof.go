package keys

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"math/big"
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
	sig = lowS(sig)
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

// lowS returns sig with s in the lower half of the curve's order (and v flipped to
// match): the same proof of the key. Transactions must carry low s; a proof of possession
// made by a signer that does not normalise (some key services) is as good.
func lowS(sig []byte) []byte {
	n := crypto.S256().Params().N
	s := new(big.Int).SetBytes(sig[32:64])
	if s.Cmp(new(big.Int).Rsh(n, 1)) <= 0 {
		return sig
	}
	out := append([]byte(nil), sig...)
	new(big.Int).Sub(n, s).FillBytes(out[32:64])
	switch out[64] {
	case 0, 1:
		out[64] ^= 1
	case 27, 28:
		out[64] = 55 - out[64]
	}
	return out
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
// prints it) of message by the base58 public key address, and returns the key as base64,
// as wallet records keep it. The signature may be over the message's UTF-8 bytes (what a
// wallet's signMessage signs) or over Solana's off-chain message envelope around them
// (what `solana sign-offchain-message` and hardware wallets sign).
func VerifySolanaMessage(address, message, signature string) (string, error) {
	pub, err := base58.Decode(address)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return "", ErrBadSignature
	}
	sig, err := base58.Decode(signature)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return "", ErrBadSignature
	}
	for _, signed := range solanaSignedForms(pub, []byte(message)) {
		if ed25519.Verify(pub, signed, sig) {
			return base64.StdEncoding.EncodeToString(pub), nil
		}
	}
	return "", ErrBadSignature
}

// solanaSigningDomain starts every off-chain message; no transaction starts so.
const solanaSigningDomain = "\xffsolana offchain"

// solanaSignedForms are the byte strings a Solana signer may have signed for msg: the bytes
// themselves, and version 0 of the off-chain message envelope in both of its layouts (the
// CLI's: domain, version, format, length; and the proposal's, which also names an
// application domain and the signers), in each message format.
func solanaSignedForms(pub, msg []byte) [][]byte {
	out := [][]byte{msg}
	if len(msg) > 0xffff {
		return out
	}
	length := []byte{byte(len(msg)), byte(len(msg) >> 8)}
	for format := byte(0); format <= 2; format++ {
		short := append([]byte(solanaSigningDomain), 0, format)
		out = append(out, append(append(short, length...), msg...))
		full := append([]byte(solanaSigningDomain), 0)
		full = append(full, make([]byte, 32)...) // the application domain: none
		full = append(full, format, 1)
		full = append(full, pub...)
		out = append(out, append(append(full, length...), msg...))
	}
	return out
}

// SignSolanaOffchainMessage signs message as `solana sign-offchain-message` does: the
// envelope (limited UTF-8 for a message of several lines), base58.
func (k *Key) SignSolanaOffchainMessage(message string) (string, error) {
	if k.ed == nil {
		return "", ErrBadSignature
	}
	forms := solanaSignedForms(k.ed.Public().(ed25519.PublicKey), []byte(message))
	return base58.Encode(ed25519.Sign(k.ed, forms[3])), nil
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
