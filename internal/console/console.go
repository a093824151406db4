// Package console is the web console for people: server-rendered pages under /console,
// signed in with the same session as the API, and doing everything through the same
// service functions as the API does, so that no rule is written twice. Pages work without
// JavaScript; a little of it keeps the WebSockets page's delivery log live and copies
// secrets.
//
// Read console.go first (routing, signing in, what every page gets), then pages.go (the
// order side: overview, orders, approvals, logs), policy.go (the policy, its drafts,
// versions and dry run) with dryruns.go (a draft's dry run against history) and
// developer.go (keys, OAuth clients, WebSockets, webhooks,
// team). The templates are in templates/, one per page; those named _*.html hold parts
// that several pages share.
package console

import (
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/sessioncookie"
)

//go:embed templates/*.html assets/*
var files embed.FS

// Options are the console's own settings.
type Options struct {
	// TemporalUIURL and Namespace link an order to its workflow; an empty URL leaves the
	// link out.
	TemporalUIURL, Namespace string
	// CredentialsFile is where the dev bundle wrote the seeded owner's sign-in, named on
	// the sign-in page; empty (production, where nothing writes one) names none.
	CredentialsFile string
	// PublicURL is the console's base URL, where one-time sign-in links point; empty
	// builds it from the request.
	PublicURL string
}

// Config is what the console is built from: the API's own service and sessions (so that a
// person's failed sign-ins count once, whichever door they use), and its options.
type Config struct {
	Service  *service.Service
	Sessions *service.Sessions
	Authn    *auth.Authenticator
	Log      *slog.Logger
	Options
}

type console struct {
	Config
	pages map[string]*template.Template
}

// appLabels are the apps in the switcher, in order.
var appLabels = []struct{ App, Label string }{
	{"treasury", "Treasury"}, {"pay", "Pay"}, {"trade", "Trade"}, {"earn", "Earn"}, {"borrow", "Borrow"},
}

// New returns the console's handler, to serve under /console/.
func New(cfg Config) (http.Handler, error) {
	c := &console{Config: cfg, pages: map[string]*template.Template{}}
	funcs := template.FuncMap{"time": when, "usd": usd, "amount": amount, "grouped": grouped, "deref": deref,
		"join": strings.Join, "has": slices.Contains[[]string],
		"list": func(s ...string) []string { return s }}
	names, err := fs.Glob(files, "templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		page := strings.TrimSuffix(strings.TrimPrefix(name, "templates/"), ".html")
		if page == "layout" || strings.HasPrefix(page, "_") {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/_*.html", name)
		if err != nil {
			return nil, err
		}
		c.pages[page] = t
	}
	assets, _ := fs.Sub(files, "assets")
	mux := http.NewServeMux()
	mux.Handle("GET /console/assets/", http.StripPrefix("/console/assets/", assetServer(http.FileServerFS(assets))))
	mux.HandleFunc("GET /console/{$}", c.home)
	mux.HandleFunc("GET /console/sign-in", c.signInPage)
	mux.HandleFunc("POST /console/sign-in", c.signIn)
	mux.HandleFunc("POST /console/sign-out", c.person(c.signOut))
	mux.HandleFunc("GET /console/welcome", c.welcomePage)
	mux.HandleFunc("POST /console/welcome", c.welcome)
	for _, rt := range c.routes() {
		for _, a := range auth.Apps {
			mux.HandleFunc(strings.Replace(rt.pattern, "{app}", a, 1), inApp(a, c.guarded(rt.page, rt.handle)))
		}
	}
	mux.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		c.render(w, r, nil, http.StatusNotFound, "error", errorPage{Title: "Not found", Message: "There is no page here."})
	})
	return mux, nil
}

// route is a page or a form of the console. {app} in its pattern stands for each app (a
// literal per app, so that /console/assets/ stays apart); page is the menu page whose
// permissions open it, empty for any signed-in person.
type route struct {
	pattern, page string
	handle        handler
}

func (c *console) routes() []route {
	return slices.Concat([]route{{"GET /console/{app}/{$}", "", c.appHome}}, c.orderRoutes(), c.payoutRoutes(), c.walletRoutes(), c.policyRoutes(), c.developerRoutes(), c.passkeyRoutes())
}

// Routes lists the console's routes, as "METHOD /console/{app}/…" patterns, for tests that
// walk every page and form.
func Routes() []string {
	var out []string
	for _, rt := range (&console{}).routes() {
		out = append(out, rt.pattern)
	}
	return out
}

// inApp gives a request its app, as the {app} of its route.
func inApp(app string, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.SetPathValue("app", app)
		next(w, r)
	}
}

func assetServer(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=300")
		h.ServeHTTP(w, r)
	})
}

// view is what every page's layout gets.
type view struct {
	Title    string
	Email    string
	Owner    bool
	App      string
	AppLabel string
	Apps     []link
	Nav      []link
	CSRF     string
	Notice   string
	Error    string
	// Refresh reloads the page after this many seconds (an order still moving).
	Refresh int
	Page    any
}

type link struct {
	Label, URL string
	Current    bool
}

// request is a signed-in person's request: who, with which session token, in which app.
type request struct {
	p     *auth.Principal
	token string
	email string
	app   string
	v     *view
}

// caller is who the service judges: the person within the page's app.
func (rq *request) caller(r *http.Request) service.Caller {
	return service.Caller{Principal: rq.p.InApp(rq.app), CorrelationID: correlationID(r)}
}

// correlationID is the request's correlation id, handed over by the HTTP edge the console
// is mounted behind (service.Origin).
func correlationID(r *http.Request) string {
	return service.OriginOf(r.Context()).CorrelationID
}

type handler func(w http.ResponseWriter, r *http.Request, rq *request)

// person lets through a signed-in person, sending anyone else to the sign-in page. Every
// write must carry the session's CSRF token and come from this site.
func (c *console) person(next handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		token := ""
		if ck, err := r.Cookie(auth.SessionCookie); err == nil {
			token = ck.Value
		}
		p, err := c.Authn.AuthenticateSession(r.Context(), token)
		if errors.Is(err, auth.ErrUnauthenticated) || (err == nil && p.Kind != auth.KindUser) {
			http.Redirect(w, r, "/console/sign-in?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		if err != nil {
			c.failed(w, r, nil, err)
			return
		}
		if r.Method == http.MethodPost && (r.Header.Get("Sec-Fetch-Site") == "cross-site" ||
			!auth.CSRFTokenMatches(token, r.PostFormValue("csrf"))) {
			c.render(w, r, nil, http.StatusForbidden, "error", errorPage{Title: "Refused",
				Message: "This form is stale or came from another site. Go back, reload the page and try again."})
			return
		}
		s, err := c.Sessions.Current(r.Context(), p, token)
		if err != nil {
			c.failed(w, r, nil, err)
			return
		}
		rq := &request{p: p, token: token, email: s.User.Email}
		rq.app = r.PathValue("app")
		rq.v = c.newView(r, rq)
		next(w, r, rq)
	}
}

// pageOf is a page of the console: its path within an app, its label in the menu, and who
// sees it in the menu (the service decides what each may do; this only keeps the menu to
// the pages a person can use).
type pageOf struct {
	path, label string
	shown       func(p *auth.Principal, app string) bool
}

func can(actions ...string) func(*auth.Principal, string) bool {
	return func(p *auth.Principal, app string) bool {
		for _, a := range actions {
			if p.Can(app, a) {
				return true
			}
		}
		return false
	}
}

func orderApp(app string) bool { _, ok := service.DomainOfApp(app); return ok }

// menu lists every page of an app.
var menu = []pageOf{
	{"overview", "Overview", func(p *auth.Principal, app string) bool { return app == "treasury" && p.Can(app, auth.ActionRead) }},
	{"wallets", "Wallets", func(p *auth.Principal, app string) bool { return app == "treasury" && p.Can(app, auth.ActionRead) }},
	{"orders", "Orders", func(p *auth.Principal, app string) bool { return orderApp(app) && can(auth.ActionRead)(p, app) }},
	{"approvals", "Approvals", func(p *auth.Principal, app string) bool {
		return orderApp(app) && can(auth.ActionRead, auth.ActionApprove)(p, app)
	}},
	{"payouts", "Payout schedules", func(p *auth.Principal, app string) bool { return app == "pay" && p.Can(app, auth.ActionRead) }},
	{"passkeys", "Passkeys", can(auth.ActionApprove)},
	{"api-keys", "API keys", can(auth.ActionDeveloper)},
	{"oauth-clients", "OAuth clients", can(auth.ActionDeveloper)},
	{"websockets", "WebSockets", can(auth.ActionDeveloper)},
	{"webhooks", "Webhooks", can(auth.ActionDeveloper)},
	{"team", "Team & Permissions", can(auth.ActionDeveloper)},
	{"logs", "Logs", can(auth.ActionDeveloper)},
	{"policy", "Policy", func(p *auth.Principal, app string) bool {
		return orderApp(app) && can(auth.ActionDeveloper, auth.ActionWrite)(p, app)
	}},
}

func (c *console) newView(r *http.Request, rq *request) *view {
	v := &view{Email: rq.email, Owner: rq.p.Role == auth.RoleOwner, App: rq.app, CSRF: auth.CSRFToken(rq.token),
		Notice: r.URL.Query().Get("notice"), Error: r.URL.Query().Get("error")}
	for _, a := range appLabels {
		if len(rq.p.Grants[a.App]) == 0 {
			continue
		}
		v.Apps = append(v.Apps, link{Label: a.Label, URL: "/console/" + a.App + "/", Current: a.App == rq.app})
		if a.App == rq.app {
			v.AppLabel = a.Label
		}
	}
	if rq.app != "" {
		current := strings.Split(strings.TrimPrefix(r.URL.Path, "/console/"+rq.app+"/"), "/")[0]
		for _, pg := range menu {
			if pg.shown(rq.p, rq.app) {
				v.Nav = append(v.Nav, link{Label: pg.label, URL: "/console/" + rq.app + "/" + pg.path, Current: pg.path == current})
			}
		}
	}
	return v
}

// home sends a person to the first app they hold anything on.
func (c *console) home(w http.ResponseWriter, r *http.Request) {
	c.person(func(w http.ResponseWriter, r *http.Request, rq *request) {
		if len(rq.v.Apps) == 0 {
			c.render(w, r, rq, http.StatusOK, "error", errorPage{Title: "No apps yet",
				Message: "You hold no permission on any app yet. Ask the organisation's owner to grant you some."})
			return
		}
		http.Redirect(w, r, rq.v.Apps[0].URL, http.StatusSeeOther)
	})(w, r)
}

// appHome sends a person to the first page of the app they may use.
func (c *console) appHome(w http.ResponseWriter, r *http.Request, rq *request) {
	if len(rq.v.Nav) == 0 {
		c.render(w, r, rq, http.StatusForbidden, "error", errorPage{Title: "Nothing to see here",
			Message: "You hold no permission on the " + rq.app + " app."})
		return
	}
	http.Redirect(w, r, rq.v.Nav[0].URL, http.StatusSeeOther)
}

// allowed answers 403 when the page is not one the person may use, and says whether to go on.
func (c *console) allowed(w http.ResponseWriter, r *http.Request, rq *request, path string) bool {
	for _, pg := range menu {
		if pg.path == path && pg.shown(rq.p, rq.app) {
			return true
		}
	}
	c.render(w, r, rq, http.StatusForbidden, "error", errorPage{Title: "Permission denied",
		Message: "Your permissions on the " + rq.app + " app do not open this page."})
	return false
}

// guarded is a page handler that only those the menu shows it to reach (any signed-in
// person when path is empty).
func (c *console) guarded(path string, next handler) http.HandlerFunc {
	return c.person(func(w http.ResponseWriter, r *http.Request, rq *request) {
		if path == "" || c.allowed(w, r, rq, path) {
			next(w, r, rq)
		}
	})
}

type errorPage struct {
	Title, Message string
}

// render writes a page; rq is nil before anyone is signed in.
func (c *console) render(w http.ResponseWriter, r *http.Request, rq *request, status int, page string, data any) {
	t := c.pages[page]
	v := &view{}
	if rq != nil {
		v = rq.v
	}
	v.Page = data
	if v.Title == "" {
		if ep, ok := data.(errorPage); ok {
			v.Title = ep.Title
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
	w.WriteHeader(status)
	if err := t.ExecuteTemplate(w, "layout.html", v); err != nil {
		c.Log.Error("console page not rendered", "page", page, "correlationId", correlationID(r), "error", err)
	}
}

// message is a refusal said for a person: its detail and, for invalid input, each field.
func message(err error) string {
	var e *service.Error
	if !errors.As(err, &e) {
		return "Something went wrong on our side. Try again; if it persists, quote the request's correlation id."
	}
	parts := []string{e.Detail}
	for _, f := range e.Fields {
		parts = append(parts, f.Field+" "+f.Message)
	}
	for _, v := range e.Violations {
		parts = append(parts, v.Rule+": "+v.Message)
	}
	return strings.Join(parts, " — ")
}

// statusOf is the HTTP status of an error: a refusal's, or 500 for anything else, which
// is logged.
func (c *console) statusOf(r *http.Request, err error) int {
	if status := service.KindOf(err).Status(); status != 0 {
		return status
	}
	c.Log.Error("console request failed", "path", r.URL.Path, "correlationId", correlationID(r), "error", err.Error())
	return http.StatusInternalServerError
}

// failed renders a page's error.
func (c *console) failed(w http.ResponseWriter, r *http.Request, rq *request, err error) {
	status := c.statusOf(r, err)
	c.render(w, r, rq, status, "error", errorPage{Title: http.StatusText(status), Message: message(err)})
}

// back answers a form: back to the page it came from, saying what happened.
func (c *console) back(w http.ResponseWriter, r *http.Request, to string, err error, done string) {
	if err != nil && service.KindOf(err) == 0 {
		c.Log.Error("console request failed", "path", r.URL.Path, "correlationId", correlationID(r), "error", err.Error())
	}
	q := url.Values{}
	if err != nil {
		q.Set("error", message(err))
	} else if done != "" {
		q.Set("notice", done)
	}
	sep := "?"
	if strings.Contains(to, "?") {
		sep = "&"
	}
	if len(q) == 0 {
		sep = ""
	}
	http.Redirect(w, r, to+sep+q.Encode(), http.StatusSeeOther)
}

type signInPage struct {
	Email, Next, Error string
	CredentialsFile    string
}

// signInPage shows the sign-in form.
func (c *console) signInPage(w http.ResponseWriter, r *http.Request) {
	v := &view{Title: "Sign in"}
	c.render(w, r, &request{v: v}, http.StatusOK, "signin", signInPage{Next: safeNext(r.URL.Query().Get("next")),
		CredentialsFile: c.CredentialsFile})
}

// safeNext keeps a redirect after sign-in within the console.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/console/") || strings.HasPrefix(next, "//") || strings.Contains(next, `\`) {
		return "/console/"
	}
	return next
}

// signIn checks the form's e-mail and password with the same service as the API's
// POST /api/v1/sessions, and gives the browser the session cookie.
func (c *console) signIn(w http.ResponseWriter, r *http.Request) {
	// Login CSRF: another site's form could sign the browser in to the attacker's account.
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" || (r.Header.Get("Origin") != "" && !sameOrigin(r)) {
		c.render(w, r, nil, http.StatusForbidden, "error", errorPage{Title: "Refused", Message: "Sign in from the console itself."})
		return
	}
	email, next := r.PostFormValue("email"), safeNext(r.PostFormValue("next"))
	// The API's middleware has put the client's address (behind trusted proxies) in
	// The client's address as the edge judged it, as the API's sign-in takes it: the failed
	// sign-ins of an address count once, whichever door they use.
	s, err := c.Sessions.SignIn(r.Context(), email, r.PostFormValue("password"), service.OriginOf(r.Context()).ClientAddr,
		correlationID(r))
	if err != nil {
		c.render(w, r, &request{v: &view{Title: "Sign in"}}, c.statusOf(r, err), "signin", signInPage{Email: email, Next: next, Error: message(err),
			CredentialsFile: c.CredentialsFile})
		return
	}
	sessioncookie.Set(w, r, s.Token, s.Principal.ExpiresAt)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func sameOrigin(r *http.Request) bool {
	u, err := url.Parse(r.Header.Get("Origin"))
	return err == nil && u.Host == r.Host
}

type welcomePage struct {
	Token, Email, Error string
}

// welcomePage opens a one-time sign-in link: it names whom it is for and asks for their
// password. Opening it does not use it.
func (c *console) welcomePage(w http.ResponseWriter, r *http.Request) {
	token := r.URL.Query().Get("token")
	u, err := c.Sessions.LinkPerson(r.Context(), token)
	if err != nil {
		c.render(w, r, nil, c.statusOf(r, err), "error", errorPage{Title: "Sign-in link", Message: message(err)})
		return
	}
	c.render(w, r, &request{v: &view{Title: "Set your password"}}, http.StatusOK, "welcome", welcomePage{Token: token, Email: u.Email})
}

// welcome uses the link: the password is set, and the browser signed in.
func (c *console) welcome(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" || (r.Header.Get("Origin") != "" && !sameOrigin(r)) {
		c.render(w, r, nil, http.StatusForbidden, "error", errorPage{Title: "Refused", Message: "Set your password from the console itself."})
		return
	}
	token, password := r.PostFormValue("token"), r.PostFormValue("password")
	var err error
	if password != r.PostFormValue("confirm") {
		err = &service.Error{Kind: service.Invalid, Detail: "The two passwords differ."}
	}
	var s *service.Session
	if err == nil {
		s, err = c.Sessions.RedeemLink(r.Context(), token, password, service.OriginOf(r.Context()).ClientAddr, correlationID(r))
	}
	if err != nil {
		u, lookup := c.Sessions.LinkPerson(r.Context(), token)
		if lookup != nil {
			c.render(w, r, nil, c.statusOf(r, err), "error", errorPage{Title: "Sign-in link", Message: message(err)})
			return
		}
		c.render(w, r, &request{v: &view{Title: "Set your password"}}, c.statusOf(r, err), "welcome",
			welcomePage{Token: token, Email: u.Email, Error: message(err)})
		return
	}
	sessioncookie.Set(w, r, s.Token, s.Principal.ExpiresAt)
	http.Redirect(w, r, "/console/", http.StatusSeeOther)
}

// signOut ends the session and forgets its cookie.
func (c *console) signOut(w http.ResponseWriter, r *http.Request, rq *request) {
	if err := c.Sessions.SignOut(r.Context(), rq.p); err != nil {
		c.failed(w, r, rq, err)
		return
	}
	sessioncookie.Clear(w, r)
	http.Redirect(w, r, "/console/sign-in?notice=Signed+out", http.StatusSeeOther)
}

// when renders a time (or a *time.Time) as the API does, in a <time> element; nil as a
// dash.
func when(t any) template.HTML {
	var at time.Time
	switch v := t.(type) {
	case time.Time:
		at = v
	case *time.Time:
		if v == nil {
			return "—"
		}
		at = *v
	default:
		return "—"
	}
	s := events.FormatTime(at) // digits, dashes, colons, a dot, T and Z: nothing to escape
	return template.HTML(`<time datetime="` + s + `">` + s + `</time>`)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
