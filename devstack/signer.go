package devstack

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"log/slog"
	"time"

	"github.com/opentreasury/treasury/api"
	"github.com/opentreasury/treasury/orders"
	"github.com/opentreasury/treasury/store"
)

// devSigner is the dev bundle's stand-in for a signing device: it holds the keys of the
// autoSign wallets and signs their pending signing requests as they appear. It goes
// through the same verification and signal as POST /signing-requests/{id}/signature.
type devSigner struct {
	store     *store.Store
	workflows api.OrderWorkflows
	keys      map[string]ed25519.PrivateKey
	log       *slog.Logger
	every     time.Duration
	// sent remembers requests already signed, until the workflow records them.
	sent map[string]bool
}

func (d *devSigner) run(ctx context.Context) {
	walletIDs := make([]string, 0, len(d.keys))
	for id := range d.keys {
		walletIDs = append(walletIDs, id)
	}
	t := time.NewTicker(d.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pending, err := d.store.ListSigningRequests(ctx, store.SigningFilter{WalletIDs: walletIDs, Status: orders.SigningPending, Limit: 100})
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("dev signer could not list signing requests", "error", err.Error())
			}
			continue
		}
		for i := range pending {
			r := &pending[i]
			if d.sent[r.ID] {
				continue
			}
			digest, err := hex.DecodeString(r.Digest)
			if err != nil {
				continue
			}
			sig := base64.StdEncoding.EncodeToString(ed25519.Sign(d.keys[r.WalletID], digest))
			err = api.SubmitSignature(ctx, d.store, d.workflows, r, sig, "dev-signer")
			if err != nil && !errors.Is(err, api.ErrNotPending) {
				d.log.Warn("dev signer could not sign", "signingRequestId", r.ID, "error", err.Error())
				continue
			}
			d.sent[r.ID] = true
			d.log.Info("dev signer signed", "signingRequestId", r.ID, "orderId", r.OrderID, "leg", r.Leg)
		}
	}
}
