package api

import (
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/sessioncookie"
)

type sessionHandlers struct {
	sessions *service.Sessions
	log      *slog.Logger
}

func sessionJSON(s *service.Session) apitypes.Session {
	perms := map[string][]string{}
	for _, app := range s.Principal.Apps() {
		perms[app] = s.Principal.Grants[app]
	}
	u := s.User
	return apitypes.Session{User: apitypes.User{ID: u.ID, Email: u.Email, Role: u.Role, OrgID: u.OrgID}, Permissions: perms,
		CSRFToken: s.CSRFToken(), ExpiresAt: timeOf(s.Principal.ExpiresAt)}
}

// SetSessionCookie gives the browser a session's cookie, Secure when r came over https.
func SetSessionCookie(w http.ResponseWriter, r *http.Request, s *service.Session) {
	sessioncookie.Set(w, r, s.Token, s.Principal.ExpiresAt)
}

// ClearSessionCookie makes the browser forget its session cookie.
func ClearSessionCookie(w http.ResponseWriter, r *http.Request) {
	sessioncookie.Clear(w, r)
}

// signIn answers POST /sessions {email, password}: 201 with the session cookie and the
// CSRF token, or one 401 for an unknown address and a wrong password alike.
func (h *sessionHandlers) signIn(c *gin.Context) {
	// Login CSRF: a form on another site could sign the browser in to the attacker's
	// account. Forms cannot send JSON (the router's withJSONBody refuses any other body
	// with 415), and browsers name cross-site requests.
	if c.GetHeader("Sec-Fetch-Site") == "cross-site" {
		fail(c, apitypes.CodePermissionDenied, "Sign in from the console's own origin.")
		return
	}
	var req struct {
		Email    string `json:"email"`
		Password string `json:"password"`
	}
	if !bindStrict(c, &req, "email", "password") {
		return
	}
	s, err := h.sessions.SignIn(c.Request.Context(), req.Email, req.Password, c.ClientIP(), correlationID(c))
	h.answer(c, http.StatusCreated, s, err)
}

// answer gives the browser the session's cookie and answers with it.
func (h *sessionHandlers) answer(c *gin.Context, status int, s *service.Session, err error) {
	if err != nil {
		failed(c, h.log, err)
		return
	}
	SetSessionCookie(c.Writer, c.Request, s)
	c.Header("Cache-Control", "no-store")
	c.PureJSON(status, sessionJSON(s))
}

// current answers GET /session: who is signed in, their permissions and the CSRF token.
func (h *sessionHandlers) current(c *gin.Context) {
	token, _ := c.Cookie(auth.SessionCookie)
	s, err := h.sessions.Current(c.Request.Context(), h.session(c), token)
	if err != nil {
		failed(c, h.log, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.PureJSON(http.StatusOK, sessionJSON(s))
}

// session is the principal of a request made with a session cookie, nil otherwise.
func (h *sessionHandlers) session(c *gin.Context) *auth.Principal {
	if _, err := c.Cookie(auth.SessionCookie); err != nil {
		return nil
	}
	return principalOf(c)
}

// signOut answers DELETE /session: the session ends at once, on every replica.
func (h *sessionHandlers) signOut(c *gin.Context) {
	if err := h.sessions.SignOut(c.Request.Context(), h.session(c)); err != nil {
		failed(c, h.log, err)
		return
	}
	ClearSessionCookie(c.Writer, c.Request)
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
	s, err := h.sessions.ChangePassword(c.Request.Context(), h.session(c), req.CurrentPassword, req.NewPassword, correlationID(c))
	h.answer(c, http.StatusOK, s, err)
}

// isSafeMethod: reads, which need no CSRF token.
func isSafeMethod(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}
