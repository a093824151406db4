package service_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	. "github.com/opentreasury/treasury/internal/service"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/chain/keys"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
	"github.com/opentreasury/treasury/workflows"
)

// recorder is Temporal and the bus as the service sees them, writing down what it is told.
type recorder struct {
	mu         sync.Mutex
	signatures []workflows.Signature
	refusals   []workflows.Refusal
	controls   []events.Control
}

func (r *recorder) Submit(context.Context, workflows.Submission) (workflows.PolicyDecision, error) {
	return workflows.PolicyDecision{Allowed: true}, nil
}

func (r *recorder) Start(context.Context, workflows.Submission) error { return nil }

func (r *recorder) SubmitOutcome(context.Context, string, string) (workflows.PolicyDecision, error) {
	return workflows.PolicyDecision{}, workflows.ErrUnknownSubmission
}

func (r *recorder) SignalApproval(context.Context, string, workflows.ApprovalDecision) error {
	return nil
}

func (r *recorder) SignalSignature(_ context.Context, _ string, s workflows.Signature) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.signatures = append(r.signatures, s)
	return nil
}

func (r *recorder) SignalRefusal(_ context.Context, _ string, f workflows.Refusal) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refusals = append(r.refusals, f)
	return nil
}

func (r *recorder) Publish(_ context.Context, c events.Control) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.controls = append(r.controls, c)
	return nil
}

func (r *recorder) Subscribe(func(events.Notice)) func() { return func() {} }

type fixture struct {
	svc   *Service
	rec   *recorder
	creds *seed.Credentials
	keys  map[string]*keys.Key
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureOn(t, storetest.NewSQLite(t))
}

// newFixtureOn is newFixture on a store of the test's choice.
func newFixtureOn(t *testing.T, s *store.Store) *fixture {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	creds, err := seed.Ensure(context.Background(), s, dir, seed.URLs{}, log)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := seed.LoadSignerKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	return &fixture{svc: &Service{Store: s, Workflows: rec, Bus: rec, Log: log}, rec: rec, creds: creds, keys: keys}
}

// as is the caller a seeded key authenticates as.
func (f *fixture) as(t *testing.T, token string) Caller {
	t.Helper()
	p, err := auth.NewAuthenticator(f.svc.Store).Authenticate(context.Background(), token)
	if err != nil {
		t.Fatal(err)
	}
	return Caller{Principal: p, CorrelationID: "corr-" + t.Name()}
}

// signingRequest makes a pending signing request for a payment from a wallet, as the
// workflow would.
func (f *fixture) signingRequest(t *testing.T, walletID string) *store.SigningRequest {
	t.Helper()
	ctx := context.Background()
	o, err := f.svc.CreateOrder(ctx, f.as(t, f.creds.Keys["pay"].SK), orders.Domains[0], fmt.Appendf(nil,
		`{"walletId":%q,"asset":"USDC","amount":"5","destination":{"address":"0x1111111111111111111111111111111111111111"}}`, walletID), nil)
	if err != nil {
		t.Fatal(err)
	}
	digest := hex.EncodeToString(make([]byte, 32))
	r, err := f.svc.Store.CreateSigningRequest(ctx, &store.SigningRequest{ID: ids.New(ids.SigningRequest), OrgID: o.OrgID,
		App: o.App, Domain: o.Domain, OrderID: o.ID, Leg: "TRANSFER", WalletID: walletID, Chain: o.Chain, UnsignedTx: "{}",
		Digest: digest, Status: orders.SigningPending, CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A signing device inside the service signs through the same operation as the API, for
// the wallets it holds and no others, and the audit log names it.
func TestADeviceSignsItsOwnWalletsOnly(t *testing.T) {
	f := newFixture(t)
	mine, other := f.creds.Wallets[0].ID, f.creds.Wallets[1].ID
	device := Caller{CorrelationID: "dev-signer", Principal: &auth.Principal{OrgID: f.creds.OrgID, App: "pay",
		Kind: auth.KindDevice, ID: "dev-signer", Actions: []string{auth.ActionSign}, ResourceIDs: []string{mine}}}
	ctx := context.Background()

	theirs := f.signingRequest(t, other)
	if _, err := f.svc.SubmitSignature(ctx, device, theirs.ID, "AA=="); KindOf(err) != NotFound {
		t.Fatalf("a request of a wallet the device does not hold: %v, want NotFound", err)
	}

	ours := f.signingRequest(t, mine)
	if _, err := f.svc.SubmitSignature(ctx, device, ours.ID, base64.StdEncoding.EncodeToString(make([]byte, 64))); KindOf(err) != InvalidSignature {
		t.Fatalf("a signature by another key: %v, want InvalidSignature", err)
	}
	digest, _ := hex.DecodeString(ours.Digest)
	raw, err := f.keys[mine].Sign(digest)
	if err != nil {
		t.Fatal(err)
	}
	sig := base64.StdEncoding.EncodeToString(raw)
	if _, err := f.svc.SubmitSignature(ctx, device, ours.ID, sig); err != nil {
		t.Fatal(err)
	}
	if len(f.rec.signatures) != 1 || f.rec.signatures[0].SigningRequestID != ours.ID || f.rec.signatures[0].CorrelationID != "dev-signer" {
		t.Fatalf("signalled %+v", f.rec.signatures)
	}
	audit, err := f.svc.Store.ListAudit(ctx, f.creds.OrgID, []string{"pay"}, nil, "", 10)
	if err != nil || len(audit) == 0 || audit[0].Action != "signature.submitted" || audit[0].ActorType != "device" || audit[0].ActorID != "dev-signer" {
		t.Fatalf("audit %+v %v", audit, err)
	}
}

// Keys and OAuth clients are revoked by one flow: a repeated revoke answers as the first
// and announces the revocation again, so a retry repairs an announcement that was lost.
func TestRevokingAgainAnnouncesAgain(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dev := f.as(t, f.creds.Keys["pay"].SK)
	key, _, err := f.svc.CreateAPIKey(ctx, dev, KeyRequest{Kind: auth.KindResource, Actions: []string{auth.ActionRead}})
	if err != nil {
		t.Fatal(err)
	}
	client, _, err := f.svc.CreateOAuthClient(ctx, dev, OAuthClientRequest{Scopes: "pay:read"})
	if err != nil {
		t.Fatal(err)
	}
	var revokedAt []*time.Time
	for range 2 {
		k, err := f.svc.RevokeAPIKey(ctx, dev, key.ID)
		if err != nil {
			t.Fatal(err)
		}
		oc, err := f.svc.RevokeOAuthClient(ctx, dev, client.ID)
		if err != nil {
			t.Fatal(err)
		}
		revokedAt = append(revokedAt, k.RevokedAt, oc.RevokedAt)
	}
	for i, at := range revokedAt {
		if at == nil || !at.Equal(*revokedAt[i%2]) {
			t.Fatalf("revokedAt %v: the second revoke must answer as the first", revokedAt)
		}
	}
	var announced []string
	for _, c := range f.rec.controls {
		if c.Kind == events.ControlCredentialRevoked {
			announced = append(announced, c.CredentialID)
		}
	}
	if fmt.Sprint(announced) != fmt.Sprint([]string{key.ID, client.ID, key.ID, client.ID}) {
		t.Fatalf("announced %v", announced)
	}
	if _, err := f.svc.RevokeAPIKey(ctx, f.as(t, f.creds.Keys["trade"].SK), key.ID); KindOf(err) != NotFound {
		t.Fatalf("another app's revoke: %v, want NotFound", err)
	}
}
