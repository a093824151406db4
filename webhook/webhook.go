// Package webhook is the message format of the service's webhooks, the Standard Webhooks
// specification: whsec_ secrets, the webhook-id, webhook-timestamp and webhook-signature
// headers, and signing and verifying them; and the guard of where a webhook may be sent.
// It imports none of the service's packages, so that the dispatcher that signs, the
// service that vets a URL and the Go client that verifies share one implementation.
package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names of a message (Standard Webhooks), and the two the service adds.
const (
	HeaderID            = "webhook-id"
	HeaderTimestamp     = "webhook-timestamp"
	HeaderSignature     = "webhook-signature"
	HeaderEventName     = "X-Event-Name"
	HeaderCorrelationID = "X-Correlation-Id"
)

// SecretPrefix starts every signing secret: whsec_ and the base64 of 32 random bytes.
const SecretPrefix = "whsec_"

// secretBytes is the length of a secret's key.
const secretBytes = 32

// Tolerance is how far a message's timestamp may be from the receiver's clock.
const Tolerance = 5 * time.Minute

// NewSecret returns a fresh signing secret.
func NewSecret() (string, error) {
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// key is the HMAC key of a secret: the bytes its base64 encodes.
func key(secret string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil || len(b) == 0 {
		return nil, errors.New("webhook: a secret is whsec_ followed by base64")
	}
	return b, nil
}

// mac is the base64 HMAC-SHA256 of "id.timestamp.body" under a secret, timestamp being
// the webhook-timestamp header as sent.
func mac(secret, id, timestamp string, body []byte) (string, error) {
	k, err := key(secret)
	if err != nil {
		return "", err
	}
	h := hmac.New(sha256.New, k)
	h.Write([]byte(id + "." + timestamp + "."))
	h.Write(body)
	return base64.StdEncoding.EncodeToString(h.Sum(nil)), nil
}

// Sign is the webhook-signature header of a message: one "v1,<signature>" for each secret,
// space-separated (two while a rotation lets the old secret sign too).
func Sign(secrets []string, id string, timestamp int64, body []byte) (string, error) {
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		m, err := mac(s, id, strconv.FormatInt(timestamp, 10), body)
		if err != nil {
			return "", err
		}
		sigs = append(sigs, "v1,"+m)
	}
	return strings.Join(sigs, " "), nil
}

// Headers sets a message's headers on h: its id, the time it is sent, its signatures,
// the event name and the correlation id of what caused it.
func Headers(h http.Header, secrets []string, id, event, correlationID string, at time.Time, body []byte) error {
	ts := at.Unix()
	sig, err := Sign(secrets, id, ts, body)
	if err != nil {
		return err
	}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(HeaderSignature, sig)
	h.Set(HeaderEventName, event)
	if correlationID != "" {
		h.Set(HeaderCorrelationID, correlationID)
	}
	h.Set("Content-Type", "application/json")
	return nil
}

// Errors of Verify.
var (
	ErrNoSignature = errors.New("webhook: no valid signature")
	ErrTimestamp   = errors.New("webhook: timestamp missing or too far from now")
)

// Verify checks a received message against a secret: its timestamp is within Tolerance of
// now, and one of its v1 signatures is the HMAC of its id, timestamp and body (compared in
// constant time). The headers are those Headers sets. The signature covers the timestamp
// header exactly as received: "+1732000000" or "01732000000" is not what was signed.
func Verify(secret string, h http.Header, body []byte, now time.Time) error {
	ts, err := strconv.ParseInt(h.Get(HeaderTimestamp), 10, 64)
	if err != nil {
		return ErrTimestamp
	}
	if d := now.Sub(time.Unix(ts, 0)); d > Tolerance || d < -Tolerance {
		return ErrTimestamp
	}
	want, err := mac(secret, h.Get(HeaderID), h.Get(HeaderTimestamp), body)
	if err != nil {
		return err
	}
	for _, sig := range strings.Fields(h.Get(HeaderSignature)) {
		version, value, ok := strings.Cut(sig, ",")
		if ok && version == "v1" && hmac.Equal([]byte(value), []byte(want)) {
			return nil
		}
	}
	return ErrNoSignature
}
