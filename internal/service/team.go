package service

import (
	"context"
	"errors"

	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/store"
)

// Member is a person of the organisation with their actions on one app.
type Member struct {
	*store.User
	App     string
	Actions []string
}

func member(u *store.User, app, actions string) Member {
	list := auth.ParseActions(actions)
	if u.Role == auth.RoleOwner {
		list = auth.AllActions
	}
	if list == nil {
		list = []string{}
	}
	return Member{User: u, App: app, Actions: list}
}

// Owner refuses anyone but the organisation's owner, signed in: only they grant or remove
// permissions.
func Owner(who Caller) error {
	if who.Kind != auth.KindUser || who.Role != auth.RoleOwner {
		return refuse(PermissionDenied, "Only the organisation's owner, signed in, grants or removes permissions.")
	}
	return nil
}

// ListTeam pages through every person of the organisation (oldest first, the owner
// first) with their actions on the caller's app; anyone with developer on it reads it.
func (s *Service) ListTeam(ctx context.Context, who Caller, pg Page) ([]Member, string, error) {
	if err := developer(who); err != nil {
		return nil, "", err
	}
	rows, err := s.Store.ListMembers(ctx, who.OrgID, who.App)
	if err != nil {
		return nil, "", err
	}
	rows, next := pageOf(rows, pg, false, func(m *store.Member) string {
		return events.FormatTime(m.User.CreatedAt) + "/" + m.User.ID
	})
	out := make([]Member, len(rows))
	for i := range rows {
		out[i] = member(&rows[i].User, who.App, rows[i].Actions)
	}
	return out, next, nil
}

// readActions validates a permission list: known actions, sorted, each once.
func readActions(actions []string) ([]string, []orders.FieldError) {
	return sortedSet(actions), unknownActions(actions)
}

// AddMember adds a member to the organisation with actions on the caller's app, and
// returns their one-time sign-in link, shown once: opening it, they set their own
// password. Only the owner adds people.
func (s *Service) AddMember(ctx context.Context, who Caller, email string, actions []string) (*Member, SignInLink, error) {
	if err := developer(who); err != nil {
		return nil, SignInLink{}, err
	}
	if err := Owner(who); err != nil {
		return nil, SignInLink{}, err
	}
	email, bad := readEmail(email)
	actions, errs := readActions(actions)
	if bad != nil {
		errs = append(errs, *bad)
	}
	if len(actions) == 0 {
		errs = append(errs, field("actions", "needs at least one action on this app"))
	}
	if len(errs) > 0 {
		return nil, SignInLink{}, invalid(errs...)
	}
	u := &store.User{ID: ids.New(ids.User), OrgID: who.OrgID, Email: email, Role: auth.RoleMember, CreatedAt: s.now()}
	perm := store.MemberPermission{App: who.App, Actions: auth.FormatActions(actions)}
	var link SignInLink
	err := s.writeAudited(ctx, who, func(tx *store.Store) error {
		if err := tx.AddMember(ctx, u, perm); err != nil {
			return err
		}
		var err error
		link, err = s.issueLink(ctx, tx, u, who.ID)
		return err
	}, "member.added", "user", u.ID, map[string]any{"actions": actions})
	if errors.Is(err, store.ErrEmailTaken) {
		return nil, SignInLink{}, refuse(Conflict, "Someone already signs in with this e-mail address; to change a member's permissions, PATCH /developer/team/{id}.")
	}
	if err != nil {
		return nil, SignInLink{}, err
	}
	m := member(u, who.App, perm.Actions)
	return &m, link, nil
}

// SetMemberActions replaces a member's actions on the caller's app; none removes them from
// the app. Their sessions see it at once. Only the owner does it.
func (s *Service) SetMemberActions(ctx context.Context, who Caller, userID string, actions []string) (*Member, error) {
	return s.setActions(ctx, who, userID, actions, "member.permissions_changed")
}

// RemoveMember takes every action on the caller's app from a member, who keeps their
// account. Only the owner does it.
func (s *Service) RemoveMember(ctx context.Context, who Caller, userID string) (*Member, error) {
	return s.setActions(ctx, who, userID, nil, "member.removed")
}

func (s *Service) setActions(ctx context.Context, who Caller, userID string, actions []string, auditAction string) (*Member, error) {
	if err := developer(who); err != nil {
		return nil, err
	}
	if err := Owner(who); err != nil {
		return nil, err
	}
	actions, errs := readActions(actions)
	if len(errs) > 0 {
		return nil, invalid(errs...)
	}
	u, err := s.Store.UserInOrg(ctx, who.OrgID, userID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, refuse(NotFound, "No person of this organisation has this id.")
	}
	if err != nil {
		return nil, err
	}
	if u.Role == auth.RoleOwner {
		return nil, refuse(Conflict, "The owner holds every action on every app; that does not change.")
	}
	perm := store.MemberPermission{UserID: u.ID, App: who.App, Actions: auth.FormatActions(actions)}
	m := member(u, who.App, perm.Actions)
	err = s.writeAudited(ctx, who, func(tx *store.Store) error { return tx.SetMemberPermission(ctx, perm) },
		auditAction, "user", u.ID, map[string]any{"actions": m.Actions})
	if err != nil {
		return nil, err
	}
	return &m, nil
}
