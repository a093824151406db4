package client

import (
	"net/http"
	"time"

	"github.com/opentreasury/treasury/webhook"
)

// VerifyWebhook checks a webhook message the service sent to your endpoint (Standard
// Webhooks): header is the request's headers, body its raw body, secret the whsec_ secret
// shown when the webhook was created or its secret rotated. It returns nil when one of the
// message's signatures is valid and its timestamp is within 5 minutes of now. Read the body
// whole before calling it, and decode it only if it verifies. The webhook-id header
// identifies the message: it is the same on every retry and redelivery, so a receiver
// that remembers the ids it has handled acts on each message once.
func VerifyWebhook(secret string, header http.Header, body []byte) error {
	return webhook.Verify(secret, header, body, time.Now())
}
