package client

import (
	"context"
	"iter"
	"net/http"
	"net/url"
	"strconv"

	"github.com/opentreasury/treasury/apitypes"
)

// The developer surface (/developer/…, at the root of the service) manages one app's
// credentials, team, request logs, WebSocket configs and webhooks. It needs the developer
// action on the app; a person names the app with WithApp.

func developerPath(resource string, ids ...string) string {
	path := "/developer/" + resource
	for _, id := range ids {
		path += "/" + url.PathEscape(id)
	}
	return path
}

// APIKey is a key of the app. Its secret is shown once, by CreateAPIKey.
type APIKey = apitypes.APIKey

// Creator is who made a record: CreatedBy the credential (key_…, oac_…, or usr_… for a
// signed-in person), CreatedByUser the person behind it; nil when there is none.
type Creator = apitypes.Creator

// APIKeyRequest is a new key: Kind sk, tk (with at least one action) or pk.
type APIKeyRequest = apitypes.APIKeyRequest

// ListAPIKeys reads a page of the app's keys, newest first.
func (c *Client) ListAPIKeys(ctx context.Context, o ListOptions, opts ...CallOption) (*Page[APIKey], error) {
	return list[APIKey](ctx, c, developerPath("api-keys"), o.query(), opts)
}

// APIKeys iterates over the app's keys, newest first.
func (c *Client) APIKeys(ctx context.Context, o ListOptions, opts ...CallOption) iter.Seq2[APIKey, error] {
	return all[APIKey](ctx, c, developerPath("api-keys"), o.query(), "cursor", opts)
}

// CreateAPIKey creates a key; its Secret is in this answer and nowhere else, ever.
func (c *Client) CreateAPIKey(ctx context.Context, req APIKeyRequest, opts ...CallOption) (*APIKey, error) {
	return do[APIKey](ctx, c, http.MethodPost, developerPath("api-keys"), req, opts)
}

// GetAPIKey reads one key.
func (c *Client) GetAPIKey(ctx context.Context, id string, opts ...CallOption) (*APIKey, error) {
	return get[APIKey](ctx, c, developerPath("api-keys", id), opts)
}

// RevokeAPIKey revokes a key at once, on every replica; its live connections close (4003).
func (c *Client) RevokeAPIKey(ctx context.Context, id string, opts ...CallOption) (*APIKey, error) {
	return do[APIKey](ctx, c, http.MethodDelete, developerPath("api-keys", id), nil, opts)
}

// OAuthClient is a client-credentials client of the app (see WithClientCredentials). Its
// ClientSecret is in CreateOAuthClient's answer only.
type OAuthClient = apitypes.OAuthClient

// OAuthClientRequest is a new OAuth client: Scopes are space-separated <app>:<action> of
// the caller's app, e.g. "pay:read pay:write".
type OAuthClientRequest = apitypes.OAuthClientRequest

// ListOAuthClients reads a page of the app's OAuth clients, newest first.
func (c *Client) ListOAuthClients(ctx context.Context, o ListOptions, opts ...CallOption) (*Page[OAuthClient], error) {
	return list[OAuthClient](ctx, c, developerPath("oauth-clients"), o.query(), opts)
}

// OAuthClients iterates over the app's OAuth clients, newest first.
func (c *Client) OAuthClients(ctx context.Context, o ListOptions, opts ...CallOption) iter.Seq2[OAuthClient, error] {
	return all[OAuthClient](ctx, c, developerPath("oauth-clients"), o.query(), "cursor", opts)
}

// CreateOAuthClient creates an OAuth client; its ClientSecret is in this answer only.
func (c *Client) CreateOAuthClient(ctx context.Context, req OAuthClientRequest, opts ...CallOption) (*OAuthClient, error) {
	return do[OAuthClient](ctx, c, http.MethodPost, developerPath("oauth-clients"), req, opts)
}

// GetOAuthClient reads one OAuth client.
func (c *Client) GetOAuthClient(ctx context.Context, id string, opts ...CallOption) (*OAuthClient, error) {
	return get[OAuthClient](ctx, c, developerPath("oauth-clients", id), opts)
}

// RevokeOAuthClient revokes a client and every token issued to it, at once.
func (c *Client) RevokeOAuthClient(ctx context.Context, id string, opts ...CallOption) (*OAuthClient, error) {
	return do[OAuthClient](ctx, c, http.MethodDelete, developerPath("oauth-clients", id), nil, opts)
}

// TeamMember is a person of the organisation with their actions on the app. SignInLink
// is the new member's one-time sign-in link, in AddTeamMember's answer only.
type TeamMember = apitypes.TeamMember

// ListTeamMembers reads a page of the organisation's people, oldest first.
func (c *Client) ListTeamMembers(ctx context.Context, o ListOptions, opts ...CallOption) (*Page[TeamMember], error) {
	return list[TeamMember](ctx, c, developerPath("team"), o.query(), opts)
}

// TeamMembers iterates over the organisation's people, oldest first.
func (c *Client) TeamMembers(ctx context.Context, o ListOptions, opts ...CallOption) iter.Seq2[TeamMember, error] {
	return all[TeamMember](ctx, c, developerPath("team"), o.query(), "cursor", opts)
}

// AddTeamMember adds a person with these actions on the app (the owner only, signed in).
func (c *Client) AddTeamMember(ctx context.Context, email string, actions []string, opts ...CallOption) (*TeamMember, error) {
	body := map[string]any{"email": email, "actions": nonNil(actions)}
	return do[TeamMember](ctx, c, http.MethodPost, developerPath("team"), body, opts)
}

// SetTeamMemberActions replaces a member's actions on the app (the owner only); none takes
// them all.
func (c *Client) SetTeamMemberActions(ctx context.Context, id string, actions []string, opts ...CallOption) (*TeamMember, error) {
	body := map[string]any{"actions": nonNil(actions)}
	return do[TeamMember](ctx, c, http.MethodPatch, developerPath("team", id), body, opts)
}

// RemoveTeamMember takes every action on the app from a member (the owner only); their
// account and their permissions on other apps stay.
func (c *Client) RemoveTeamMember(ctx context.Context, id string, opts ...CallOption) (*TeamMember, error) {
	return do[TeamMember](ctx, c, http.MethodDelete, developerPath("team", id), nil, opts)
}

// nonNil sends no actions as [], which the server reads as "none", where null is missing.
func nonNil(actions []string) []string {
	if actions == nil {
		return []string{}
	}
	return actions
}

// RequestLog is one authenticated request of the app, kept seven days.
type RequestLog = apitypes.RequestLog

// RequestLogFilter narrows the request logs.
type RequestLogFilter struct {
	CorrelationID string
	// Status keeps the requests answered with this HTTP status (0: all).
	Status int
	Limit  int
	Cursor string
}

func (f RequestLogFilter) query() url.Values {
	q := url.Values{}
	set(q, "correlationId", f.CorrelationID)
	if f.Status != 0 {
		q.Set("status", strconv.Itoa(f.Status))
	}
	setPage(q, f.Limit, f.Cursor)
	return q
}

// ListRequestLogs reads a page of the app's recent requests, newest first.
func (c *Client) ListRequestLogs(ctx context.Context, f RequestLogFilter, opts ...CallOption) (*Page[RequestLog], error) {
	return list[RequestLog](ctx, c, developerPath("logs"), f.query(), opts)
}

// RequestLogs iterates over the app's recent requests, newest first.
func (c *Client) RequestLogs(ctx context.Context, f RequestLogFilter, opts ...CallOption) iter.Seq2[RequestLog, error] {
	return all[RequestLog](ctx, c, developerPath("logs"), f.query(), "cursor", opts)
}
