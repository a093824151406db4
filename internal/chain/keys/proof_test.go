package keys

import (
	"crypto/ed25519"
	"encoding/hex"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/mr-tron/base58"

	"github.com/opentreasury/treasury/internal/chain"
)

// personal_sign's proof recovers to its signer's address and public key, whichever v
// (27/28 or 0/1) and s (low, or the high twin some key services give) it comes with; any
// other message or key does not.
func TestAPersonalSignProofRecoversItsSigner(t *testing.T) {
	k, _ := Generate(chain.Secp256k1)
	sig, err := k.SignPersonal("register me")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := hex.DecodeString(strings.TrimPrefix(sig, "0x"))
	zeroOne := append([]byte(nil), raw...)
	zeroOne[64] -= 27
	high := append([]byte(nil), raw...)
	n := crypto.S256().Params().N
	new(big.Int).Sub(n, new(big.Int).SetBytes(raw[32:64])).FillBytes(high[32:64])
	high[64] = 55 - high[64]
	for name, s := range map[string]string{"v 27/28": sig, "v 0/1": "0x" + hex.EncodeToString(zeroOne), "high s": "0x" + hex.EncodeToString(high)} {
		addr, pub, err := RecoverPersonalSign("register me", s)
		if err != nil || addr.Hex() != k.Address() || pub != k.PublicKey() {
			t.Errorf("%s: %v %s %s", name, err, addr.Hex(), pub)
		}
	}
	if addr, _, err := RecoverPersonalSign("register someone else", sig); err == nil && addr.Hex() == k.Address() {
		t.Fatal("a proof over another message recovers the signer")
	}
	for _, bad := range []string{"", "0x12", "not hex", sig[:len(sig)-2]} {
		if _, _, err := RecoverPersonalSign("register me", bad); err == nil {
			t.Errorf("signature %q recovers", bad)
		}
	}
}

// A Solana proof verifies over the message's bytes or over the off-chain envelope
// around them, by the address's key only.
func TestASolanaProofVerifiesInEitherForm(t *testing.T) {
	k, _ := Generate(chain.Ed25519)
	other, _ := Generate(chain.Ed25519)
	msg := "Register this wallet.\nChain: solana"
	raw, _ := k.SignSolanaMessage(msg)
	envelope, _ := k.SignSolanaOffchainMessage(msg)
	if raw == envelope {
		t.Fatal("the envelope signs the same bytes as the message")
	}
	for name, sig := range map[string]string{"raw": raw, "envelope": envelope} {
		pub, err := VerifySolanaMessage(k.SolanaAddress(), msg, sig)
		if err != nil || pub != k.PublicKey() {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := VerifySolanaMessage(other.SolanaAddress(), msg, sig); err == nil {
			t.Errorf("%s verifies for another key", name)
		}
		if _, err := VerifySolanaMessage(k.SolanaAddress(), msg+" ", sig); err == nil {
			t.Errorf("%s verifies for another message", name)
		}
	}
	// The envelope is Solana's: the signing domain, version 0, format 1 (limited UTF-8),
	// the length in two bytes, little-endian, then the message.
	sig, _ := base58.Decode(envelope)
	want := append([]byte("\xffsolana offchain\x00\x01"), byte(len(msg)), 0)
	if !ed25519.Verify(k.ed.Public().(ed25519.PublicKey), append(want, msg...), sig) {
		t.Fatal("the envelope is not the CLI's")
	}
	if _, err := VerifySolanaMessage("0xabc", msg, raw); err == nil {
		t.Fatal("an address that is not base58 of a key verifies")
	}
}
