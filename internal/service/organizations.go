package service

import (
	"context"
	"errors"
	"net/mail"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/store"
)

// SignInLinkTTL is how long a one-time sign-in link works.
const SignInLinkTTL = 24 * time.Hour

// Operator is the actor of the operator's commands in the audit log.
const Operator = "operator"

// SignInLink is a one-time link just issued: its token, shown once, and when it ends.
type SignInLink struct {
	Token     string
	ExpiresAt time.Time
}

// URL is the console page that opens the link, under the console's base URL.
func (l SignInLink) URL(baseURL string) string {
	return strings.TrimRight(baseURL, "/") + "/console/welcome?token=" + url.QueryEscape(l.Token)
}

// Onboarded is what the operator's organisation create made.
type Onboarded struct {
	Organization *store.Organization
	Owner        *store.User
	Link         SignInLink
}

// readEmail is an e-mail address as people sign in with it, or the field's error.
func readEmail(email string) (string, *orders.FieldError) {
	email = strings.ToLower(strings.TrimSpace(email))
	if addr, err := mail.ParseAddress(email); err != nil || addr.Address != email || len(email) > 254 {
		f := field("email", "must be an e-mail address")
		return email, &f
	}
	return email, nil
}

// operatorAudit is the audit record of an operator's command on an organisation.
func (s *Service) operatorAudit(orgID, action, resourceType, resourceID string, details map[string]any) *store.AuditLog {
	a := s.audit(Caller{Principal: &auth.Principal{OrgID: orgID, ID: Operator}, CorrelationID: Operator},
		"treasury", action, resourceType, resourceID, details)
	a.ActorType = Operator
	return a
}

// CreateOrganization makes an organisation and its owner, who has no password yet: the
// one-time sign-in link it returns lets them set one. The operator's command.
func (s *Service) CreateOrganization(ctx context.Context, name, ownerEmail string) (*Onboarded, error) {
	name = strings.TrimSpace(name)
	var errs []orders.FieldError
	if name == "" || utf8.RuneCountInString(name) > 200 || !utf8.ValidString(name) || strings.ContainsFunc(name, unicode.IsControl) {
		errs = append(errs, field("name", "needs 1 to 200 characters, none of them a control character"))
	}
	email, bad := readEmail(ownerEmail)
	if bad != nil {
		errs = append(errs, field("owner-email", bad.Message))
	}
	if len(errs) > 0 {
		return nil, invalid(errs...)
	}
	now := s.now()
	org := &store.Organization{ID: s.newID(ids.Organization), Name: name, CreatedAt: now}
	owner := &store.User{ID: ids.New(ids.User), OrgID: org.ID, Email: email, Role: auth.RoleOwner, CreatedAt: now}
	var link SignInLink
	err := s.Store.Tx(ctx, func(tx *store.Store) error {
		if err := tx.CreateOrganization(ctx, org); err != nil {
			return err
		}
		if err := tx.AddMember(ctx, owner, store.MemberPermission{}); err != nil {
			return err
		}
		var err error
		if link, err = s.issueLink(ctx, tx, owner, Operator); err != nil {
			return err
		}
		return tx.AppendAudit(ctx, s.operatorAudit(org.ID, "organization.created", "organization", org.ID,
			map[string]any{"name": name, "ownerId": owner.ID, "ownerEmail": email}))
	})
	if errors.Is(err, store.ErrEmailTaken) {
		return nil, refuse(Conflict, "Someone already signs in with this e-mail address; an address belongs to one person of one organisation.")
	}
	if err != nil {
		return nil, err
	}
	return &Onboarded{Organization: org, Owner: owner, Link: link}, nil
}

// issueLink stores a new one-time link for a person (ending their older ones) and returns
// it; createdBy is Operator or the inviting credential.
func (s *Service) issueLink(ctx context.Context, tx *store.Store, u *store.User, createdBy string) (SignInLink, error) {
	token, err := auth.NewSecret(auth.KindSignInLink)
	if err != nil {
		return SignInLink{}, err
	}
	now := s.now()
	l := &store.SignInLink{TokenHash: auth.HashSecret(token), UserID: u.ID, OrgID: u.OrgID, CreatedBy: createdBy,
		CreatedAt: now, ExpiresAt: now.Add(SignInLinkTTL)}
	if err := tx.CreateSignInLink(ctx, l); err != nil {
		return SignInLink{}, err
	}
	return SignInLink{Token: token, ExpiresAt: l.ExpiresAt}, nil
}

// ListOrganizations lists every organisation, for the operator.
func (s *Service) ListOrganizations(ctx context.Context) ([]store.OrganizationSummary, error) {
	return s.Store.ListOrganizations(ctx)
}

// DisableOrganization refuses every credential of an organisation from now on (keys,
// OAuth clients and their tokens, sessions, sign-in links) and closes its live
// connections, on every process the bus reaches; nothing is deleted. Disabling one
// disabled already announces it again.
func (s *Service) DisableOrganization(ctx context.Context, id string) (*store.Organization, error) {
	var org *store.Organization
	err := s.Store.Tx(ctx, func(tx *store.Store) error {
		var changed bool
		var err error
		if org, changed, err = tx.DisableOrganization(ctx, id, s.now()); err != nil || !changed {
			return err
		}
		return tx.AppendAudit(ctx, s.operatorAudit(id, "organization.disabled", "organization", id, nil))
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, refuse(NotFound, "No organisation has this id.")
	}
	if err != nil {
		return nil, err
	}
	s.announce(ctx, Caller{CorrelationID: Operator}, events.Control{Kind: events.ControlOrgDisabled, OrgID: id})
	return org, nil
}

// ResetPerson issues a new one-time sign-in link for the person who signs in with email;
// their links before it stop working. Their password works until the link sets a new one.
func (s *Service) ResetPerson(ctx context.Context, email string) (*store.User, SignInLink, error) {
	email, bad := readEmail(email)
	if bad != nil {
		return nil, SignInLink{}, invalid(*bad)
	}
	u, err := s.Store.UserByEmail(ctx, email)
	if errors.Is(err, store.ErrNotFound) {
		return nil, SignInLink{}, refuse(NotFound, "Nobody signs in with this e-mail address.")
	}
	if err != nil {
		return nil, SignInLink{}, err
	}
	org, err := s.Store.Organization(ctx, u.OrgID)
	if err != nil {
		return nil, SignInLink{}, err
	}
	if org.DisabledAt != nil {
		return nil, SignInLink{}, refuse(Conflict, "This person's organisation is disabled: a link would not work.")
	}
	var link SignInLink
	err = s.Store.Tx(ctx, func(tx *store.Store) error {
		var err error
		if link, err = s.issueLink(ctx, tx, u, Operator); err != nil {
			return err
		}
		return tx.AppendAudit(ctx, s.operatorAudit(u.OrgID, "user.reset", "user", u.ID, nil))
	})
	if err != nil {
		return nil, SignInLink{}, err
	}
	return u, link, nil
}
