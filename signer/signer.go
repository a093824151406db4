// Package signer is the reference paired signer: a device that holds one wallet's ed25519
// key, follows the organisation's pending signing requests over the API, checks each one
// and posts its signature. The service never sees the key.
package signer

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/opentreasury/treasury/orders"
)

// Config is what the signer needs.
type Config struct {
	// BaseURL of the service, e.g. http://127.0.0.1:8080.
	BaseURL string
	// Token is a key with the sign action on the app whose orders it signs.
	Token string
	// WalletID is the wallet whose key this is; other wallets' requests are left alone.
	WalletID string
	Key      ed25519.PrivateKey
	// Interval between polls of the pending requests.
	Interval time.Duration
	Log      *slog.Logger
	HTTP     *http.Client
}

// LoadKey reads a key file: the base64 ed25519 seed (as credentials.json gives it).
func LoadKey(path string) (ed25519.PrivateKey, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	seed, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%s does not hold a base64 ed25519 seed", path)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

type signingRequest struct {
	ID         string `json:"id"`
	WalletID   string `json:"walletId"`
	OrderID    string `json:"orderId"`
	Leg        string `json:"leg"`
	UnsignedTx string `json:"unsignedTx"`
	Digest     string `json:"digest"`
	Status     string `json:"status"`
}

func withDefaults(cfg Config) Config {
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 15 * time.Second}
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return cfg
}

// Run signs pending requests of the wallet until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	cfg = withDefaults(cfg)
	done := map[string]bool{}
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	for {
		if err := pass(ctx, cfg, done); err != nil && ctx.Err() == nil {
			cfg.Log.Warn("signer pass failed", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// pass signs every pending request of the wallet that it has not signed yet.
func pass(ctx context.Context, cfg Config, done map[string]bool) error {
	cursor := ""
	for {
		q := url.Values{"status": {orders.SigningPending}, "limit": {"200"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page struct {
			Data       []signingRequest `json:"data"`
			NextCursor *string          `json:"nextCursor"`
		}
		if err := call(ctx, cfg, "GET", "/api/v1/signing-requests?"+q.Encode(), nil, &page); err != nil {
			return err
		}
		for _, r := range page.Data {
			if r.WalletID != cfg.WalletID || done[r.ID] {
				continue
			}
			if err := signOne(ctx, cfg, r); err != nil {
				cfg.Log.Warn("not signed", "signingRequestId", r.ID, "error", err.Error())
				continue
			}
			done[r.ID] = true
			cfg.Log.Info("signed", "signingRequestId", r.ID, "orderId", r.OrderID, "leg", r.Leg)
		}
		if page.NextCursor == nil {
			return nil
		}
		cursor = *page.NextCursor
	}
}

// signOne checks that the digest is the SHA-256 of the transaction shown, and that the
// transaction is for this wallet's chain leg, then signs and posts.
func signOne(ctx context.Context, cfg Config, r signingRequest) error {
	sum := sha256.Sum256([]byte(r.UnsignedTx))
	if hex.EncodeToString(sum[:]) != r.Digest {
		return errors.New("the digest is not the SHA-256 of the unsigned transaction; refusing to sign")
	}
	var tx struct {
		Payload     json.RawMessage `json:"payload"`
		PayloadHash string          `json:"payloadHash"`
	}
	var payload struct {
		WalletID string `json:"walletId"`
	}
	if err := json.Unmarshal([]byte(r.UnsignedTx), &tx); err != nil || json.Unmarshal(tx.Payload, &payload) != nil {
		return errors.New("the unsigned transaction is not readable; refusing to sign")
	}
	if payload.WalletID != cfg.WalletID {
		return errors.New("the unsigned transaction is not for this wallet; refusing to sign")
	}
	// The order's payload hash is what the approvers approved: the payload shown must be it.
	if ph := sha256.Sum256(tx.Payload); hex.EncodeToString(ph[:]) != tx.PayloadHash {
		return errors.New("the payload does not match its payload hash; refusing to sign")
	}
	digest, _ := hex.DecodeString(r.Digest)
	sig := base64.StdEncoding.EncodeToString(ed25519.Sign(cfg.Key, digest))
	body, _ := json.Marshal(map[string]string{"signature": sig})
	return call(ctx, cfg, "POST", "/api/v1/signing-requests/"+r.ID+"/signature", body, nil)
}

func call(ctx context.Context, cfg Config, method, path string, body []byte, into any) error {
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(string(body))
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(cfg.BaseURL, "/")+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+cfg.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := cfg.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if resp.StatusCode >= 300 {
		var p struct {
			Code   string `json:"code"`
			Detail string `json:"detail"`
		}
		_ = json.Unmarshal(raw, &p)
		return fmt.Errorf("%s %s: %d %s %s", method, path, resp.StatusCode, p.Code, p.Detail)
	}
	if into != nil {
		return json.Unmarshal(raw, into)
	}
	return nil
}
