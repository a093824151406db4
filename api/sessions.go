package api

import (
	"errors"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/auth"
	"github.com/opentreasury/treasury/orders"
	"github.com/opentreasury/treasury/store"
)

// SessionCookie carries a person's session token. It is HttpOnly (no script reads it),
// Secure (browsers treat http://127.0.0.1 and localhost as secure, so the dev bundle works)
// and SameSite=Strict (no other site makes the browser send it).
const SessionCookie = "treasury_session"

// CSRFHeader carries the session's anti-forgery token on every write made with a session.
const CSRFHeader = "X-CSRF-Token"

type sessionHandlers struct {
	store *store.Store
	log   *slog.Logger
	authn *auth.Authenticator
	ttl   time.Duration
	now   func() time.Time
	// failures bounds failed sign-ins per address and per client IP (ten a minute in each
	// API process): a password of twelve characters or more cannot be guessed at that rate.
	// Only failures count, so a flood of wrong guesses does not lock out a person who
	// knows their password for longer than the flood lasts.
	failures *rateLimiter
}

type sessionUser struct {
	ID    string `json:"id"`
	Email string `json:"email"`
	Role  string `json:"role"`
	OrgID string `json:"orgId"`
}

type sessionResponse struct {
	User        sessionUser         `json:"user"`
	Permissions map[string][]string `json:"permissions"`
	CSRFToken   string              `json:"csrfToken"`
	ExpiresAt   string              `json:"expiresAt"`
}

func sessionJSON(u *store.User, p *auth.Principal, token string) sessionResponse {
	perms := map[string][]string{}
	for _, app := range p.Apps() {
		perms[app] = p.Grants[app]
	}
	return sessionResponse{User: sessionUser{ID: u.ID, Email: u.Email, Role: u.Role, OrgID: u.OrgID}, Permissions: perms,
		CSRFToken: auth.CSRFToken(token), ExpiresAt: formatTime(p.ExpiresAt)}
}

// signIn answers POST /sessions {email, password}: 201 with the session cookie and the
// CSRF token, or one 401 for an unknown address and a wrong password alike.
func (h *sessionHandlers) signIn(c *gin.Context) {
	// Login CSRF: a form on another site could sign the browser in to the attacker's
	// account. Forms cannot send application/json, and browsers name cross-site requests.
	if c.GetHeader("Sec-Fetch-Site") == "cross-site" {
		fail(c, CodePermissionDenied, "Sign in from the console's own origin.")
		return
	}
	if mt, _, err := mime.ParseMediaType(c.GetHeader("Content-Type")); err != nil || mt != "application/json" {
		validationFailed(c, []orders.FieldError{{Field: "Content-Type", Message: "must be application/json"}})
		return
	}
	var req struct {
		Email    string `json:"email"`
		Password string `json:"password"`
	}
	if !bindStrict(c, &req, "email", "password") {
		return
	}
	email := strings.ToLower(strings.TrimSpace(req.Email))
	var errs []orders.FieldError
	if email == "" {
		errs = append(errs, orders.FieldError{Field: "email", Message: "is required"})
	}
	if req.Password == "" {
		errs = append(errs, orders.FieldError{Field: "password", Message: "is required"})
	}
	if len(errs) > 0 {
		validationFailed(c, errs)
		return
	}
	limits := []string{"ip:" + c.ClientIP(), "email:" + email}
	for _, key := range limits {
		if h.tooManyFailures(c, key, "Too many failed sign-ins") {
			return
		}
	}
	ctx := c.Request.Context()
	// The moment the stored hash is read: a password changed after it ends the session.
	checkedAt := h.now()
	u, err := h.store.UserByEmail(ctx, email)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		requestFailed(c, h.log, err)
		return
	}
	stored := ""
	if u != nil {
		stored = u.PasswordHash
	}
	if !auth.PasswordMatches(req.Password, stored) {
		for _, key := range limits {
			h.failures.take(key)
		}
		h.log.InfoContext(ctx, "sign-in refused", "correlationId", correlationID(c))
		fail(c, CodeUnauthenticated, "The email address or the password is wrong.")
		return
	}
	h.startSession(c, u, checkedAt, http.StatusCreated)
}

// startSession opens a session for a person whose password was checked at checkedAt and
// answers with it: the cookie, and the CSRF token in the body.
func (h *sessionHandlers) startSession(c *gin.Context, u *store.User, checkedAt time.Time, status int) {
	ctx := c.Request.Context()
	token, sess, err := auth.NewSession(u, checkedAt, h.ttl)
	if err == nil {
		err = h.store.CreateSession(ctx, sess)
	}
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	p, err := h.authn.AuthenticateSession(ctx, token)
	if errors.Is(err, auth.ErrUnauthenticated) {
		fail(c, CodeUnauthenticated, "The password changed while signing in; sign in again.")
		return
	}
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	h.log.InfoContext(ctx, "session started", "userId", u.ID, "orgId", u.OrgID, "correlationId", correlationID(c))
	http.SetCookie(c.Writer, &http.Cookie{Name: SessionCookie, Value: token, Path: "/", Expires: sess.ExpiresAt,
		MaxAge: int(h.ttl.Seconds()), Secure: true, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	c.Header("Cache-Control", "no-store")
	c.JSON(status, sessionJSON(u, p, token))
}

// current answers GET /session: who is signed in, their permissions and the CSRF token.
func (h *sessionHandlers) current(c *gin.Context) {
	p, token, ok := sessionOf(c)
	if !ok {
		return
	}
	u, err := h.store.UserInOrg(c.Request.Context(), p.OrgID, p.ID)
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, sessionJSON(u, p, token))
}

// signOut answers DELETE /session: the session ends at once, on every replica.
func (h *sessionHandlers) signOut(c *gin.Context) {
	p, _, ok := sessionOf(c)
	if !ok {
		return
	}
	if err := h.store.RevokeSession(c.Request.Context(), p.Session, h.now()); err != nil {
		requestFailed(c, h.log, err)
		return
	}
	http.SetCookie(c.Writer, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1,
		Secure: true, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	c.Status(http.StatusNoContent)
}

// changePassword answers POST /session/password {currentPassword, newPassword}: every
// session of the person ends, and this request's is replaced by a new one (a new cookie
// and CSRF token in the answer).
func (h *sessionHandlers) changePassword(c *gin.Context) {
	var req struct {
		CurrentPassword string `json:"currentPassword"`
		NewPassword     string `json:"newPassword"`
	}
	if !bindStrict(c, &req, "currentPassword", "newPassword") {
		return
	}
	p, _, ok := sessionOf(c)
	if !ok {
		return
	}
	ctx := c.Request.Context()
	u, err := h.store.UserInOrg(ctx, p.OrgID, p.ID)
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	key := "password:" + u.ID
	if h.tooManyFailures(c, key, "Too many wrong passwords") {
		return
	}
	if !auth.PasswordMatches(req.CurrentPassword, u.PasswordHash) {
		h.failures.take(key)
		validationFailed(c, []orders.FieldError{{Field: "currentPassword", Message: "is not the current password"}})
		return
	}
	hash, err := auth.HashPassword(req.NewPassword)
	if errors.Is(err, auth.ErrWeakPassword) {
		validationFailed(c, []orders.FieldError{{Field: "newPassword", Message: "needs 12 to 72 bytes"}})
		return
	}
	changedAt := h.now()
	if err == nil {
		err = h.store.SetPassword(ctx, u.ID, hash, changedAt)
	}
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	// Every session has ended, this one too: it is replaced by a new one.
	h.startSession(c, u, changedAt, http.StatusOK)
}

// tooManyFailures answers 429 when key has used up its failed attempts.
func (h *sessionHandlers) tooManyFailures(c *gin.Context, key, what string) bool {
	empty, wait := h.failures.exhausted(key)
	if empty {
		seconds := retryAfter(wait)
		c.Header("Retry-After", seconds)
		fail(c, CodeRateLimited, what+"; retry after "+seconds+" s.")
	}
	return empty
}

// sessionOf is the signed-in person of a request and their session token; a request made
// with a key or token has no session (403).
func sessionOf(c *gin.Context) (*auth.Principal, string, bool) {
	p := principalOf(c)
	token, err := c.Cookie(SessionCookie)
	if p.Kind != auth.KindUser || err != nil {
		fail(c, CodePermissionDenied, "This request is not made with a session; sign in at POST /api/v1/sessions.")
		return nil, "", false
	}
	return p, token, true
}

// isSafeMethod: reads, which need no CSRF token.
func isSafeMethod(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}
