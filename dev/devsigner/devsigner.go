// Package devsigner is the development stand-in for an organisation's signing device.
package devsigner

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"log/slog"
	"time"

	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/keys"
	"github.com/opentreasury/treasury/internal/chain/solana"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
)

// id names the dev signer in the audit log and as the correlation id of what it signs.
const id = "dev-signer"

// Signer is the stand-in for a signing device of the dev bundle and the local cluster: it holds the keys of the
// autoSign wallets and signs their pending signing requests as they appear. It submits
// through the same service operation as POST /signing-requests/{id}/signature, as a
// device principal that may sign for its own wallets only.
//
// It is woken by the Wallet.SigningRequested events of the process's event follower (the
// way a real device follows the live channel), and looks again every fallback interval
// in case a wake-up was missed.
type Signer struct {
	store    *store.Store
	svc      *service.Service
	keys     map[string]*keys.Key
	log      *slog.Logger
	fallback time.Duration
	wake     chan struct{}
	// sent remembers requests already signed, until the workflow records them.
	sent map[string]bool
}

// New returns a signer holding keys, by wallet id. Subscribe it to the process's event
// follower, then Run it.
func New(s *store.Store, svc *service.Service, walletKeys map[string]*keys.Key, log *slog.Logger) *Signer {
	return &Signer{store: s, svc: svc, keys: walletKeys, log: log, fallback: 2 * time.Second, wake: make(chan struct{}, 1),
		sent: map[string]bool{}}
}

// The event follower's side (events.Subscriber): a signing request wakes the signer.

func (d *Signer) Wants() bool { return true }

func (d *Signer) Events(_ context.Context, evs []events.Event) {
	for _, ev := range evs {
		if ev.Name == events.WalletSigningRequested {
			d.poke()
			return
		}
	}
}

func (d *Signer) Control(context.Context, *events.Control) {}

func (d *Signer) Resynced(context.Context) { d.poke() }

func (d *Signer) poke() {
	select {
	case d.wake <- struct{}{}:
	default: // already woken; the next pass sees every pending request
	}
}

// Run signs until ctx ends.
func (d *Signer) Run(ctx context.Context) {
	walletIDs := make([]string, 0, len(d.keys))
	for id := range d.keys {
		walletIDs = append(walletIDs, id)
	}
	t := time.NewTicker(d.fallback)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		case <-t.C:
		}
		d.signPending(ctx, walletIDs)
	}
}

// pendingPage is how many of a wallet's pending requests one pass reads; a full page
// means more wait, and the signer goes on at once.
const pendingPage = 100

// signPending signs every pending request of the signer's wallets not signed yet. Each
// wallet's are listed on their own, through the wallet's index in id order: one list of
// all the wallets at once let SQLite's planner, once its statistics had seen a wallet
// whose requests were nearly all signed, read every signing request there is instead
// (a cost that grew with the history at every pass).
func (d *Signer) signPending(ctx context.Context, walletIDs []string) {
	more := false
	for _, walletID := range walletIDs {
		pending, err := d.store.ListSigningRequests(ctx, store.SigningFilter{WalletIDs: []string{walletID}, Status: orders.SigningPending, Limit: pendingPage})
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("dev signer could not list signing requests", "error", err.Error())
			}
			return
		}
		more = more || len(pending) == pendingPage
		for i := range pending {
			d.signOne(ctx, &pending[i], walletIDs)
		}
	}
	if more {
		d.poke() // more than a page waits: go on at once
	}
}

// signOne signs r, unless it has already.
func (d *Signer) signOne(ctx context.Context, r *store.SigningRequest, walletIDs []string) {
	if d.sent[r.ID] {
		return
	}
	digest, err := hex.DecodeString(r.Digest)
	if err != nil {
		return
	}
	message, err := hex.DecodeString(r.RawUnsignedTx)
	if err != nil {
		return
	}
	who := service.Caller{CorrelationID: id, Principal: &auth.Principal{OrgID: r.OrgID, App: r.App,
		Kind: auth.KindDevice, ID: id, Actions: []string{auth.ActionSign}, ResourceIDs: walletIDs}}
	if r.Scheme == chain.Ed25519 {
		// A Solana message is read instruction by instruction before it is signed, as a
		// signing device must: one it cannot read, or that does not say what its request
		// shows, is refused rather than signed.
		if err := solana.CheckRequest([]byte(r.UnsignedTx), message, r.Digest, d.keys[r.WalletID].SolanaAddress()); err != nil {
			if _, rerr := d.svc.RefuseSigningRequest(ctx, who, r.ID, "unreadable_message", err.Error()); rerr != nil && service.KindOf(rerr) != service.Conflict {
				d.log.Warn("dev signer could not refuse", "signingRequestId", r.ID, "error", rerr.Error())
				return
			}
			d.sent[r.ID] = true
			d.log.Warn("dev signer refused", "signingRequestId", r.ID, "orderId", r.OrderID, "error", err.Error())
			return
		}
	}
	signed, err := keys.Signed(r.Scheme, digest, message)
	if err != nil {
		d.log.Warn("dev signer could not sign", "signingRequestId", r.ID, "error", err.Error())
		return
	}
	signature, err := d.keys[r.WalletID].Sign(signed)
	if err != nil {
		d.log.Warn("dev signer could not sign", "signingRequestId", r.ID, "error", err.Error())
		return
	}
	sig := base64.StdEncoding.EncodeToString(signature)
	_, err = d.svc.SubmitSignature(ctx, who, r.ID, sig)
	if err != nil && service.KindOf(err) != service.Conflict {
		d.log.Warn("dev signer could not sign", "signingRequestId", r.ID, "error", err.Error())
		return
	}
	d.sent[r.ID] = true
	d.log.Info("dev signer signed", "signingRequestId", r.ID, "orderId", r.OrderID, "leg", r.Leg)
}
