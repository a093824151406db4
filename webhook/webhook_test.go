package webhook

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The Standard Webhooks reference vector: a receiver's existing library must verify what
// the service sends.
const (
	vectorSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTS     = 1614265330
	vectorBody   = `{"test": 2432232314}`
	vectorSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestSignMatchesTheStandardWebhooksVector(t *testing.T) {
	got, err := Sign([]string{vectorSecret}, vectorID, vectorTS, []byte(vectorBody))
	if err != nil || got != vectorSig {
		t.Fatalf("Sign = %q, %v; want %q", got, err, vectorSig)
	}
}

func vectorHeader(sig string) http.Header {
	h := http.Header{}
	h.Set(HeaderID, vectorID)
	h.Set(HeaderTimestamp, "1614265330")
	h.Set(HeaderSignature, sig)
	return h
}

func TestVerify(t *testing.T) {
	at := time.Unix(vectorTS, 0)
	other, _ := NewSecret()
	cases := []struct {
		name string
		sig  string
		now  time.Time
		body string
		want error
	}{
		{"the vector", vectorSig, at, vectorBody, nil},
		{"one of several signatures (a rotation)", "v1,bm9wZQ== " + vectorSig, at, vectorBody, nil},
		{"4 minutes late", vectorSig, at.Add(4 * time.Minute), vectorBody, nil},
		{"6 minutes late", vectorSig, at.Add(6 * time.Minute), vectorBody, ErrTimestamp},
		{"6 minutes early", vectorSig, at.Add(-6 * time.Minute), vectorBody, ErrTimestamp},
		{"another body", vectorSig, at, `{"test": 2432232315}`, ErrNoSignature},
		{"another version", strings.Replace(vectorSig, "v1,", "v2,", 1), at, vectorBody, ErrNoSignature},
		{"no signature", "", at, vectorBody, ErrNoSignature},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := Verify(vectorSecret, vectorHeader(tc.sig), []byte(tc.body), tc.now); !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
	if err := Verify(other, vectorHeader(vectorSig), []byte(vectorBody), at); !errors.Is(err, ErrNoSignature) {
		t.Fatalf("another secret: %v", err)
	}
}

// While a secret is rotated both sign, and a receiver holding either verifies.
func TestHeadersSignWithEverySecret(t *testing.T) {
	old, _ := NewSecret()
	fresh, _ := NewSecret()
	if !strings.HasPrefix(fresh, SecretPrefix) || len(fresh) != len(SecretPrefix)+44 {
		t.Fatalf("secret %q", fresh)
	}
	h := http.Header{}
	now := time.Now()
	body := []byte(`{"id":"evt_1"}`)
	if err := Headers(h, []string{fresh, old}, "msg_1", "Order.Created", "corr-1", now, body); err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Fields(h.Get(HeaderSignature))); n != 2 {
		t.Fatalf("%d signatures in %q", n, h.Get(HeaderSignature))
	}
	for _, s := range []string{old, fresh} {
		if err := Verify(s, h, body, now); err != nil {
			t.Fatalf("a receiver holding one of the secrets: %v", err)
		}
	}
	if h.Get(HeaderEventName) != "Order.Created" || h.Get(HeaderCorrelationID) != "corr-1" || h.Get(HeaderID) != "msg_1" {
		t.Fatalf("headers %v", h)
	}
}

func TestBoxSealsAndOpens(t *testing.T) {
	k1, _ := NewKey()
	k2, _ := NewKey()
	key1, err := ParseKey(k1)
	if err != nil {
		t.Fatal(err)
	}
	key2, _ := ParseKey(k2)
	b1, _ := NewBox(key1)
	b2, _ := NewBox(key2)
	secret, _ := NewSecret()
	sealed, err := b1.Seal(secret)
	if err != nil || strings.Contains(sealed, strings.TrimPrefix(secret, SecretPrefix)) {
		t.Fatalf("sealed %q %v", sealed, err)
	}
	if again, _ := b1.Seal(secret); again == sealed {
		t.Fatal("two seals of one secret are equal: the nonce is not fresh")
	}
	if got, err := b1.Open(sealed); err != nil || got != secret {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if _, err := b2.Open(sealed); !errors.Is(err, ErrSealed) {
		t.Fatalf("another key opened it: %v", err)
	}
	if _, err := ParseKey("c2hvcnQ="); err == nil {
		t.Fatal("a short key was accepted")
	}
}
