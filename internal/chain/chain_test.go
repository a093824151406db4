package chain

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestRedactURLKeepsTheURLOut(t *testing.T) {
	err := &url.Error{Op: "Post", URL: "https://mainnet.example/v3/provider-key", Err: errors.New("connection refused")}
	if got := RedactURL(err); strings.Contains(got, "provider-key") || !strings.Contains(got, "connection refused") {
		t.Fatalf("%q", got)
	}
	if got := RedactURL(errors.New("plain")); got != "plain" {
		t.Fatalf("%q", got)
	}
}
