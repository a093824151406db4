package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// referenceSignature is the Standard Webhooks signature restated independently: the
// base64 HMAC-SHA256, under the secret's decoded bytes, of the id, the timestamp header
// exactly as sent, and the body, joined by dots.
func referenceSignature(key []byte, id, timestamp string, body []byte) string {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id + "." + timestamp + "."))
	h.Write(body)
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

func messageHeaders(id, timestamp, signature string) http.Header {
	h := http.Header{}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, timestamp)
	h.Set(HeaderSignature, signature)
	return h
}

// FuzzVerify holds the signer and the verifier to the Standard Webhooks spec: what Headers
// signs verifies, under each secret it signs with; a change to the body, the id, the
// timestamp header or the signature fails; and arbitrary headers never panic, fail only
// with ErrTimestamp or ErrNoSignature, and pass only when they carry the signature of
// exactly what was received.
func FuzzVerify(f *testing.F) {
	// The Standard Webhooks test vector (secret whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw).
	vector, _ := base64.StdEncoding.DecodeString("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	f.Add(vector, "msg_p5jXN8AQM9LWM0D4loKWxJek", int64(1614265330),
		[]byte(`{"test": 2432232314}`), "1614265330", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", uint16(0))
	f.Add([]byte{1}, "msg_1", int64(1732000000), []byte(`{}`), "+1732000000", "v1,bad v1,alsobad", uint16(7))
	f.Add([]byte("k"), "msg_2", int64(1732000000), []byte(``), "01732000000", "v2,abc", uint16(300))
	f.Add([]byte("key"), "", int64(0), []byte(`x`), " 0", "", uint16(65535))
	f.Fuzz(func(t *testing.T, key []byte, id string, ts int64, body []byte, rawTimestamp, rawSignature string, pick uint16) {
		if len(key) == 0 {
			key = []byte{0}
		}
		ts %= 1 << 40 // a time within a few thousand years either side of 1970
		secret := SecretPrefix + base64.StdEncoding.EncodeToString(key)
		at := time.Unix(ts, 0)

		// Sign, then verify.
		h := http.Header{}
		if err := Headers(h, []string{secret}, id, "Order.Confirmed", "", at, body); err != nil {
			t.Fatalf("sign: %v", err)
		}
		if h.Get(HeaderTimestamp) != strconv.FormatInt(ts, 10) {
			t.Fatalf("webhook-timestamp %q, want %d", h.Get(HeaderTimestamp), ts)
		}
		sig := referenceSignature(key, id, h.Get(HeaderTimestamp), body)
		if h.Get(HeaderSignature) != "v1,"+sig {
			t.Fatalf("webhook-signature %q, want v1,%s", h.Get(HeaderSignature), sig)
		}
		if err := Verify(secret, h, body, at); err != nil {
			t.Fatalf("a signed message does not verify: %v", err)
		}
		if err := Verify(secret, h, body, at.Add(Tolerance)); err != nil {
			t.Fatalf("a message at the edge of the tolerance does not verify: %v", err)
		}
		if err := Verify(secret, h, body, at.Add(Tolerance+time.Second)); !errors.Is(err, ErrTimestamp) {
			t.Fatalf("a stale message: %v, want ErrTimestamp", err)
		}
		// During a rotation both secrets sign, and either verifies.
		other := SecretPrefix + base64.StdEncoding.EncodeToString(append([]byte("other"), key...))
		rotated := http.Header{}
		if err := Headers(rotated, []string{other, secret}, id, "Order.Confirmed", "", at, body); err != nil {
			t.Fatal(err)
		}
		if Verify(secret, rotated, body, at) != nil || Verify(other, rotated, body, at) != nil {
			t.Fatal("a message signed with both secrets of a rotation does not verify under each")
		}
		if err := Verify(other, h, body, at); !errors.Is(err, ErrNoSignature) {
			t.Fatalf("another secret verifies: %v", err)
		}

		// Any one change fails.
		i := int(pick)
		flip := func(b []byte) []byte {
			out := append([]byte(nil), b...)
			if len(out) == 0 {
				return []byte{byte(pick)}
			}
			out[i%len(out)] ^= 1 << (i / len(out) % 8)
			return out
		}
		changed := func(what string, h http.Header, body []byte) {
			t.Helper()
			if err := Verify(secret, h, body, at); err == nil {
				t.Fatalf("a message with %s verifies: id %q, timestamp %q, signature %q, body %q", what,
					h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature), body)
			}
		}
		changed("another body", h, flip(body))
		changed("a longer body", h, append(append([]byte(nil), body...), byte(pick)))
		if newID := string(flip([]byte(id))); newID != id {
			changed("another id", messageHeaders(newID, h.Get(HeaderTimestamp), h.Get(HeaderSignature)), body)
		}
		changed("another id", messageHeaders(id+"x", h.Get(HeaderTimestamp), h.Get(HeaderSignature)), body)
		changed("a later timestamp", messageHeaders(id, strconv.FormatInt(ts+1, 10), h.Get(HeaderSignature)), body)
		if rawTimestamp != h.Get(HeaderTimestamp) {
			changed("another timestamp header", messageHeaders(id, rawTimestamp, h.Get(HeaderSignature)), body)
		}
		for _, s := range []string{"v1," + string(flip([]byte(sig))), "v2," + sig, "V1," + sig, "v1" + sig, sig, "v1,"} {
			if s != "v1,"+sig {
				changed("signature "+s, messageHeaders(id, h.Get(HeaderTimestamp), s), body)
			}
		}

		// Arbitrary headers: no panic, a known error, and a pass only with the signature of
		// what was received, on time.
		err := Verify(secret, messageHeaders(id, rawTimestamp, rawSignature), body, at)
		if err != nil && !errors.Is(err, ErrTimestamp) && !errors.Is(err, ErrNoSignature) {
			t.Fatalf("headers %q %q: %v", rawTimestamp, rawSignature, err)
		}
		if err == nil {
			got, perr := strconv.ParseInt(rawTimestamp, 10, 64)
			if perr != nil || got < ts-int64(Tolerance/time.Second) || got > ts+int64(Tolerance/time.Second) ||
				!slices.Contains(strings.Fields(rawSignature), "v1,"+referenceSignature(key, id, rawTimestamp, body)) {
				t.Fatalf("headers %q %q verified without the signature of what was received", rawTimestamp, rawSignature)
			}
		}
		// A secret that is not whsec_ and base64 is an error of its own, never a pass.
		if err := Verify(SecretPrefix+"%%%", h, body, at); err == nil {
			t.Fatal("a malformed secret verifies")
		}
	})
}
