package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

// operator is the service as the operator's commands use it.
func operator(s *store.Store, now func() time.Time) *service.Service {
	return &service.Service{Store: s, Log: slog.New(slog.DiscardHandler), Now: now}
}

// An organisation the operator makes starts empty. Its owner has no password until they
// open the one-time link; the link works once, and only the newest one works; with it
// the owner signs in and makes the app's first key.
func TestAnOrganisationStartsFromTheOperatorsLink(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		f, _ := newPeopleFixtureOn(t, s)
		op := operator(s, nil)

		_, err := op.CreateOrganization(ctx, " ", "not an address")
		var refusal *service.Error
		if !errors.As(err, &refusal) || refusal.Kind != service.Invalid || len(refusal.Fields) != 2 {
			t.Fatalf("an organisation without a name, its owner without an address: %v", err)
		}
		if _, err := op.CreateOrganization(ctx, "Taken", f.creds.Owner.Email); service.KindOf(err) != service.Conflict {
			t.Fatalf("an owner whose address someone signs in with: %v, want a conflict", err)
		}
		made, err := op.CreateOrganization(ctx, "  Acme Payroll ", "Ops@Acme.example")
		if err != nil {
			t.Fatal(err)
		}
		if made.Organization.Name != "Acme Payroll" || made.Owner.Email != "ops@acme.example" || made.Owner.Role != "owner" ||
			made.Owner.PasswordHash != "" || !strings.HasPrefix(made.Link.Token, "sil_") {
			t.Fatalf("made %+v %+v", made.Organization, made.Owner)
		}
		// No password yet: none signs in, the empty one neither.
		f.trySignIn(t, "192.0.2.9:1", "ops@acme.example", "any password at all").wantProblem(t, 401, apitypes.CodeUnauthenticated)
		// A new link (the operator's reset) ends the first.
		_, newer, err := op.ResetPerson(ctx, "OPS@acme.example")
		if err != nil {
			t.Fatal(err)
		}
		if r := f.do(t, "GET", "/console/welcome?token="+url.QueryEscape(made.Link.Token), "", nil); r.status != 404 {
			t.Fatalf("the first link after a newer one: %d", r.status)
		}
		if r := f.welcome(t, made.Link.Token, "a long enough password", "a long enough password"); r.status != 404 {
			t.Fatalf("the first link used after a newer one: %d", r.status)
		}
		// A password too short, or two that differ, leave the link as it was.
		for _, pair := range [][2]string{{"short", "short"}, {"a long enough password", "another long password"}} {
			if r := f.welcome(t, newer.Token, pair[0], pair[1]); r.status != 422 || !strings.Contains(string(r.body), "ops@acme.example") {
				t.Fatalf("passwords %q: %d %s", pair, r.status, r.body)
			}
		}
		password := f.setPassword(t, newer.URL("http://example.com"))
		if r := f.welcome(t, newer.Token, "a long enough password", "a long enough password"); r.status != 404 {
			t.Fatalf("the link used twice: %d", r.status)
		}
		owner := f.signIn(t, "ops@acme.example", password)

		var who apitypes.Session
		if r := f.as(t, owner, "GET", "/api/v1/session", ""); r.status != 200 || json.Unmarshal(r.body, &who) != nil ||
			who.User.OrgID != made.Organization.ID || who.User.Role != "owner" {
			t.Fatalf("the owner's session: %d %s", r.status, r.body)
		}
		if r := f.as(t, owner, "GET", "/api/v1/treasury/wallets", ""); r.status != 200 || !strings.Contains(string(r.body), `"data":[]`) {
			t.Fatalf("a new organisation's wallets: %d %s", r.status, r.body)
		}
		var key createdKey
		r := f.as(t, owner, "POST", "/developer/api-keys?app=pay", `{"kind":"sk","label":"payouts"}`)
		if r.status != 201 || json.Unmarshal(r.body, &key) != nil || key.CreatedByUser == nil || *key.CreatedByUser != made.Owner.ID {
			t.Fatalf("the owner's first key: %d %s", r.status, r.body)
		}
		if r := f.do(t, "GET", "/api/v1/payments", key.Secret, nil); r.status != 200 {
			t.Fatalf("the new key: %d %s", r.status, r.body)
		}
		// The operator's actions are in the organisation's audit log, by the operator.
		audit := f.as(t, owner, "GET", "/api/v1/audit-logs", "")
		for _, action := range []string{"organization.created", "user.reset"} {
			if !strings.Contains(string(audit.body), `"action":"`+action+`"`) || !strings.Contains(string(audit.body), `"actor":{"id":"operator","type":"operator"}`) {
				t.Fatalf("the audit log lacks the operator's %s: %s", action, audit.body)
			}
		}
	})
}

// A link is good for 24 hours.
func TestASignInLinkEndsAfterADay(t *testing.T) {
	f, _ := newPeopleFixture(t)
	made, err := operator(f.store, func() time.Time { return time.Now().Add(-service.SignInLinkTTL - time.Minute) }).
		CreateOrganization(context.Background(), "Late", "late@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if r := f.do(t, "GET", "/console/welcome?token="+url.QueryEscape(made.Link.Token), "", nil); r.status != 404 ||
		!strings.Contains(string(r.body), "expired") {
		t.Fatalf("a link of yesterday: %d %s", r.status, r.body)
	}
	if r := f.welcome(t, made.Link.Token, "a long enough password", "a long enough password"); r.status != 404 {
		t.Fatalf("a link of yesterday used: %d", r.status)
	}
}

// Disabling an organisation refuses every credential of it at once — keys, OAuth
// clients and their tokens, sessions, passwords, links — and deletes nothing; other
// organisations go on.
func TestADisabledOrganisationRefusesEveryCredential(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		f, _ := newPeopleFixtureOn(t, s)
		op := operator(s, nil)
		made, err := op.CreateOrganization(ctx, "Soon Gone", "owner@gone.example")
		if err != nil {
			t.Fatal(err)
		}
		password := f.setPassword(t, made.Link.URL("http://example.com"))
		owner := f.signIn(t, "owner@gone.example", password)
		var key createdKey
		_ = json.Unmarshal(f.as(t, owner, "POST", "/developer/api-keys?app=pay", `{"kind":"sk"}`).body, &key)
		var client createdClient
		_ = json.Unmarshal(f.as(t, owner, "POST", "/developer/oauth-clients?app=pay", `{"scopes":"pay:read"}`).body, &client)
		grant := url.Values{"grant_type": {"client_credentials"}}
		status, body, _ := f.token(t, grant, client.ClientID, client.ClientSecret)
		access, _ := body["access_token"].(string)
		if status != 200 || access == "" || key.Secret == "" {
			t.Fatalf("the organisation's credentials: token %d, key %q", status, key.Secret)
		}
		_, pending, err := op.ResetPerson(ctx, "owner@gone.example")
		if err != nil {
			t.Fatal(err)
		}
		for _, token := range []string{key.Secret, access} {
			if r := f.do(t, "GET", "/api/v1/payments", token, nil); r.status != 200 {
				t.Fatalf("before: %d", r.status)
			}
		}

		disabled, err := op.DisableOrganization(ctx, made.Organization.ID)
		if err != nil || disabled.DisabledAt == nil {
			t.Fatalf("disable: %v", err)
		}
		for _, token := range []string{key.Secret, access} {
			f.do(t, "GET", "/api/v1/payments", token, nil).wantProblem(t, 401, apitypes.CodeUnauthenticated)
		}
		f.as(t, owner, "GET", "/api/v1/session", "").wantProblem(t, 401, apitypes.CodeUnauthenticated)
		f.trySignIn(t, "192.0.2.7:1", "owner@gone.example", password).wantProblem(t, 401, apitypes.CodeUnauthenticated)
		if status, body, _ := f.token(t, grant, client.ClientID, client.ClientSecret); status != 401 || body["error"] != "invalid_client" {
			t.Fatalf("a new token for the disabled organisation's client: %d %v", status, body)
		}
		if r := f.welcome(t, pending.Token, "a long enough password", "a long enough password"); r.status != 404 {
			t.Fatalf("a link of the disabled organisation: %d", r.status)
		}
		// Other organisations go on.
		if r := f.do(t, "GET", "/api/v1/payments", f.creds.Keys["pay"].SK, nil); r.status != 200 {
			t.Fatalf("the demo organisation after another was disabled: %d", r.status)
		}
		// Nothing is deleted, and disabling again changes nothing.
		if k, err := s.APIKeyBySecretHash(ctx, auth.HashSecret(key.Secret)); err != nil || k.RevokedAt != nil {
			t.Fatalf("the disabled organisation's key row: %v", err)
		}
		again, err := op.DisableOrganization(ctx, made.Organization.ID)
		if err != nil || !again.DisabledAt.Equal(*disabled.DisabledAt) {
			t.Fatalf("disabled again: %v %v", err, again.DisabledAt)
		}
		list, err := op.ListOrganizations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, o := range list {
			if o.ID == made.Organization.ID {
				found = o.DisabledAt != nil && o.People == 1
			}
		}
		if !found {
			t.Fatalf("the organisation in the list: %+v", list)
		}
		audits, err := s.ListAudit(ctx, made.Organization.ID, []string{"treasury"}, nil, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, a := range audits {
			if a.Action == "organization.disabled" {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%d audit records of the disabling, want 1", n)
		}
		if _, err := op.DisableOrganization(ctx, "org_unknown"); service.KindOf(err) != service.NotFound {
			t.Fatalf("an unknown organisation: %v", err)
		}
	})
}
