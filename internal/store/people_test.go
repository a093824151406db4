package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

func TestPeopleAndSessions(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		now := time.Now().UTC().Truncate(time.Millisecond)
		for _, org := range []string{"org_1", "org_2"} {
			if err := s.CreateOrganization(ctx, &store.Organization{ID: org, Name: org, CreatedAt: now}); err != nil {
				t.Fatal(err)
			}
		}
		owner := &store.User{ID: "usr_owner", OrgID: "org_1", Email: "o@example.com", PasswordHash: "h0", Role: auth.RoleOwner, CreatedAt: now}
		if err := s.CreateUser(ctx, owner, nil); err != nil {
			t.Fatal(err)
		}
		m := &store.User{ID: "usr_m", OrgID: "org_1", Email: "m@example.com", PasswordHash: "h1", Role: auth.RoleMember, CreatedAt: now.Add(time.Second)}
		if err := s.AddMember(ctx, m, store.MemberPermission{App: "pay", Actions: "read"}); err != nil {
			t.Fatal(err)
		}
		again := &store.User{ID: "usr_again", OrgID: "org_2", Email: "m@example.com", PasswordHash: "h", Role: auth.RoleMember, CreatedAt: now}
		if err := s.AddMember(ctx, again, store.MemberPermission{App: "pay", Actions: "read"}); !errors.Is(err, store.ErrEmailTaken) {
			t.Fatalf("a second account for one address: %v", err)
		}
		if err := s.SetMemberPermission(ctx, store.MemberPermission{UserID: "usr_m", App: "pay", Actions: "approve,read"}); err != nil {
			t.Fatal(err)
		}
		if err := s.SetMemberPermission(ctx, store.MemberPermission{UserID: "usr_m", App: "trade", Actions: "read"}); err != nil {
			t.Fatal(err)
		}
		list, err := s.ListMembers(ctx, "org_1", "pay")
		if err != nil || len(list) != 2 || list[0].ID != "usr_owner" || list[0].Actions != "" || list[1].Actions != "approve,read" {
			t.Fatalf("members %+v %v", list, err)
		}
		if err := s.SetMemberPermission(ctx, store.MemberPermission{UserID: "usr_m", App: "pay"}); err != nil {
			t.Fatal(err)
		}
		perms, _ := s.MemberPermissions(ctx, "usr_m")
		if len(perms) != 1 || perms[0].App != "trade" {
			t.Fatalf("after removal from pay: %+v", perms)
		}
		if _, err := s.UserInOrg(ctx, "org_2", "usr_m"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a person of another organisation: %v", err)
		}

		for _, sess := range []auth.SessionRecord{
			{TokenHash: "a", UserID: "usr_m", OrgID: "org_1", CreatedAt: now, ExpiresAt: now.Add(time.Hour)},
			{TokenHash: "b", UserID: "usr_m", OrgID: "org_1", CreatedAt: now, ExpiresAt: now.Add(time.Hour)},
			{TokenHash: "old", UserID: "usr_m", OrgID: "org_1", CreatedAt: now.Add(-2 * time.Hour), ExpiresAt: now.Add(-time.Hour)},
		} {
			if err := s.CreateSession(ctx, sess); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.SetPassword(ctx, "usr_m", "h2", now); err != nil {
			t.Fatal(err)
		}
		a, u, _, err := s.SessionByHash(ctx, "a")
		if err != nil || a.RevokedAt == nil || u.PasswordHash != "h2" || u.PasswordChangedAt == nil || !u.PasswordChangedAt.Equal(now) {
			t.Fatalf("after the password change: %+v %+v %v", a, u, err)
		}
		if err := s.CreateSession(ctx, auth.SessionRecord{TokenHash: "c", UserID: "usr_m", OrgID: "org_1", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if err := s.RevokeSession(ctx, "c", now); err != nil {
			t.Fatal(err)
		}
		if c, _, _, _ := s.SessionByHash(ctx, "c"); c.RevokedAt == nil {
			t.Fatal("signed out, not revoked")
		}
		if d, err := s.DeleteExpired(ctx, store.ExpiringSessions, now, 1000, nil); err != nil || d.Rows != 1 {
			t.Fatalf("expired sessions deleted: %+v %v", d, err)
		}
	})
}
