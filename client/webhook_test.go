package client

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/opentreasury/treasury/webhook"
)

func TestVerifyWebhook(t *testing.T) {
	secret, _ := webhook.NewSecret()
	body := []byte(`{"id":"evt_1","event":"Order.Confirmed"}`)
	h := http.Header{}
	if err := webhook.Headers(h, []string{secret}, "msg_1", "Order.Confirmed", "corr", time.Now(), body); err != nil {
		t.Fatal(err)
	}
	if err := VerifyWebhook(secret, h, body); err != nil {
		t.Fatalf("a fresh message: %v", err)
	}
	if err := VerifyWebhook(secret, h, []byte(`{"id":"evt_2"}`)); !errors.Is(err, webhook.ErrNoSignature) {
		t.Fatalf("another body: %v", err)
	}
	old := http.Header{}
	_ = webhook.Headers(old, []string{secret}, "msg_1", "Order.Confirmed", "corr", time.Now().Add(-10*time.Minute), body)
	if err := VerifyWebhook(secret, old, body); !errors.Is(err, webhook.ErrTimestamp) {
		t.Fatalf("a message 10 minutes old: %v", err)
	}
}
