package service_test

import (
	"context"
	"errors"
	. "github.com/opentreasury/treasury/internal/service"
	"testing"
	"time"

	"github.com/opentreasury/treasury/internal/approvers"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/store"
)

// A person's passkeys are theirs: another person of the organisation, or a key, can
// neither list nor revoke them; the person revokes their own, once, audited.
func TestPasskeysArePeoplesOwn(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	person := func(id string) Caller {
		return Caller{Principal: &auth.Principal{OrgID: f.creds.OrgID, Kind: auth.KindUser, ID: id, Person: id,
			Grants: map[string][]string{"pay": {auth.ActionApprove}}}, CorrelationID: "c"}
	}
	alice, bob := person("usr_alice"), person("usr_bob")
	cred := "Y3JlZGVudGlhbA"
	key := &store.ApproverKey{ID: "apk_alice", OrgID: f.creds.OrgID, Scheme: approvers.P256, PublicKey: "AAAA", Kind: approvers.KindPasskey,
		CredentialID: &cred, UserID: &alice.Person, CreatedAt: time.Now()}
	if err := f.svc.Store.CreateApproverKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	if list, err := f.svc.ListPasskeys(ctx, bob); err != nil || len(list) != 0 {
		t.Fatalf("bob lists %+v %v", list, err)
	}
	if err := f.svc.RevokePasskey(ctx, bob, key.ID); KindOf(err) != NotFound {
		t.Fatalf("bob revoking alice's passkey: %v", err)
	}
	bot := Caller{Principal: &auth.Principal{OrgID: f.creds.OrgID, App: "pay", Kind: auth.KindResource, ID: "key_bot",
		Actions: []string{auth.ActionApprove}}}
	if _, err := f.svc.ListPasskeys(ctx, bot); KindOf(err) != PermissionDenied {
		t.Fatalf("a key listing passkeys: %v", err)
	}
	if _, err := f.svc.BeginPasskeyRegistration(ctx, alice, "alice@example.com", "pw"); KindOf(err) != Conflict {
		t.Fatalf("a registration where passkeys are not configured: %v", err)
	}
	if list, err := f.svc.ListPasskeys(ctx, alice); err != nil || len(list) != 1 || list[0].ID != key.ID {
		t.Fatalf("alice lists %+v %v", list, err)
	}
	if err := f.svc.RevokePasskey(ctx, alice, key.ID); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.RevokePasskey(ctx, alice, key.ID); err != nil {
		t.Fatalf("revoking again: %v", err)
	}
	got, err := f.svc.Store.ApproverKey(ctx, f.creds.OrgID, key.ID)
	if err != nil || got.RevokedAt == nil {
		t.Fatalf("after the revocation: %+v %v", got, err)
	}
	if _, err := f.svc.Store.TakePasskeyRegistration(ctx, alice.Person, time.Now()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a registration no one started: %v", err)
	}
}

// A registration's challenge serves once, and not after it expired.
func TestAPasskeyRegistrationServesOnce(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	now := time.Now()
	if err := f.svc.Store.SavePasskeyRegistration(ctx, "usr_a", "first", now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Store.SavePasskeyRegistration(ctx, "usr_a", "second", now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if s, err := f.svc.Store.TakePasskeyRegistration(ctx, "usr_a", now); err != nil || s != "second" {
		t.Fatalf("took %q %v", s, err)
	}
	if _, err := f.svc.Store.TakePasskeyRegistration(ctx, "usr_a", now); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("taken twice: %v", err)
	}
	_ = f.svc.Store.SavePasskeyRegistration(ctx, "usr_a", "late", now.Add(time.Minute))
	if _, err := f.svc.Store.TakePasskeyRegistration(ctx, "usr_a", now.Add(2*time.Minute)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an expired registration: %v", err)
	}
}
