package store_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

// The store answers the authenticator's lookups: a key, an access token of a client and a
// person's session each authenticate as what their rows say, and an unknown hash is
// unknown, not a failure.
func TestTheStoreAnswersTheAuthenticator(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		org := mustOrg(t, s)
		now := time.Now().UTC()
		authn := auth.NewAuthenticator(s)
		secret := func(kind string) string {
			v, err := auth.NewSecret(kind)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}

		tk := secret(auth.KindResource)
		key := &store.APIKey{ID: ids.New(ids.APIKey), OrgID: org, App: "pay", Kind: auth.KindResource, Actions: "read,sign",
			ResourceIDs: "wal_a", SecretHash: auth.HashSecret(tk), SecretHint: "tk_", CreatedAt: now,
			Creator: store.Creator{CreatedBy: "key_parent", CreatedByUser: "usr_maker"}}
		if err := s.CreateAPIKey(ctx, key); err != nil {
			t.Fatal(err)
		}
		p, err := authn.Authenticate(ctx, tk)
		if err != nil || p.ID != key.ID || p.OrgID != org || !p.Can("pay", auth.ActionSign) || p.Can("pay", auth.ActionWrite) ||
			!slices.Equal(p.ResourceIDs, []string{"wal_a"}) || p.Person != "usr_maker" {
			t.Fatalf("the key: %+v %v", p, err)
		}

		client := &store.OAuthClient{ID: ids.New(ids.OAuthClient), OrgID: org, App: "trade", SecretHash: "x", Scopes: "trade:read",
			CreatedAt: now, Creator: store.Creator{CreatedBy: "usr_dev", CreatedByUser: "usr_dev"}}
		if err := s.CreateOAuthClient(ctx, client); err != nil {
			t.Fatal(err)
		}
		at := secret(auth.KindAccessToken)
		if err := s.CreateOAuthToken(ctx, &store.OAuthToken{TokenHash: auth.HashSecret(at), ClientID: client.ID, OrgID: org, App: "trade",
			Actions: "read", Scope: "trade:read", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if p, err := authn.Authenticate(ctx, at); err != nil || p.ID != client.ID || !p.Can("trade", auth.ActionRead) || p.Person != "usr_dev" {
			t.Fatalf("the access token: %+v %v", p, err)
		}
		if err := s.RevokeOAuthClient(ctx, org, client.ID, now); err != nil {
			t.Fatal(err)
		}
		if _, err := authn.Authenticate(ctx, at); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Fatalf("a revoked client's token: %v", err)
		}

		member := &store.User{ID: ids.New(ids.User), OrgID: org, Email: ids.New("m") + "@example.com", PasswordHash: "h",
			Role: auth.RoleMember, CreatedAt: now}
		if err := s.AddMember(ctx, member, store.MemberPermission{App: "earn", Actions: "read,approve"}); err != nil {
			t.Fatal(err)
		}
		token, sess, err := auth.NewSession(member.ID, org, now, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.CreateSession(ctx, sess); err != nil {
			t.Fatal(err)
		}
		if p, err := authn.AuthenticateSession(ctx, token); err != nil || p.ID != member.ID || p.Role != auth.RoleMember ||
			!slices.Equal(p.Grants["earn"], []string{auth.ActionRead, auth.ActionApprove}) || len(p.Grants) != 1 {
			t.Fatalf("the session: %+v %v", p, err)
		}

		if _, ok, err := s.AuthKey(ctx, "unknown"); ok || err != nil {
			t.Errorf("an unknown key: %v %v", ok, err)
		}
		if _, ok, err := s.AuthAccessToken(ctx, "unknown"); ok || err != nil {
			t.Errorf("an unknown token: %v %v", ok, err)
		}
		if _, _, ok, err := s.AuthSession(ctx, "unknown"); ok || err != nil {
			t.Errorf("an unknown session: %v %v", ok, err)
		}
	})
}
