// Package sessioncookie gives browsers a person's session cookie, one way for the API's
// sessions and the console's sign-in (both import it; the console may not import api).
package sessioncookie

import (
	"net/http"
	"strings"
	"time"

	"github.com/opentreasury/treasury/internal/auth"
)

// Secure says whether the browser reached the service over https: TLS to this process, or
// X-Forwarded-Proto: https from the proxy that ended it. The API's router drops that
// header from any peer outside TRUSTED_PROXIES, so past the router it can be believed.
func Secure(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	// A chain of proxies appends: the first entry is what the browser spoke.
	first, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
	return strings.EqualFold(strings.TrimSpace(first), "https")
}

// Origin is the scheme and host the browser reached the service at (https behind a
// trusted proxy that says so), for links it is shown to follow.
func Origin(r *http.Request) string {
	if Secure(r) {
		return "https://" + r.Host
	}
	return "http://" + r.Host
}

// Set gives the browser a session's cookie. It is Secure only when the request came over
// https: browsers drop a Secure cookie set over plain http (anywhere but localhost), so
// the person would never be signed in.
func Set(w http.ResponseWriter, r *http.Request, token string, expires time.Time) {
	http.SetCookie(w, cookie(r, token, expires, max(1, int(time.Until(expires).Seconds()))))
}

// Clear makes the browser forget its session cookie.
func Clear(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, cookie(r, "", time.Time{}, -1))
}

func cookie(r *http.Request, token string, expires time.Time, maxAge int) *http.Cookie {
	return &http.Cookie{Name: auth.SessionCookie, Value: token, Path: "/", Expires: expires, MaxAge: maxAge,
		Secure: Secure(r), HttpOnly: true, SameSite: http.SameSiteStrictMode}
}
