package service

import (
	"context"
	"errors"
	"slices"

	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/store"
)

// Authenticator turns a presented token into its principal (auth.Authenticator does).
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (*auth.Principal, error)
}

// LiveCaller is who presents token to the live channel (SPEC 4): an sk_ or pk_ key, a tk_
// key holding read (or a signing device's, for its wallets' signing requests), or an
// OAuth access token with a scope. Anyone else is refused before the config is looked at.
// Admission is two steps, this and AdmitLive, because a front end limits the rate of each
// caller it knows, which it may do only between the two.
func LiveCaller(ctx context.Context, authn Authenticator, token string) (*auth.Principal, error) {
	p, err := authn.Authenticate(ctx, token)
	if errors.Is(err, auth.ErrUnauthenticated) {
		return nil, refuse(Unauthenticated, "The token is unknown, revoked or expired.")
	}
	if err != nil {
		return nil, err
	}
	switch {
	case p.Kind == auth.KindSecret || p.Kind == auth.KindPublishable:
	case p.Kind == auth.KindResource && (slices.Contains(p.Actions, auth.ActionRead) || p.SigningDevice()):
	case p.Kind == auth.KindAccessToken && len(p.Actions) > 0:
	case p.Kind == auth.KindResource:
		return nil, refuse(PermissionDenied, "Listening needs read: connect with a tk_ key holding 'read' (or a signing device's key, for its wallets' signing requests), an sk_ or pk_ key, or an OAuth access token.")
	default:
		return nil, refuse(PermissionDenied, "Connect with an sk_, tk_ or pk_ key of the app, or an OAuth access token with a scope on it.")
	}
	return p, nil
}

// AdmitLive decides whether p, a LiveCaller, may connect to the WebSocket config configID:
// only to a config of its own organisation and app. It answers the config's subscription
// and whom its connection delivers to: a tk_ key's wallet restriction narrows the
// config's events, and a signing device's key also gets every app's signing requests of
// its wallets (those alone, when it does not hold read). The credential is checked now,
// once: an OAuth token that expires later keeps its connection, and only a revocation of
// the key or client ends it. A disabled config is admitted: its connection is then closed
// as if it had been disabled a moment later, so a client handles one case, not two.
func (s *Service) AdmitLive(ctx context.Context, p *auth.Principal, configID string) (events.Subscription, events.Recipient, error) {
	if configID == "" {
		return events.Subscription{}, events.Recipient{}, invalid(field("id", "is required: the WebSocket config id (wsc_…)"))
	}
	cfg, err := s.Store.WebSocketConfigByID(ctx, configID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && cfg.DeletedAt != nil) {
		return events.Subscription{}, events.Recipient{}, refuse(NotFound, "No WebSocket config with this id.")
	}
	if err != nil {
		return events.Subscription{}, events.Recipient{}, err
	}
	if cfg.OrgID != p.OrgID || cfg.App != p.App {
		return events.Subscription{}, events.Recipient{}, refuse(PermissionDenied, "This token does not belong to the config's organisation and app.")
	}
	to := events.Recipient{CredentialID: p.ID, Wallets: p.ResourceIDs, SigningDevice: p.SigningDevice(),
		SigningOnly: p.SigningDevice() && !p.Can(p.App, auth.ActionRead)}
	return cfg.Subscription(), to, nil
}
