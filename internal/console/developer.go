package console

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/sessioncookie"
	"github.com/opentreasury/treasury/internal/store"
)

func (c *console) developerRoutes() []route {
	return []route{
		{"GET /console/{app}/api-keys", "api-keys", c.keys},
		{"POST /console/{app}/api-keys", "api-keys", c.createKey},
		{"POST /console/{app}/api-keys/{id}/revoke", "api-keys", c.revokeKey},
		{"GET /console/{app}/oauth-clients", "oauth-clients", c.clients},
		{"POST /console/{app}/oauth-clients", "oauth-clients", c.createClient},
		{"POST /console/{app}/oauth-clients/{id}/revoke", "oauth-clients", c.revokeClient},
		{"GET /console/{app}/websockets", "websockets", c.websockets},
		{"GET /console/{app}/websockets/live", "websockets", c.websocketsLive},
		{"POST /console/{app}/websockets", "websockets", c.createWebSocket},
		{"POST /console/{app}/websockets/{id}/enabled", "websockets", c.enableWebSocket},
		{"POST /console/{app}/websockets/{id}/delete", "websockets", c.deleteWebSocket},
		{"POST /console/{app}/websockets/{id}/test", "websockets", c.testWebSocket},
		{"GET /console/{app}/webhooks", "webhooks", c.webhooks},
		{"POST /console/{app}/webhooks", "webhooks", c.createWebhook},
		{"GET /console/{app}/webhooks/{id}", "webhooks", c.webhook},
		{"POST /console/{app}/webhooks/{id}", "webhooks", c.updateWebhook},
		{"POST /console/{app}/webhooks/{id}/delete", "webhooks", c.deleteWebhook},
		{"POST /console/{app}/webhooks/{id}/rotate", "webhooks", c.rotateWebhook},
		{"POST /console/{app}/webhooks/{id}/test", "webhooks", c.testWebhook},
		{"POST /console/{app}/webhooks/{id}/recover", "webhooks", c.recoverWebhook},
		{"POST /console/{app}/webhooks/{id}/deliveries/{delivery}/redeliver", "webhooks", c.redeliver},
		{"GET /console/{app}/team", "team", c.team},
		{"POST /console/{app}/team", "team", c.invite},
		{"POST /console/{app}/team/{id}", "team", c.setActions},
		{"POST /console/{app}/team/{id}/remove", "team", c.removeMember},
	}
}

// entries splits what a person typed as a list: commas, spaces or new lines.
func entries(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' })
}

// show renders page under title with what load returns, or the failure to load it.
func (c *console) show(w http.ResponseWriter, r *http.Request, rq *request, title, page string, load func() (any, error)) {
	rq.v.Title = title
	data, err := load()
	if err != nil {
		c.failed(w, r, rq, err)
		return
	}
	c.render(w, r, rq, http.StatusOK, page, data)
}

// after goes back to path saying what was done, or, when err, why it was not.
func (c *console) after(w http.ResponseWriter, r *http.Request, path string, err error, done func() string) {
	if err != nil {
		c.back(w, r, path, err, "")
		return
	}
	c.back(w, r, path, nil, done())
}

// secretShown is the page that shows a new secret, once.
type secretShown struct {
	What, Name, Secret, Back, Note string
}

func (c *console) showSecret(w http.ResponseWriter, r *http.Request, rq *request, s secretShown) {
	rq.v.Title = "Copy the " + s.Name + " now"
	c.render(w, r, rq, http.StatusCreated, "secret", s)
}

// credentialsPage is an app's credentials of one kind (API keys, OAuth clients) beside
// the actions a new one may hold.
type credentialsPage[T any] struct {
	List    []T
	Actions []string
}

// showCredentials shows the page template of the credentials list reads.
func showCredentials[T any](c *console, w http.ResponseWriter, r *http.Request, rq *request, title, template string,
	list func(context.Context, service.Caller, service.Page) ([]T, string, error)) {
	c.show(w, r, rq, title, template, func() (any, error) {
		found, _, err := list(r.Context(), rq.caller(r), service.Page{Limit: 200})
		return credentialsPage[T]{List: found, Actions: auth.AllActions}, err
	})
}

func (c *console) keys(w http.ResponseWriter, r *http.Request, rq *request) {
	showCredentials(c, w, r, rq, "API keys", "keys", c.Service.ListAPIKeys)
}

// createKey makes a key and shows its secret, this once.
func (c *console) createKey(w http.ResponseWriter, r *http.Request, rq *request) {
	_ = r.ParseForm()
	kind := r.PostFormValue("kind")
	req := service.KeyRequest{Kind: kind, Label: strings.TrimSpace(r.PostFormValue("label"))}
	if kind == auth.KindResource {
		req.Actions = r.PostForm["actions"]
		req.ResourceIDs = entries(r.PostFormValue("resourceIds"))
	}
	k, secret, err := c.Service.CreateAPIKey(r.Context(), rq.caller(r), req)
	if err != nil {
		c.back(w, r, "/console/"+rq.app+"/api-keys", err, "")
		return
	}
	c.showSecret(w, r, rq, secretShown{What: "API key " + k.ID, Name: "secret", Secret: secret, Back: "/console/" + rq.app + "/api-keys",
		Note: "It is stored hashed: nobody, us included, can show it again. Revoke the key and make another if it is lost."})
}

func (c *console) revokeKey(w http.ResponseWriter, r *http.Request, rq *request) {
	k, err := c.Service.RevokeAPIKey(r.Context(), rq.caller(r), r.PathValue("id"))
	c.after(w, r, "/console/"+rq.app+"/api-keys", err, func() string { return "Key " + k.ID + " revoked: it stops working at once." })
}

func (c *console) clients(w http.ResponseWriter, r *http.Request, rq *request) {
	showCredentials(c, w, r, rq, "OAuth clients", "clients", c.Service.ListOAuthClients)
}

func (c *console) createClient(w http.ResponseWriter, r *http.Request, rq *request) {
	_ = r.ParseForm()
	scopes := make([]string, 0, len(r.PostForm["actions"]))
	for _, a := range r.PostForm["actions"] {
		scopes = append(scopes, rq.app+":"+a)
	}
	oc, secret, err := c.Service.CreateOAuthClient(r.Context(), rq.caller(r),
		service.OAuthClientRequest{Scopes: strings.Join(scopes, " "), Label: strings.TrimSpace(r.PostFormValue("label"))})
	if err != nil {
		c.back(w, r, "/console/"+rq.app+"/oauth-clients", err, "")
		return
	}
	c.showSecret(w, r, rq, secretShown{What: "OAuth client " + oc.ID + " (its client id)", Name: "client secret", Secret: secret,
		Back: "/console/" + rq.app + "/oauth-clients", Note: "It is stored hashed: it cannot be shown again."})
}

func (c *console) revokeClient(w http.ResponseWriter, r *http.Request, rq *request) {
	oc, err := c.Service.RevokeOAuthClient(r.Context(), rq.caller(r), r.PathValue("id"))
	c.after(w, r, "/console/"+rq.app+"/oauth-clients", err, func() string {
		return "OAuth client " + oc.ID + " revoked, with every token it was given."
	})
}

type websocketsPage struct {
	Configs []service.WebSocketConfig
	Names   []string
	// Channel is the live channel's URL on this service; a config's id follows it.
	Channel string
}

// channelURL is the live channel's URL as the browser reached this page: wss when it came
// over https (as the session cookie judges it, believing trusted proxies only), on the
// page's host, up to ?id=.
func channelURL(r *http.Request) string {
	u := url.URL{Scheme: "ws", Host: r.Host, Path: "/api/v1/ws"}
	if sessioncookie.Secure(r) {
		u.Scheme = "wss"
	}
	return u.String() + "?id="
}

func (c *console) websockets(w http.ResponseWriter, r *http.Request, rq *request) {
	c.show(w, r, rq, "WebSockets", "websockets", func() (any, error) {
		list, _, err := c.Service.ListWebSocketConfigs(r.Context(), rq.caller(r), service.Page{Limit: 200})
		return websocketsPage{Configs: list, Names: events.Names, Channel: channelURL(r)}, err
	})
}

// liveConfig is what the WebSockets page's script refreshes of a config.
type liveConfig struct {
	ID              string         `json:"id"`
	LiveConnections int            `json:"liveConnections"`
	DeliveryLog     []liveDelivery `json:"deliveryLog"`
}

type liveDelivery struct {
	EventID string `json:"eventId"`
	Event   string `json:"event"`
	At      string `json:"at"`
}

// websocketsLive answers the WebSockets page's script: each config's live connections and
// delivery log, as JSON. The page polls it, rather than the API, so that a page left open
// does not fill the app's request log.
func (c *console) websocketsLive(w http.ResponseWriter, r *http.Request, rq *request) {
	list, _, err := c.Service.ListWebSocketConfigs(r.Context(), rq.caller(r), service.Page{Limit: 200})
	if err != nil {
		http.Error(w, message(err), c.statusOf(r, err))
		return
	}
	out := make([]liveConfig, len(list))
	for i, cfg := range list {
		out[i] = liveConfig{ID: cfg.ID, LiveConnections: cfg.LiveConnections, DeliveryLog: make([]liveDelivery, len(cfg.DeliveryLog))}
		for j, d := range cfg.DeliveryLog {
			out[i].DeliveryLog[j] = liveDelivery{EventID: d.EventID, Event: d.Event, At: events.FormatTime(d.SentAt)}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(map[string]any{"data": out})
}

func (c *console) createWebSocket(w http.ResponseWriter, r *http.Request, rq *request) {
	cfg, err := c.Service.CreateWebSocketConfig(r.Context(), rq.caller(r), entries(r.PostFormValue("events")))
	done := ""
	if err == nil {
		done = "Config " + cfg.ID + " created: connect to " + channelURL(r) + cfg.ID + "&token=<your pk_ key>."
	}
	c.back(w, r, "/console/"+rq.app+"/websockets", err, done)
}

func (c *console) enableWebSocket(w http.ResponseWriter, r *http.Request, rq *request) {
	enabled := r.PostFormValue("enabled") == "true"
	_, err := c.Service.SetWebSocketConfigEnabled(r.Context(), rq.caller(r), r.PathValue("id"), enabled)
	done := "Config enabled."
	if !enabled {
		done = "Config disabled: its live connections were closed (4001)."
	}
	c.back(w, r, "/console/"+rq.app+"/websockets", err, done)
}

func (c *console) deleteWebSocket(w http.ResponseWriter, r *http.Request, rq *request) {
	err := c.Service.DeleteWebSocketConfig(r.Context(), rq.caller(r), r.PathValue("id"))
	c.back(w, r, "/console/"+rq.app+"/websockets", err, "Config deleted: its live connections were closed (4004).")
}

func (c *console) testWebSocket(w http.ResponseWriter, r *http.Request, rq *request) {
	_, err := c.Service.TestWebSocketConfig(r.Context(), rq.caller(r), r.PathValue("id"))
	c.back(w, r, "/console/"+rq.app+"/websockets", err, "Test event sent to every live connection of the config.")
}

type webhooksPage struct {
	Webhooks []store.WebhookConfig
	// Disabled are the webhooks the service disabled (every delivery failing), for the
	// banner above the list.
	Disabled []store.WebhookConfig
}

// disabledByService says whether the service, not a person, disabled a webhook.
func disabledByService(c *store.WebhookConfig) bool { return !c.Enabled && c.DisabledReason != nil }

func (c *console) webhooks(w http.ResponseWriter, r *http.Request, rq *request) {
	c.show(w, r, rq, "Webhooks", "webhooks", func() (any, error) {
		list, _, err := c.Service.ListWebhooks(r.Context(), rq.caller(r), service.Page{Limit: 200})
		page := webhooksPage{Webhooks: list}
		for i := range list {
			if disabledByService(&list[i]) {
				page.Disabled = append(page.Disabled, list[i])
			}
		}
		return page, err
	})
}

// rateLimit reads a form's rate limit: nil when the field is absent, 0 (none) when it is
// empty, and -1 (refused by the service, with its range) when it is not a number of
// messages per second.
func rateLimit(r *http.Request) *int {
	if !r.PostForm.Has("rateLimit") {
		return nil
	}
	n := 0
	if typed := strings.TrimSpace(r.PostFormValue("rateLimit")); typed != "" {
		var err error
		if n, err = strconv.Atoi(typed); err != nil || n == 0 {
			n = -1
		}
	}
	return &n
}

func (c *console) createWebhook(w http.ResponseWriter, r *http.Request, rq *request) {
	limit := rateLimit(r)
	if limit != nil && *limit == 0 {
		limit = nil // empty: no rate limit of its own
	}
	hook, secret, err := c.Service.CreateWebhook(r.Context(), rq.caller(r), strings.TrimSpace(r.PostFormValue("url")),
		entries(r.PostFormValue("events")), strings.TrimSpace(r.PostFormValue("description")), limit)
	if err != nil {
		c.back(w, r, "/console/"+rq.app+"/webhooks", err, "")
		return
	}
	c.showSecret(w, r, rq, secretShown{What: "webhook " + hook.ID, Name: "signing secret", Secret: secret,
		Back: "/console/" + rq.app + "/webhooks/" + hook.ID,
		Note: "Your endpoint verifies every message with it (client.VerifyWebhook). It cannot be shown again; rotate it to get a new one."})
}

// recoveriesShown is how many of a webhook's recoveries its page lists, newest first.
const recoveriesShown = 20

type webhookPage struct {
	Webhook    *store.WebhookConfig
	Deliveries []service.Delivery
	Status     string
	Statuses   []string
	Next       string
	// DisabledByService puts the banner on the page: the service disabled the webhook.
	DisabledByService bool
	Recoveries        []store.WebhookRecovery
	// Since fills the recovery form's since: the ?since= of the page, or when the
	// webhook's failures began.
	Since string
}

// deliveryStatuses are the statuses the deliveries list is filtered by.
var deliveryStatuses = []string{store.DeliveryPending, store.DeliverySucceeded, store.DeliveryFailed, store.DeliverySkipped}

func (c *console) webhook(w http.ResponseWriter, r *http.Request, rq *request) {
	ctx, who := r.Context(), rq.caller(r)
	hook, err := c.Service.GetWebhook(ctx, who, r.PathValue("id"))
	if err != nil {
		c.failed(w, r, rq, err)
		return
	}
	rq.v.Title = "Webhook " + hook.ID
	q := r.URL.Query()
	list, next, err := c.Service.ListWebhookDeliveries(ctx, who, hook.ID, service.DeliveryFilter{Status: q.Get("status"),
		Page: service.Page{After: q.Get("after"), Limit: pageSize}})
	if err != nil {
		c.failed(w, r, rq, err)
		return
	}
	recoveries, _, err := c.Service.WebhookRecoveries(ctx, who, hook.ID, service.Page{Limit: recoveriesShown})
	if err != nil {
		c.failed(w, r, rq, err)
		return
	}
	page := webhookPage{Webhook: hook, Deliveries: list, Status: q.Get("status"), Statuses: deliveryStatuses, Next: next,
		DisabledByService: disabledByService(hook), Recoveries: recoveries}
	if t, ok := formTime(q.Get("since")); ok {
		page.Since = localInput(t)
	} else if hook.FailingSince != nil {
		page.Since = localInput(*hook.FailingSince)
	}
	c.render(w, r, rq, http.StatusOK, "webhook", page)
}

// updateWebhook saves the settings form (URL, events, description, rate limit) or the
// Enable/Disable button. Enabling a webhook the service disabled clears when its failures
// began; the page comes back with the recovery form filled in from then.
func (c *console) updateWebhook(w http.ResponseWriter, r *http.Request, rq *request) {
	ch := service.WebhookChange{}
	if r.PostForm.Has("url") {
		url, evs, desc := strings.TrimSpace(r.PostFormValue("url")), entries(r.PostFormValue("events")), strings.TrimSpace(r.PostFormValue("description"))
		ch.URL, ch.Events, ch.Description = &url, &evs, &desc
	}
	ch.RateLimit = rateLimit(r)
	if r.PostForm.Has("enabled") {
		enabled := r.PostFormValue("enabled") == "true"
		ch.Enabled = &enabled
	}
	ctx, who, id := r.Context(), rq.caller(r), r.PathValue("id")
	path, done := "/console/"+rq.app+"/webhooks/"+id, "Webhook saved."
	var failingSince *time.Time
	if ch.Enabled != nil && *ch.Enabled {
		if before, err := c.Service.GetWebhook(ctx, who, id); err == nil && disabledByService(before) {
			failingSince = before.FailingSince
		}
	}
	_, err := c.Service.UpdateWebhook(ctx, who, id, ch)
	if err == nil && failingSince != nil {
		path += "?" + url.Values{"since": {localInput(*failingSince)}}.Encode()
		done = "Webhook enabled. Its messages since its failures began (" + events.FormatTime(*failingSince) +
			") were not delivered: recover them below."
	}
	c.back(w, r, path, err, done)
}

// localInput is a time as a datetime-local input's value, in UTC, to the second (rounded
// down, so that a window from it takes in the time itself).
func localInput(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05") }

// formTime reads a time typed in a form: a datetime-local input's value, taken as UTC, or
// an RFC 3339 timestamp.
func formTime(typed string) (time.Time, bool) {
	typed = strings.TrimSpace(typed)
	if typed == "" {
		return time.Time{}, false
	}
	if t, err := time.Parse(time.RFC3339Nano, typed); err == nil {
		return t, true
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04"} {
		if t, err := time.ParseInLocation(layout, typed, time.UTC); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// recoverWebhook starts a recovery of the webhook's failed and skipped messages of the
// window typed (until now when until is empty), as POST /developer/webhooks/{id}/recover
// does, and goes back to the webhook's page, which lists it.
func (c *console) recoverWebhook(w http.ResponseWriter, r *http.Request, rq *request) {
	id := r.PathValue("id")
	path := "/console/" + rq.app + "/webhooks/" + id
	const format = "must be a date and time in UTC, such as 2026-11-22T01:24, or an RFC 3339 timestamp"
	var errs []orders.FieldError
	since, ok := formTime(r.PostFormValue("since"))
	if !ok {
		errs = append(errs, orders.FieldError{Field: "since", Message: format})
	}
	var until *time.Time
	if typed := strings.TrimSpace(r.PostFormValue("until")); typed != "" {
		t, ok := formTime(typed)
		if !ok {
			errs = append(errs, orders.FieldError{Field: "until", Message: format})
		}
		until = &t
	}
	if len(errs) > 0 {
		c.back(w, r, path, &service.Error{Kind: service.Invalid, Detail: "The request has invalid fields; see errors.", Fields: errs}, "")
		return
	}
	rec, err := c.Service.RecoverWebhook(r.Context(), rq.caller(r), id, since, until)
	c.after(w, r, path, err, func() string {
		return "Recovery " + rec.ID + " started: the failed and skipped messages of " + events.FormatTime(rec.Since) + " to " +
			events.FormatTime(rec.Until) + " are sent again, each with its webhook-id. Its progress is listed below."
	})
}

func (c *console) deleteWebhook(w http.ResponseWriter, r *http.Request, rq *request) {
	err := c.Service.DeleteWebhook(r.Context(), rq.caller(r), r.PathValue("id"))
	c.back(w, r, "/console/"+rq.app+"/webhooks", err, "Webhook deleted, with its deliveries.")
}

func (c *console) rotateWebhook(w http.ResponseWriter, r *http.Request, rq *request) {
	hook, secret, err := c.Service.RotateWebhookSecret(r.Context(), rq.caller(r), r.PathValue("id"))
	if err != nil {
		c.back(w, r, "/console/"+rq.app+"/webhooks/"+r.PathValue("id"), err, "")
		return
	}
	c.showSecret(w, r, rq, secretShown{What: "webhook " + hook.ID, Name: "new signing secret", Secret: secret,
		Back: "/console/" + rq.app + "/webhooks/" + hook.ID,
		Note: "The old secret signs beside it for 24 hours: move your endpoint over before then."})
}

func (c *console) testWebhook(w http.ResponseWriter, r *http.Request, rq *request) {
	id := r.PathValue("id")
	_, err := c.Service.TestWebhook(r.Context(), rq.caller(r), id)
	c.back(w, r, "/console/"+rq.app+"/webhooks/"+id, err, "A webhook.test message is on its way; its delivery is listed below.")
}

func (c *console) redeliver(w http.ResponseWriter, r *http.Request, rq *request) {
	id := r.PathValue("id")
	_, err := c.Service.Redeliver(r.Context(), rq.caller(r), id, r.PathValue("delivery"))
	c.back(w, r, "/console/"+rq.app+"/webhooks/"+id, err, "Redelivery queued: the same message, with the same webhook-id.")
}

type teamPage struct {
	Members []service.Member
	Actions []string
	CanEdit bool
}

func (c *console) team(w http.ResponseWriter, r *http.Request, rq *request) {
	c.show(w, r, rq, "Team & Permissions", "team", func() (any, error) {
		list, _, err := c.Service.ListTeam(r.Context(), rq.caller(r), service.Page{Limit: 200})
		return teamPage{Members: list, Actions: auth.AllActions, CanEdit: service.Owner(rq.caller(r)) == nil}, err
	})
}

// invite adds a member with actions on the app and shows their one-time sign-in link,
// once.
func (c *console) invite(w http.ResponseWriter, r *http.Request, rq *request) {
	_ = r.ParseForm()
	m, link, err := c.Service.AddMember(r.Context(), rq.caller(r), r.PostFormValue("email"), r.PostForm["actions"])
	if err != nil {
		c.back(w, r, "/console/"+rq.app+"/team", err, "")
		return
	}
	c.showSecret(w, r, rq, secretShown{What: m.Email, Name: "sign-in link", Secret: link.URL(cmp.Or(c.PublicURL, sessioncookie.Origin(r))),
		Back: "/console/" + rq.app + "/team",
		Note: "Give it to them by a channel you trust: it works once, for 24 hours, and lets them set their own password."})
}

func (c *console) setActions(w http.ResponseWriter, r *http.Request, rq *request) {
	_ = r.ParseForm()
	m, err := c.Service.SetMemberActions(r.Context(), rq.caller(r), r.PathValue("id"), r.PostForm["actions"])
	done := ""
	if err == nil {
		done = m.Email + " now holds " + cmp.Or(strings.Join(m.Actions, ", "), "nothing") + " on " + rq.app + "."
	}
	c.back(w, r, "/console/"+rq.app+"/team", err, done)
}

func (c *console) removeMember(w http.ResponseWriter, r *http.Request, rq *request) {
	m, err := c.Service.RemoveMember(r.Context(), rq.caller(r), r.PathValue("id"))
	done := ""
	if err == nil {
		done = m.Email + " holds nothing on " + rq.app + " any more."
	}
	c.back(w, r, "/console/"+rq.app+"/team", err, done)
}
