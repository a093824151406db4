package approvers

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"
)

// signer is a test approver in one scheme: its public key as an approver gives it, and a
// signing function over a digest.
type signer struct {
	scheme, public string
	sign           func(digest []byte) []byte
}

func signers(t *testing.T) []signer {
	t.Helper()
	edPub, edKey, _ := ed25519.GenerateKey(rand.Reader)
	k1, _ := crypto.GenerateKey()
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	return []signer{
		{Ed25519, base64.StdEncoding.EncodeToString(edPub), func(d []byte) []byte { return ed25519.Sign(edKey, d) }},
		{Secp256k1, base64.StdEncoding.EncodeToString(crypto.CompressPubkey(&k1.PublicKey)), func(d []byte) []byte {
			sig, err := crypto.Sign(d, k1)
			if err != nil {
				t.Fatal(err)
			}
			return sig
		}},
		{P256, base64.RawURLEncoding.EncodeToString(elliptic.MarshalCompressed(elliptic.P256(), p256.X, p256.Y)), func(d []byte) []byte {
			sig, err := ecdsa.SignASN1(rand.Reader, p256, d)
			if err != nil {
				t.Fatal(err)
			}
			return sig
		}},
	}
}

func TestEachSchemeVerifiesItsOwnSignaturesOnly(t *testing.T) {
	statement := []byte(`{"orderId":"ord_1"}`)
	approve, reject := DecisionDigest("APPROVE", statement), DecisionDigest("REJECT", statement)
	all := signers(t)
	for i, s := range all {
		pub, err := ParsePublicKey(s.scheme, s.public)
		if err != nil {
			t.Fatalf("%s: %v", s.scheme, err)
		}
		sig := s.sign(approve)
		if err := Verify(s.scheme, pub, approve, sig); err != nil {
			t.Errorf("%s: its signature of APPROVE: %v", s.scheme, err)
		}
		if err := Verify(s.scheme, pub, reject, sig); err == nil {
			t.Errorf("%s: a signature of APPROVE verified as REJECT", s.scheme)
		}
		other := all[(i+1)%len(all)]
		if err := Verify(s.scheme, pub, approve, other.sign(approve)); err == nil {
			t.Errorf("%s: another key's signature verified", s.scheme)
		}
		if s.scheme == Secp256k1 {
			sig27 := append([]byte{}, sig...)
			sig27[64] += 27
			if err := Verify(s.scheme, pub, approve, sig27); err != nil {
				t.Errorf("secp256k1 with v as 27/28: %v", err)
			}
		}
	}
}

func TestPublicKeysAreParsedStrictly(t *testing.T) {
	k1, _ := crypto.GenerateKey()
	uncompressed := base64.StdEncoding.EncodeToString(crypto.FromECDSAPub(&k1.PublicKey))
	// An x beyond both fields' primes is no point of either curve.
	beyond := make([]byte, 33)
	for i := range beyond {
		beyond[i] = 0xff
	}
	beyond[0] = 0x02
	notOnCurve := base64.StdEncoding.EncodeToString(beyond)
	for name, in := range map[string][2]string{
		"ed25519 of 31 bytes":        {Ed25519, base64.StdEncoding.EncodeToString(make([]byte, 31))},
		"secp256k1 uncompressed":     {Secp256k1, uncompressed},
		"secp256k1 not on the curve": {Secp256k1, notOnCurve},
		"p256 not on the curve":      {P256, notOnCurve},
		"not base64":                 {Ed25519, "!!"},
		"an unknown scheme":          {"rsa", base64.StdEncoding.EncodeToString(make([]byte, 32))},
	} {
		if _, err := ParsePublicKey(in[0], in[1]); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

// assert is what a browser's passkey makes of a challenge, for rpID at origin.
func assert(t *testing.T, key *ecdsa.PrivateKey, rpID, origin, typ string, challenge []byte, flags byte) Assertion {
	t.Helper()
	rpHash := sha256.Sum256([]byte(rpID))
	authData := append(append(rpHash[:], flags), 0, 0, 0, 7)
	clientData, _ := json.Marshal(map[string]string{"type": typ, "challenge": Challenge(challenge), "origin": origin})
	clientHash := sha256.Sum256(clientData)
	signed := sha256.Sum256(append(append([]byte{}, authData...), clientHash[:]...))
	sig, err := ecdsa.SignASN1(rand.Reader, key, signed[:])
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return Assertion{AuthenticatorData: enc(authData), ClientDataJSON: enc(clientData), Signature: enc(sig)}
}

func TestAPasskeyAssertionBindsTheDecision(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	pub := elliptic.MarshalCompressed(elliptic.P256(), key.X, key.Y)
	digest := DecisionDigest("APPROVE", []byte(`{"orderId":"ord_1"}`))
	good := assert(t, key, "localhost", "http://localhost:8080", "webauthn.get", digest, 0x05)
	p, err := VerifyAssertion(pub, digest, "localhost", good)
	if err != nil || p.Origin != "http://localhost:8080" {
		t.Fatalf("a good assertion: %+v %v", p, err)
	}
	if _, err := VerifyAssertion(pub, digest, "", good); err != nil {
		t.Fatalf("without an rp id to hold it to: %v", err)
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for name, c := range map[string]struct {
		a      Assertion
		digest []byte
		rpID   string
	}{
		"another decision's digest":      {good, DecisionDigest("REJECT", []byte(`{"orderId":"ord_1"}`)), "localhost"},
		"another relying party":          {good, digest, "example.com"},
		"a registration's client data":   {assert(t, key, "localhost", "http://localhost:8080", "webauthn.create", digest, 0x05), digest, "localhost"},
		"no user present":                {assert(t, key, "localhost", "http://localhost:8080", "webauthn.get", digest, 0x04), digest, "localhost"},
		"the user not verified":          {assert(t, key, "localhost", "http://localhost:8080", "webauthn.get", digest, 0x01), digest, "localhost"},
		"another key":                    {assert(t, other, "localhost", "http://localhost:8080", "webauthn.get", digest, 0x05), digest, "localhost"},
		"the signature of another thing": {Assertion{good.AuthenticatorData, good.ClientDataJSON, assert(t, key, "localhost", "x", "webauthn.get", digest, 5).Signature}, digest, "localhost"},
		"not base64":                     {Assertion{"!!", good.ClientDataJSON, good.Signature}, digest, "localhost"},
	} {
		if _, err := VerifyAssertion(pub, c.digest, c.rpID, c.a); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
