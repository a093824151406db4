package service_test

import (
	"context"
	. "github.com/opentreasury/treasury/internal/service"
	"testing"

	"github.com/opentreasury/treasury/internal/auth"
)

// Admission to the live channel is the service's: which credentials may connect at all,
// and to which configs, whatever front end upgrades the connection.
func TestAdmitLiveToOwnConfigsOnly(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	authn := auth.NewAuthenticator(f.svc.Store)
	cfg, err := f.svc.CreateWebSocketConfig(ctx, f.as(t, f.creds.Keys["pay"].SK), []string{"Order.*"})
	if err != nil {
		t.Fatal(err)
	}

	for name, token := range map[string]string{"unknown": "sk_nope", "a session token": "ses_nope"} {
		if _, err := LiveCaller(ctx, authn, token); KindOf(err) != Unauthenticated {
			t.Errorf("%s: %v", name, err)
		}
	}
	pk, err := LiveCaller(ctx, authn, f.creds.Keys["pay"].PK)
	if err != nil {
		t.Fatal(err)
	}
	sub, to, err := f.svc.AdmitLive(ctx, pk, cfg.ID)
	if err != nil || sub.ID != cfg.ID || !sub.Enabled || to.CredentialID != pk.ID || to.SigningDevice {
		t.Fatalf("pay's pk_ key on pay's config: %+v %+v %v", sub, to, err)
	}

	trade, err := LiveCaller(ctx, authn, f.creds.Keys["trade"].SK)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.svc.AdmitLive(ctx, trade, cfg.ID); KindOf(err) != PermissionDenied {
		t.Errorf("another app's key: %v", err)
	}
	if _, _, err := f.svc.AdmitLive(ctx, pk, "wsc_nope"); KindOf(err) != NotFound {
		t.Errorf("an unknown config: %v", err)
	}
	if _, _, err := f.svc.AdmitLive(ctx, pk, ""); KindOf(err) != Invalid {
		t.Errorf("no config: %v", err)
	}
	if err := f.svc.DeleteWebSocketConfig(ctx, f.as(t, f.creds.Keys["pay"].SK), cfg.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.svc.AdmitLive(ctx, pk, cfg.ID); KindOf(err) != NotFound {
		t.Errorf("a deleted config: %v", err)
	}

	person := &auth.Principal{OrgID: f.creds.OrgID, Kind: auth.KindUser, ID: "usr_x"}
	if _, err := LiveCaller(ctx, fixedAuthn{person}, "anything"); KindOf(err) != PermissionDenied {
		t.Errorf("a person: %v", err)
	}
	scopeless := &auth.Principal{OrgID: f.creds.OrgID, App: "pay", Kind: auth.KindAccessToken, ID: "oac_x"}
	if _, err := LiveCaller(ctx, fixedAuthn{scopeless}, "anything"); KindOf(err) != PermissionDenied {
		t.Errorf("an access token without a scope: %v", err)
	}
}

// fixedAuthn authenticates every token as its principal.
type fixedAuthn struct{ p *auth.Principal }

func (a fixedAuthn) Authenticate(context.Context, string) (*auth.Principal, error) { return a.p, nil }
