package devstack

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"log/slog"
	"time"

	"github.com/opentreasury/treasury/auth"
	"github.com/opentreasury/treasury/orders"
	"github.com/opentreasury/treasury/service"
	"github.com/opentreasury/treasury/store"
)

// devSignerID names the dev signer in the audit log and as the correlation id of what it
// signs.
const devSignerID = "dev-signer"

// devSigner is the dev bundle's stand-in for a signing device: it holds the keys of the
// autoSign wallets and signs their pending signing requests as they appear. It submits
// through the same service operation as POST /signing-requests/{id}/signature, as a
// device principal that may sign for its own wallets only.
type devSigner struct {
	store *store.Store
	svc   *service.Service
	keys  map[string]ed25519.PrivateKey
	log   *slog.Logger
	every time.Duration
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
			who := service.Caller{CorrelationID: devSignerID, Principal: &auth.Principal{OrgID: r.OrgID, App: r.App,
				Kind: auth.KindDevice, ID: devSignerID, Actions: []string{auth.ActionSign}, ResourceIDs: walletIDs}}
			_, err = d.svc.SubmitSignature(ctx, who, r.ID, sig)
			if err != nil && service.KindOf(err) != service.Conflict {
				d.log.Warn("dev signer could not sign", "signingRequestId", r.ID, "error", err.Error())
				continue
			}
			d.sent[r.ID] = true
			d.log.Info("dev signer signed", "signingRequestId", r.ID, "orderId", r.OrderID, "leg", r.Leg)
		}
	}
}
