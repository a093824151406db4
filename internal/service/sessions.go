package service

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/metrics"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/ratelimit"
	"github.com/opentreasury/treasury/internal/store"
)

// Sessions signs people in and out and changes their passwords. The API's session routes
// and the console's sign-in page both come through here.
type Sessions struct {
	Store *store.Store
	Authn *auth.Authenticator
	Log   *slog.Logger
	// TTL is how long a person stays signed in.
	TTL time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Failures bounds failed attempts per client address, e-mail and person (ten a minute
	// each): a password of twelve characters or more cannot be guessed at that rate. Only
	// failures count, so a flood of wrong guesses locks out a person who knows their
	// password no longer than the flood lasts.
	Failures *ratelimit.Limiter
	// Metrics counts the refusals of Failures; nil counts nothing.
	Metrics *metrics.Metrics
}

// NewSessions returns the sign-in service over a store.
func NewSessions(s *store.Store, authn *auth.Authenticator, ttl time.Duration, now func() time.Time, log *slog.Logger) *Sessions {
	if now == nil {
		now = time.Now
	}
	failures := ratelimit.New(10.0/60, 10)
	failures.Now = now
	return &Sessions{Store: s, Authn: authn, Log: log, TTL: ttl, Now: now, Failures: failures}
}

// Session is a person signed in: their session token (for the cookie), who they are, and
// what they may do.
type Session struct {
	Token     string
	User      *store.User
	Principal *auth.Principal
}

// CSRFToken is the token every write made with this session must carry.
func (s *Session) CSRFToken() string { return auth.CSRFToken(s.Token) }

// tooMany refuses when key has used up its failed attempts.
func (s *Sessions) tooMany(key, what string) error {
	if empty, wait := s.Failures.Exhausted(key); empty {
		s.Metrics.RateLimited(metrics.LimiterSignIn)
		return &Error{Kind: RateLimited, RetryAfter: wait, Detail: what}
	}
	return nil
}

// SignIn checks a person's e-mail address and password, and opens a session. An unknown
// address and a wrong password are refused alike; failed attempts are bounded per client
// address and per e-mail address.
func (s *Sessions) SignIn(ctx context.Context, email, password, clientIP, correlationID string) (*Session, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	var errs []orders.FieldError
	if email == "" {
		errs = append(errs, field("email", "is required"))
	}
	if password == "" {
		errs = append(errs, field("password", "is required"))
	}
	if len(errs) > 0 {
		return nil, invalid(errs...)
	}
	limits := []string{"ip:" + clientIP, "email:" + email}
	for _, key := range limits {
		if err := s.tooMany(key, "Too many failed sign-ins"); err != nil {
			return nil, err
		}
	}
	// The moment the stored hash is read: a password changed after it ends the session.
	checkedAt := s.Now()
	u, err := s.Store.UserByEmail(ctx, email)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	stored := ""
	if u != nil {
		stored = u.PasswordHash
	}
	if !auth.PasswordMatches(password, stored) {
		for _, key := range limits {
			s.Failures.Take(key)
		}
		s.Log.InfoContext(ctx, "sign-in refused", "correlationId", correlationID)
		return nil, refuse(Unauthenticated, "The email address or the password is wrong.")
	}
	return s.open(ctx, u, checkedAt, correlationID)
}

// open starts a session for a person whose password was checked at checkedAt.
func (s *Sessions) open(ctx context.Context, u *store.User, checkedAt time.Time, correlationID string) (*Session, error) {
	org, err := s.Store.Organization(ctx, u.OrgID)
	if err != nil {
		return nil, err
	}
	if org.DisabledAt != nil {
		// Told as a wrong password is: a refusal that confirmed the password would tell a
		// guesser more than the person.
		return nil, refuse(Unauthenticated, "The email address or the password is wrong.")
	}
	token, sess, err := auth.NewSession(u.ID, u.OrgID, checkedAt, s.TTL)
	if err == nil {
		err = s.Store.CreateSession(ctx, sess)
	}
	if err != nil {
		return nil, err
	}
	p, err := s.Authn.AuthenticateSession(ctx, token)
	if errors.Is(err, auth.ErrUnauthenticated) {
		return nil, refuse(Unauthenticated, "The password changed while signing in; sign in again.")
	}
	if err != nil {
		return nil, err
	}
	s.Log.InfoContext(ctx, "session started", "userId", u.ID, "orgId", u.OrgID, "correlationId", correlationID)
	return &Session{Token: token, User: u, Principal: p}, nil
}

// person is the signed-in person of a principal, or a refusal for a key or token.
func (s *Sessions) person(ctx context.Context, p *auth.Principal) (*store.User, error) {
	if p == nil || p.Kind != auth.KindUser {
		return nil, refuse(PermissionDenied, "This request is not made with a session; sign in at POST /api/v1/sessions.")
	}
	return s.Store.UserInOrg(ctx, p.OrgID, p.ID)
}

// Current is the session a principal was authenticated with, by its token.
func (s *Sessions) Current(ctx context.Context, p *auth.Principal, token string) (*Session, error) {
	u, err := s.person(ctx, p)
	if err != nil {
		return nil, err
	}
	return &Session{Token: token, User: u, Principal: p}, nil
}

// SignOut ends a person's session at once, on every replica.
func (s *Sessions) SignOut(ctx context.Context, p *auth.Principal) error {
	if _, err := s.person(ctx, p); err != nil {
		return err
	}
	return s.Store.RevokeSession(ctx, p.Session, s.Now())
}

// ChangePassword replaces a person's password: every session of theirs ends, and a new one
// is opened in place of the one that asked.
func (s *Sessions) ChangePassword(ctx context.Context, p *auth.Principal, current, next, correlationID string) (*Session, error) {
	u, err := s.person(ctx, p)
	if err != nil {
		return nil, err
	}
	key := "password:" + u.ID
	if err := s.tooMany(key, "Too many wrong passwords"); err != nil {
		return nil, err
	}
	if !auth.PasswordMatches(current, u.PasswordHash) {
		s.Failures.Take(key)
		return nil, invalid(field("currentPassword", "is not the current password"))
	}
	hash, err := auth.HashPassword(next)
	if errors.Is(err, auth.ErrWeakPassword) {
		return nil, invalid(field("newPassword", "needs 12 to 72 bytes"))
	}
	changedAt := s.Now()
	if err == nil {
		err = s.Store.SetPassword(ctx, u.ID, hash, changedAt)
	}
	if err != nil {
		return nil, err
	}
	return s.open(ctx, u, changedAt, correlationID)
}

// LinkPerson is the person a one-time sign-in link would let set a password, without
// using it: the page that opens it names whom it is for. A link unknown, used, expired or
// of a disabled organisation is one refusal.
func (s *Sessions) LinkPerson(ctx context.Context, token string) (*store.User, error) {
	l, err := s.Store.SignInLinkByHash(ctx, auth.HashSecret(token))
	if err == nil && (l.UsedAt != nil || !s.Now().Before(l.ExpiresAt)) {
		err = store.ErrLinkUnusable
	}
	var u *store.User
	if err == nil {
		u, err = s.Store.UserInOrg(ctx, l.OrgID, l.UserID)
	}
	if err == nil {
		var org *store.Organization
		if org, err = s.Store.Organization(ctx, u.OrgID); err == nil && org.DisabledAt != nil {
			err = store.ErrLinkUnusable
		}
	}
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrLinkUnusable) {
		return nil, linkUnusable
	}
	return u, err
}

var linkUnusable = refuse(NotFound, "This sign-in link is unknown, used already or expired; ask the organisation's owner (or the operator) for a new one.")

// RedeemLink uses a one-time sign-in link: it sets the person's password (12 to 72
// bytes), ends their other sessions, and signs them in. Refused links count as failed
// sign-ins of the client's address.
func (s *Sessions) RedeemLink(ctx context.Context, token, password, clientIP, correlationID string) (*Session, error) {
	if err := s.tooMany("ip:"+clientIP, "Too many failed sign-ins"); err != nil {
		return nil, err
	}
	var errs []orders.FieldError
	if token == "" {
		errs = append(errs, field("token", "is required"))
	}
	hash, err := auth.HashPassword(password)
	if errors.Is(err, auth.ErrWeakPassword) {
		errs = append(errs, field("password", "needs 12 to 72 bytes"))
	} else if err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return nil, invalid(errs...)
	}
	setAt := s.Now()
	u, err := s.Store.RedeemSignInLink(ctx, auth.HashSecret(token), hash, setAt)
	if errors.Is(err, store.ErrLinkUnusable) {
		s.Failures.Take("ip:" + clientIP)
		s.Log.InfoContext(ctx, "sign-in link refused", "correlationId", correlationID)
		return nil, linkUnusable
	}
	if err != nil {
		return nil, err
	}
	s.Log.InfoContext(ctx, "password set from a sign-in link", "userId", u.ID, "orgId", u.OrgID, "correlationId", correlationID)
	return s.open(ctx, u, setAt, correlationID)
}
