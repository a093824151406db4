// Package api is the public HTTP API: the Gin router, its middleware (correlation id,
// problem errors, body limit, timeout, recovery, access log, authentication) and handlers.
package api

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/docs"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/chain/rpcproxy"
	"github.com/opentreasury/treasury/internal/metrics"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/ratelimit"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
)

// MaxBodyBytes is the largest request body accepted (SPEC section 8).
const MaxBodyBytes = 1 << 20

// ReadinessCheck is one dependency that must answer for the API to take traffic.
type ReadinessCheck struct {
	Name  string
	Check func(ctx context.Context) error
}

// Config is what the router is built from.
type Config struct {
	// Service runs every operation the routes ask for; the process builds it once and
	// hands the same one to everything that serves callers.
	Service        *service.Service
	Store          *store.Store
	Log            *slog.Logger
	Readiness      []ReadinessCheck
	RequestTimeout time.Duration
	// RateLimit and RateBurst are each credential's requests per second and burst
	// (50 and 100 when zero).
	RateLimit float64
	RateBurst int
	// RPCRateLimit and RPCRateBurst are each app's JSON-RPC calls per second and burst,
	// shared by all its credentials, every call of a batch counted (100 and 200 when zero).
	RPCRateLimit float64
	RPCRateBurst int
	// OAuthTokenTTL is the lifetime of an access token (15 minutes when zero).
	OAuthTokenTTL time.Duration
	// SessionTTL is how long a person stays signed in (12 hours when zero).
	SessionTTL time.Duration
	// TrustedProxies are the addresses or CIDRs of the load balancers whose
	// X-Forwarded-For names the client; none when empty.
	TrustedProxies []string
	// Now is the clock of sign-ins and their limits (time.Now when nil); tests stop it.
	Now func() time.Time
	// IdempotencyRetention is how long a write's response is kept for replay (24 h default).
	IdempotencyRetention time.Duration
	// Live serves the WebSocket channel; nil answers 503 on /ws.
	Live LiveChannel
	// RequestLogs takes a row per authenticated request for /developer/logs; nil keeps none.
	RequestLogs RequestLogSink
	// Pages, when set, are the people's pages (the console), built beside the API on the
	// same Service, Sessions and Authn, and served under /console/ behind the same edge.
	Pages http.Handler
	// Authn checks credentials, and Sessions signs people in; the process builds them
	// once and shares them with its Pages, so that the failed sign-ins of an address count
	// once, whichever door they use. Nil builds them on Store (tests without pages).
	Authn    *auth.Authenticator
	Sessions *service.Sessions
	// Metrics counts requests, idempotent replays and rate-limit refusals; nil counts
	// nothing. The router does not serve them: see assemble.ServeMetrics.
	Metrics *metrics.Metrics
	// RPCNodes are the chains' JSON-RPC nodes that POST /rpc/{chain} forwards to, by chain
	// name; a chain without one answers 404.
	RPCNodes rpcproxy.Nodes
	// PublicURL is the console's base URL, where one-time sign-in links point; empty
	// builds it from the request.
	PublicURL string
}

func init() { gin.SetMode(gin.ReleaseMode) }

// NewRouter builds the HTTP handler of the public API: its edge (the middleware every
// request passes), then its routes.
func NewRouter(cfg Config) http.Handler {
	if cfg.Service == nil {
		panic("api: the router needs the process's service (Config.Service)")
	}
	cfg = cfg.withDefaults()
	r := newEngine(cfg)
	rt := newRoutes(cfg)
	rt.open(r)
	if cfg.Pages != nil {
		mountPages(r, cfg.Pages, rt.limiter, cfg.Metrics)
	}
	v1 := r.Group(apiBase, rt.authenticated...)
	rt.people(r, v1)
	rt.treasury(v1)
	rt.developer(r, v1)
	rt.orders(v1)
	rt.payouts(v1)
	rt.rpc(r)
	return r
}

func (cfg Config) withDefaults() Config {
	cfg.RequestTimeout = cmp.Or(cfg.RequestTimeout, 30*time.Second)
	cfg.IdempotencyRetention = cmp.Or(cfg.IdempotencyRetention, 24*time.Hour)
	cfg.RateLimit = cmp.Or(max(cfg.RateLimit, 0), 50)
	cfg.RateBurst = cmp.Or(max(cfg.RateBurst, 0), 100)
	cfg.RPCRateLimit = cmp.Or(max(cfg.RPCRateLimit, 0), 100)
	cfg.RPCRateBurst = cmp.Or(max(cfg.RPCRateBurst, 0), 200)
	if cfg.Authn == nil {
		cfg.Authn = auth.NewAuthenticator(cfg.Store)
	}
	if cfg.Sessions == nil {
		cfg.Sessions = NewSessions(cfg)
	}
	return cfg
}

// NewSessions is the sign-in service of a process, with the router's defaults: the
// process hands the same one to its router and its console.
func NewSessions(cfg Config) *service.Sessions {
	cfg.SessionTTL = cmp.Or(max(cfg.SessionTTL, 0), 12*time.Hour)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	sessions := service.NewSessions(cfg.Store, cfg.Authn, cfg.SessionTTL, cfg.Now, cfg.Log)
	sessions.Metrics = cfg.Metrics
	return sessions
}

// newEngine is the router's edge: every request, routed or not, passes this middleware.
func newEngine(cfg Config) *gin.Engine {
	log := cfg.Log
	r := gin.New()
	// X-Forwarded-For is believed only from the configured proxies (none by default):
	// clientIp in the logs and the sign-in limit per address depend on it.
	if err := r.SetTrustedProxies(cfg.TrustedProxies); err != nil {
		log.Error("trusted proxies ignored", "error", err.Error())
		_ = r.SetTrustedProxies(nil)
	}
	r.ContextWithFallback = true
	// A path served under another method answers 405 with Allow, not 404.
	r.HandleMethodNotAllowed = true
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	if cfg.Metrics != nil {
		r.Use(withMetrics(cfg.Metrics))
	}
	r.Use(withForwardedProto(cfg.TrustedProxies), withCorrelationID(), withAccessLog(log), withRecovery(log), withPrintableTarget(), withBodyLimit(MaxBodyBytes), withTimeout(cfg.RequestTimeout))
	routes := sync.OnceValue(r.Routes) // read at the first miss, once every route is in
	r.NoRoute(func(c *gin.Context) {
		detail := "There is nothing at " + c.Request.Method + " " + c.Request.URL.Path + "."
		if near := nearestRoute(routes(), c.Request.Method, c.Request.URL.Path); near != "" {
			detail += " The nearest route is " + near + "."
		}
		fail(c, apitypes.CodeNotFound, detail)
	})
	r.NoMethod(func(c *gin.Context) {
		fail(c, apitypes.CodeMethodNotAllowed, c.Request.URL.Path+" does not take "+c.Request.Method+"; it takes "+c.Writer.Header().Get("Allow")+".")
	})
	return r
}

// routes are the pieces the route groups share.
type routes struct {
	cfg     Config
	svc     *service.Service
	log     *slog.Logger
	limiter *ratelimit.Limiter
	// knownQuery and jsonBody are what every request must be, checked once its caller is
	// known (after authentication where there is any): no query parameter its route does
	// not take, a JSON body.
	knownQuery, jsonBody gin.HandlerFunc
	authn, limit         gin.HandlerFunc
	// idem keeps the answers of writes for their Idempotency-Key's retries.
	idem *idempotency
	// authenticated is what every bearer-authenticated route runs first, Idempotency-Key
	// included; unreplayed the same without it, for a route whose answers are never stored
	// (the read-only JSON-RPC), which takes the header and ignores it.
	authenticated, unreplayed []gin.HandlerFunc
	sessions                  *sessionHandlers
	websockets                *websocketHandlers
}

// apiBase is where the versioned API is served.
const apiBase = apitypes.BasePath

func newRoutes(cfg Config) *routes {
	rt := &routes{cfg: cfg, svc: cfg.Service, log: cfg.Log, limiter: ratelimit.New(cfg.RateLimit, cfg.RateBurst),
		knownQuery: withKnownQuery(), jsonBody: withJSONBody(), authn: authenticate(cfg.Authn, cfg.Log)}
	rt.limit = rateLimit(rt.limiter, cfg.Metrics)
	rt.idem = &idempotency{store: cfg.Store, log: cfg.Log, retention: cfg.IdempotencyRetention,
		lease: max(2*cfg.RequestTimeout, time.Minute), now: time.Now, metrics: cfg.Metrics, folded: map[string]bool{}}
	for _, d := range orders.Domains {
		rt.idem.folded[apiBase+"/"+d.Collection] = true
	}
	rt.unreplayed = []gin.HandlerFunc{rt.authn, withRequestLog(cfg.RequestLogs), rt.limit, rt.knownQuery, rt.jsonBody}
	rt.authenticated = append(slices.Clone(rt.unreplayed), rt.idem.handle)
	rt.sessions = &sessionHandlers{sessions: cfg.Sessions, log: cfg.Log}
	rt.websockets = &websocketHandlers{svc: cfg.Service, log: cfg.Log, live: cfg.Live, authn: cfg.Authn,
		limit: rt.limit, knownQuery: rt.knownQuery}
	return rt
}

// open registers the routes that take no bearer credential: probes, the OpenAPI
// document, the token endpoint, sign-in and the live channel.
func (rt *routes) open(r *gin.Engine) {
	r.GET("/healthz", rt.knownQuery, func(c *gin.Context) { c.PureJSON(http.StatusOK, gin.H{"status": "ok"}) })
	r.GET("/readyz", rt.knownQuery, readiness(rt.cfg.Readiness))
	r.GET("/api/v1/openapi.json", rt.knownQuery, func(c *gin.Context) {
		c.Header("Cache-Control", "public, max-age=300")
		c.Data(http.StatusOK, "application/json", docs.OpenAPI)
	})
	oauth := &oauthHandlers{oauth: &service.OAuth{Store: rt.cfg.Store, TTL: rt.cfg.OAuthTokenTTL}, log: rt.log}
	// The token endpoint is form-encoded (RFC 6749 §4.4). It and sign-in answer with a new
	// secret, never stored: they take an Idempotency-Key as every write does, and ignore
	// it (a repeat simply runs, and gets a secret of its own).
	r.POST("/api/v1/oauth/token", rt.knownQuery, oauth.token)
	r.POST("/api/v1/sessions", rt.knownQuery, rt.jsonBody, rt.sessions.signIn)
	// The channel authenticates by the token in its URL (browsers cannot set headers on
	// a WebSocket), so it sits outside the bearer-authenticated group.
	r.GET("/api/v1/ws", rt.websockets.connect)
}

// people registers a person's own session.
func (rt *routes) people(r *gin.Engine, v1 *gin.RouterGroup) {
	v1.GET("/session", rt.sessions.current)
	v1.DELETE("/session", rt.sessions.signOut)
	// An Idempotency-Key is taken and ignored: the answer is a new session, and a kept
	// request's fingerprint would be a fast hash of the passwords in its body.
	r.POST("/api/v1/session/password", append(slices.Clone(rt.unreplayed), rt.sessions.changePassword)...)
}

// treasury registers the treasury reads, policies, approvals, signing requests and the
// records (events, audit logs).
func (rt *routes) treasury(v1 *gin.RouterGroup) {
	svc, log := rt.svc, rt.log
	ph := &portfolioHandlers{svc: svc, log: log}
	treasuryRead := require("treasury", auth.ActionRead)
	v1.GET("/treasury/portfolio", treasuryRead, ph.portfolio)
	v1.GET("/treasury/wallets", treasuryRead, ph.wallets)
	v1.GET("/treasury/positions", treasuryRead, ph.positions)
	treasuryDeveloper := require("treasury", auth.ActionDeveloper)
	v1.POST("/treasury/wallets/challenges", treasuryDeveloper, ph.challenge)
	v1.POST("/treasury/wallets", treasuryDeveloper, ph.register)
	v1.PATCH("/treasury/wallets/:id", treasuryDeveloper, ph.relabel)
	v1.POST("/treasury/wallets/:id/archive", treasuryDeveloper, ph.archive)
	v1.GET("/wallets", ph.walletDirectory)

	polh := &policyHandlers{svc: svc, log: log}
	v1.GET("/policies/:app", polh.get)
	v1.PUT("/policies/:app", polh.put)
	v1.POST("/policies/:app/evaluate", polh.evaluate)
	v1.GET("/policies/:app/windows", polh.windows)
	v1.GET("/policies/:app/versions", polh.versions)
	v1.GET("/policies/:app/versions/:version", polh.version)
	v1.POST("/policies/:app/versions/:version/rollback", polh.rollback)
	v1.GET("/policies/:app/drafts", polh.drafts)
	v1.POST("/policies/:app/drafts", polh.createDraft)
	v1.GET("/policies/:app/drafts/:id", polh.draft)
	v1.PUT("/policies/:app/drafts/:id", polh.updateDraft)
	v1.POST("/policies/:app/drafts/:id/approve", polh.draftAction(polh.svc.ApprovePolicyDraft, auth.ActionDeveloper))
	v1.POST("/policies/:app/drafts/:id/publish", polh.draftAction(polh.svc.PublishPolicyDraft, auth.ActionDeveloper))
	v1.POST("/policies/:app/drafts/:id/discard", polh.draftAction(polh.svc.DiscardPolicyDraft, auth.ActionDeveloper))
	v1.POST("/policies/:app/dry-runs", polh.startDryRun)
	v1.GET("/policies/:app/dry-runs/:id", polh.dryRun)

	ah := &approvalHandlers{svc: svc, log: log}
	v1.GET("/approvals", ah.list)
	v1.POST("/approvals/:domain/:id/decide", ah.decide)
	v1.GET("/approver-keys", ah.approverKeys)
	sgh := &signingHandlers{svc: svc, log: log}
	v1.GET("/signing-requests", sgh.list)
	v1.GET("/signing-requests/:id", sgh.get)
	v1.POST("/signing-requests/:id/signature", sgh.sign)
	v1.POST("/signing-requests/:id/refusal", sgh.refuse)

	rh := &recordHandlers{svc: svc, log: log}
	v1.GET("/events", requireReach(service.Events), rh.events)
	v1.GET("/audit-logs", requireReach(service.AuditRecords), rh.auditLogs)
	// The chain holds every app's records: the dashboard's read on treasury reads it.
	v1.GET("/audit-logs/export", treasuryRead, rh.exportAuditLog)
	v1.GET("/audit-logs/verify", treasuryRead, rh.verifyAuditChain)
	v1.POST("/audit-logs/verifications", treasuryRead, rh.startAuditVerification)
	v1.GET("/audit-logs/verifications/:id", treasuryRead, rh.auditVerification)
}

// developer registers the developer surface. It sits at the root, /developer/… (SPEC 6).
// It also answers under /api/v1/developer/…, where it was first served, so that v1 stays
// additive: one route table, registered on both groups, behind the same middleware.
func (rt *routes) developer(r *gin.Engine, v1 *gin.RouterGroup) {
	svc, log := rt.svc, rt.log
	dh := developerHandlers{
		log:          log,
		keys:         &keyHandlers{svc: svc, log: log},
		oauthClients: &oauthClientHandlers{svc: svc, log: log},
		team:         &teamHandlers{svc: svc, log: log, publicURL: rt.cfg.PublicURL},
		requestLogs:  &requestLogHandlers{svc: svc, log: log},
		websockets:   rt.websockets,
		webhooks:     &webhookHandlers{svc: svc, log: log},
	}
	dh.register(r.Group("/developer", rt.authenticated...))
	dh.register(v1.Group("/developer"))
}

// orders registers the four order routes of every domain.
func (rt *routes) orders(v1 *gin.RouterGroup) {
	for _, d := range orders.Domains {
		oh := &orderHandlers{svc: rt.svc, log: rt.log, domain: d}
		base := "/" + d.Collection
		v1.POST(base, require(d.App, auth.ActionWrite), rt.idem.folding(oh.create))
		v1.POST(base+"/:id/submit", require(d.App, auth.ActionWrite), oh.submit)
		v1.GET(base, require(d.App, auth.ActionRead), oh.list)
		v1.GET(base+"/:id", require(d.App, auth.ActionRead), oh.get)
	}
}

// rpc registers the JSON-RPC endpoint of the chains' nodes under /api/v1, as SPEC 3.6
// places it, and at /rpc, its alias, behind the same middleware as every authenticated
// route; both share one budget per app.
func (rt *routes) rpc(r *gin.Engine) {
	h := &rpcHandlers{nodes: rt.cfg.RPCNodes, log: rt.log, budget: ratelimit.New(rt.cfg.RPCRateLimit, rt.cfg.RPCRateBurst),
		metrics: rt.cfg.Metrics}
	for _, prefix := range []string{"/api/v1/rpc", "/rpc"} {
		r.Group(prefix, rt.unreplayed...).POST("/:chain", requireAppCredential(auth.ActionRead), h.forward)
	}
}

// readiness answers 200 when every dependency answers within two seconds, 503 otherwise,
// naming the ones that did not.
func readiness(checks []ReadinessCheck) gin.HandlerFunc {
	return func(c *gin.Context) {
		ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
		defer cancel()
		status := map[string]string{}
		var down []string
		for _, chk := range checks {
			if err := chk.Check(ctx); err != nil {
				status[chk.Name] = "unavailable"
				down = append(down, chk.Name)
				continue
			}
			status[chk.Name] = "ok"
		}
		if len(down) > 0 {
			p := NewProblem(apitypes.CodeUnavailable, "Not ready: "+strings.Join(down, ", ")+" did not answer.")
			abortProblem(c, p)
			return
		}
		c.PureJSON(http.StatusOK, gin.H{"status": "ready", "checks": status})
	}
}

// developerHandlers serve the developer surface: an app's keys, OAuth clients, team,
// request logs and WebSocket configs.
type developerHandlers struct {
	log          *slog.Logger
	keys         *keyHandlers
	oauthClients *oauthClientHandlers
	team         *teamHandlers
	requestLogs  *requestLogHandlers
	websockets   *websocketHandlers
	webhooks     *webhookHandlers
}

// credentialHandlers serve one kind of credential: list, create (its secret shown once),
// read one, revoke.
type credentialHandlers interface {
	list(c *gin.Context)
	create(c *gin.Context)
	get(c *gin.Context)
	revoke(c *gin.Context)
}

// register adds the developer routes to g, a group whose path ends in /developer.
func (d developerHandlers) register(g *gin.RouterGroup) {
	dev := requireOwn(auth.ActionDeveloper)
	for _, cr := range []struct {
		path     string
		handlers credentialHandlers
	}{{"/api-keys", d.keys}, {"/oauth-clients", d.oauthClients}} {
		g.GET(cr.path, dev, cr.handlers.list)
		g.POST(cr.path, dev, cr.handlers.create)
		g.GET(cr.path+"/:id", dev, cr.handlers.get)
		g.DELETE(cr.path+"/:id", dev, cr.handlers.revoke)
	}

	g.GET("/team", dev, d.team.list)
	g.POST("/team", dev, requireOwner(d.log), d.team.add)
	g.PATCH("/team/:id", dev, requireOwner(d.log), d.team.update)
	g.DELETE("/team/:id", dev, requireOwner(d.log), d.team.remove)

	g.GET("/logs", dev, d.requestLogs.list)

	g.GET("/websockets", dev, d.websockets.list)
	g.POST("/websockets", dev, d.websockets.create)
	g.GET("/websockets/:id", dev, d.websockets.get)
	g.PATCH("/websockets/:id", dev, d.websockets.update)
	g.DELETE("/websockets/:id", dev, d.websockets.remove)
	g.POST("/websockets/:id/test", dev, d.websockets.test)

	g.GET("/webhooks", dev, d.webhooks.list)
	g.POST("/webhooks", dev, d.webhooks.create)
	g.GET("/webhooks/:id", dev, d.webhooks.get)
	g.PATCH("/webhooks/:id", dev, d.webhooks.update)
	g.DELETE("/webhooks/:id", dev, d.webhooks.remove)
	g.POST("/webhooks/:id/rotate-secret", dev, d.webhooks.rotate)
	g.POST("/webhooks/:id/test", dev, d.webhooks.test)
	g.GET("/webhooks/:id/deliveries", dev, d.webhooks.deliveries)
	g.POST("/webhooks/:id/deliveries/:deliveryId/redeliver", dev, d.webhooks.redeliver)
	g.POST("/webhooks/:id/recover", dev, d.webhooks.startRecovery)
	g.GET("/webhooks/:id/recoveries", dev, d.webhooks.recoveries)
	g.GET("/webhooks/:id/recoveries/:recoveryId", dev, d.webhooks.recovery)
}

// mountPages serves the people's pages behind the API's edge (correlation id, access
// log, recovery, body limit, timeout), limited per client address with the API's rate
// and burst. They get the correlation id and the client's address (resolved behind the
// trusted proxies) as the request's service.Origin.
func mountPages(r *gin.Engine, pages http.Handler, limiter *ratelimit.Limiter, m *metrics.Metrics) {
	r.GET("/console", func(c *gin.Context) { c.Redirect(http.StatusSeeOther, "/console/") })
	serve := func(c *gin.Context) {
		if ok, _, wait := limiter.Take("console " + c.ClientIP()); !ok {
			m.RateLimited(metrics.LimiterConsole)
			c.Header("Retry-After", retryAfter(wait))
			c.String(http.StatusTooManyRequests, "Too many requests from this address; retry after %s s.", retryAfter(wait))
			return
		}
		ctx := service.WithOrigin(c.Request.Context(), service.Origin{CorrelationID: correlationID(c), ClientAddr: c.ClientIP()})
		pages.ServeHTTP(c.Writer, c.Request.WithContext(ctx))
	}
	// Pages are read with GET and forms sent with POST; nothing else reaches the console.
	r.GET("/console/*path", serve)
	r.POST("/console/*path", serve)
}
