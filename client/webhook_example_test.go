package client_test

import (
	"encoding/json"
	"io"
	"log"
	"net/http"
	"os"

	"github.com/opentreasury/treasury/client"
)

// A webhook receiver: verify, act on each message once, answer 2xx.
func ExampleVerifyWebhook() {
	secret := os.Getenv("TREASURY_WEBHOOK_SECRET") // whsec_…, shown when the webhook was created
	seen := map[string]bool{}                      // keep this in your database
	http.HandleFunc("/treasury/webhooks", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil || client.VerifyWebhook(secret, r.Header, body) != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		if id := r.Header.Get("webhook-id"); !seen[id] {
			seen[id] = true
			var event struct {
				Event   string `json:"event"`
				OrderID string `json:"orderId"`
			}
			_ = json.Unmarshal(body, &event)
			log.Printf("%s %s", event.Event, event.OrderID)
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
