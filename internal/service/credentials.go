package service

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/store"
)

// maxResourceIDs bounds a key's resourceIds, each of which is looked up at creation.
const maxResourceIDs = 100

// developer refuses a caller without the developer action on its app: the developer
// surface is about the caller's own app (a person's principal is narrowed to one).
func developer(who Caller) error {
	if who.App == "" || !who.Can(who.App, auth.ActionDeveloper) {
		return refuse(PermissionDenied, "This credential does not have the 'developer' action on the '"+who.App+"' app.")
	}
	return nil
}

// pageOf takes one page of a list read whole, in its order. The developer lists (an app's
// keys, OAuth clients, WebSocket configs, its people) are short, so they are read whole and
// paged here, with the same limit and cursor as every list. key gives an item's place in
// the order, ascending or descending; After is the key of the last item shown, so a page
// still follows on when that item has gone meanwhile.
func pageOf[T any](items []T, pg Page, descending bool, key func(*T) string) ([]T, string) {
	start := 0
	if pg.After != "" {
		start = len(items)
		for i := range items {
			if k := key(&items[i]); (descending && k < pg.After) || (!descending && k > pg.After) {
				start = i
				break
			}
		}
	}
	return trim(items[start:], pg.Limit, key)
}

// ListAPIKeys pages through the caller's app's keys, newest first; never their secrets.
func (s *Service) ListAPIKeys(ctx context.Context, who Caller, pg Page) ([]store.APIKey, string, error) {
	if err := developer(who); err != nil {
		return nil, "", err
	}
	keys, err := s.Store.ListAPIKeys(ctx, who.OrgID, who.App)
	if err != nil {
		return nil, "", err
	}
	list, next := pageOf(keys, pg, true, func(k *store.APIKey) string { return k.ID })
	return list, next, nil
}

// APIKey reads one key of the caller's app; another app's or organisation's is not found.
func (s *Service) APIKey(ctx context.Context, who Caller, id string) (*store.APIKey, error) {
	if err := developer(who); err != nil {
		return nil, err
	}
	k, err := s.Store.APIKey(ctx, who.OrgID, id)
	return ofOwnApp(who, "API key", k, err, func(k *store.APIKey) string { return k.App })
}

// ofOwnApp passes on a record of the caller's app looked up by id: a missing one, or one
// of another app or organisation, is not found alike.
func ofOwnApp[R any](who Caller, what string, rec *R, err error, appOf func(*R) string) (*R, error) {
	if errors.Is(err, store.ErrNotFound) || (err == nil && appOf(rec) != who.App) {
		return nil, refuse(NotFound, "No "+what+" with this id.")
	}
	return rec, err
}

// KeyRequest asks for a new API key.
type KeyRequest struct {
	Kind        string
	Actions     []string
	ResourceIDs []string
	Label       string
	// ApproverKey, for a tk key holding approve, is the public key its decisions are
	// signed with (SPEC 3.5a).
	ApproverKey *ApproverKeyRequest
}

// OAuthClientRequest is a new OAuth client: its space-separated <app>:<action> scopes, a
// label, and, for a client with the approve scope, the public key its decisions are
// signed with (SPEC 3.5a).
type OAuthClientRequest struct {
	Scopes      string
	Label       string
	ApproverKey *ApproverKeyRequest
}

// CreateAPIKey makes a key of the caller's app; its secret is in this answer and nowhere
// else, ever.
func (s *Service) CreateAPIKey(ctx context.Context, who Caller, req KeyRequest) (*store.APIKey, string, error) {
	if err := developer(who); err != nil {
		return nil, "", err
	}
	var errs []orders.FieldError
	switch req.Kind {
	case auth.KindSecret, auth.KindPublishable:
		if len(req.Actions) > 0 || len(req.ResourceIDs) > 0 {
			errs = append(errs, field("actions", "only tk keys take actions and resourceIds"))
		}
	case auth.KindResource:
		if len(req.Actions) == 0 {
			errs = append(errs, field("actions", "a tk key needs at least one action"))
		}
		errs = append(errs, unknownActions(req.Actions)...)
		if len(req.ResourceIDs) > maxResourceIDs {
			errs = append(errs, field("resourceIds", "must hold at most 100 wallet ids"))
		}
	default:
		errs = append(errs, field("kind", "must be sk, tk or pk"))
	}
	if len(req.Label) > 100 {
		errs = append(errs, field("label", "must be at most 100 characters"))
	}
	approverKey, keyErrs := approverKeyFor(req.ApproverKey, req.Kind == auth.KindResource && slices.Contains(req.Actions, auth.ActionApprove), s.now())
	errs = append(errs, keyErrs...)
	if len(errs) > 0 {
		return nil, "", invalid(errs...)
	}
	actions, resourceIDs := sortedSet(req.Actions), sortedSet(req.ResourceIDs)
	granted := actions
	if req.Kind == auth.KindSecret {
		granted = auth.AllActions
	}
	// Authorised before the wallets are looked up, so that a restricted key cannot learn
	// which ids beyond its own are wallets.
	if err := handsOutOnlyWhatItHolds(who, granted, resourceIDs); err != nil {
		return nil, "", err
	}
	unknown, err := s.unknownWallets(ctx, who.OrgID, resourceIDs)
	if err != nil {
		return nil, "", err
	}
	for _, id := range unknown {
		errs = append(errs, field("resourceIds", id+" is not a wallet of this organisation"))
	}
	if len(errs) > 0 {
		return nil, "", invalid(errs...)
	}
	secret, err := s.newSecret(req.Kind)
	if err != nil {
		return nil, "", err
	}
	k := &store.APIKey{ID: ids.New(ids.APIKey), OrgID: who.OrgID, App: who.App, Kind: req.Kind,
		Actions: auth.FormatActions(actions), ResourceIDs: auth.FormatActions(resourceIDs), Label: req.Label,
		SecretHash: auth.HashSecret(secret), SecretHint: auth.Hint(secret), CreatedAt: s.now(), Creator: creatorOf(who)}
	details := map[string]any{"kind": k.Kind}
	err = s.writeAudited(ctx, who, func(tx *store.Store) error {
		if approverKey != nil {
			if err := s.storeApproverKey(ctx, tx, approverKey, k.OrgID, k.ID); err != nil {
				return err
			}
			k.ApproverKeyID, details["approverKeyId"] = &approverKey.ID, approverKey.ID
		}
		return tx.CreateAPIKey(ctx, k)
	}, "api_key.created", "api_key", k.ID, details)
	if err != nil {
		return nil, "", err
	}
	return k, secret, nil
}

// unknownActions names each entry that is not an action.
func unknownActions(actions []string) []orders.FieldError {
	var errs []orders.FieldError
	for _, a := range actions {
		if !auth.IsAction(a) {
			errs = append(errs, field("actions", a+" is not an action (read, write, approve, sign, developer)"))
		}
	}
	return errs
}

// sortedSet is a list sorted, each entry once.
func sortedSet(list []string) []string {
	out := slices.Clone(list)
	slices.Sort(out)
	return slices.Compact(out)
}

// handsOutOnlyWhatItHolds refuses a new credential that would reach more than its creator:
// an action the creator does not hold on the app (a member granted developer must not mint
// themselves approve, nor an sk_ key, which holds every action), or, from a credential
// restricted to resource ids, anything beyond them. resourceIDs are the new credential's;
// none means every wallet of the organisation, which is all an sk_ or pk_ key or an OAuth
// client can reach, so a restricted creator can make only tk_ keys.
func handsOutOnlyWhatItHolds(who Caller, actions, resourceIDs []string) error {
	var missing []string
	for _, a := range actions {
		if !who.Can(who.App, a) && !slices.Contains(missing, a) {
			missing = append(missing, a)
		}
	}
	if len(missing) > 0 {
		return refuse(PermissionDenied, "A credential cannot hand out actions its creator does not hold on the '"+who.App+"' app: "+
			strings.Join(missing, ", ")+".")
	}
	if len(who.ResourceIDs) == 0 {
		return nil
	}
	if len(resourceIDs) == 0 {
		return refuse(PermissionDenied, "A credential restricted to resource ids can create only tk keys restricted to some of its own resourceIds.")
	}
	var beyond []string
	for _, id := range resourceIDs {
		if !who.CanReach(id) {
			beyond = append(beyond, id)
		}
	}
	if len(beyond) > 0 {
		return refuse(PermissionDenied, "A credential cannot hand out resources its creator cannot reach: "+strings.Join(beyond, ", ")+".")
	}
	return nil
}

// unknownWallets lists the ids among walletIDs that are not wallets of the organisation.
func (s *Service) unknownWallets(ctx context.Context, orgID string, walletIDs []string) ([]string, error) {
	if len(walletIDs) == 0 {
		return nil, nil
	}
	found, err := s.Store.ListWallets(ctx, orgID, "", len(walletIDs), walletIDs...)
	if err != nil {
		return nil, err
	}
	var unknown []string
	for _, id := range walletIDs {
		if !slices.ContainsFunc(found, func(w store.Wallet) bool { return w.ID == id }) {
			unknown = append(unknown, id)
		}
	}
	return unknown, nil
}

// ListOAuthClients pages through the caller's app's OAuth clients, newest first; never a
// secret.
func (s *Service) ListOAuthClients(ctx context.Context, who Caller, pg Page) ([]store.OAuthClient, string, error) {
	if err := developer(who); err != nil {
		return nil, "", err
	}
	clients, err := s.Store.ListOAuthClients(ctx, who.OrgID, who.App)
	if err != nil {
		return nil, "", err
	}
	list, next := pageOf(clients, pg, true, func(oc *store.OAuthClient) string { return oc.ID })
	return list, next, nil
}

// OAuthClient reads one OAuth client of the caller's app; any other is not found.
func (s *Service) OAuthClient(ctx context.Context, who Caller, id string) (*store.OAuthClient, error) {
	if err := developer(who); err != nil {
		return nil, err
	}
	oc, err := s.Store.OAuthClient(ctx, id)
	if err == nil && oc.OrgID != who.OrgID {
		err = store.ErrNotFound
	}
	return ofOwnApp(who, "OAuth client", oc, err, func(oc *store.OAuthClient) string { return oc.App })
}

// CreateOAuthClient registers a client-credentials client of the caller's app with
// scopes, space-separated "<app>:<action>" of that app; its secret is shown once.
func (s *Service) CreateOAuthClient(ctx context.Context, who Caller, req OAuthClientRequest) (*store.OAuthClient, string, error) {
	scopes, label := req.Scopes, req.Label
	if err := developer(who); err != nil {
		return nil, "", err
	}
	list := strings.Fields(scopes)
	var errs []orders.FieldError
	if len(list) == 0 {
		errs = append(errs, field("scopes", "needs at least one scope, e.g. \""+who.App+":read\""))
	}
	for _, sc := range list {
		app, action, _ := strings.Cut(sc, ":")
		if app != who.App || !auth.IsAction(action) {
			errs = append(errs, field("scopes", sc+" is not a scope of this app ("+who.App+
				":read, :write, :approve, :sign or :developer)"))
		}
	}
	if len(label) > 100 {
		errs = append(errs, field("label", "must be at most 100 characters"))
	}
	approverKey, keyErrs := approverKeyFor(req.ApproverKey, slices.Contains(list, who.App+":"+auth.ActionApprove), s.now())
	errs = append(errs, keyErrs...)
	if len(errs) > 0 {
		return nil, "", invalid(errs...)
	}
	list = sortedSet(list)
	actions := make([]string, len(list))
	for i, sc := range list {
		_, actions[i], _ = strings.Cut(sc, ":")
	}
	// A client reaches every wallet of the app: a creator restricted to some is refused.
	if err := handsOutOnlyWhatItHolds(who, actions, nil); err != nil {
		return nil, "", err
	}
	secret, err := s.newSecret(auth.KindClientSecret)
	if err != nil {
		return nil, "", err
	}
	oc := &store.OAuthClient{ID: s.newID(ids.OAuthClient), OrgID: who.OrgID, App: who.App, SecretHash: auth.HashSecret(secret),
		Scopes: strings.Join(list, " "), Label: label, CreatedAt: s.now(), Creator: creatorOf(who)}
	details := map[string]any{"scopes": oc.Scopes}
	err = s.writeAudited(ctx, who, func(tx *store.Store) error {
		if approverKey != nil {
			if err := s.storeApproverKey(ctx, tx, approverKey, oc.OrgID, oc.ID); err != nil {
				return err
			}
			oc.ApproverKeyID, details["approverKeyId"] = &approverKey.ID, approverKey.ID
		}
		return tx.CreateOAuthClient(ctx, oc)
	}, "oauth_client.created", "oauth_client", oc.ID, details)
	if err != nil {
		return nil, "", err
	}
	return oc, secret, nil
}

// RevokeAPIKey revokes a key of the caller's app: it stops working at once, and the live
// connections opened with it close (4003) on every replica.
func (s *Service) RevokeAPIKey(ctx context.Context, who Caller, id string) (*store.APIKey, error) {
	k, err := s.APIKey(ctx, who, id)
	if err != nil {
		return nil, err
	}
	k.RevokedAt, err = s.revoke(ctx, who, k.ID, k.RevokedAt, "api_key", func(tx *store.Store, at time.Time) error {
		if err := tx.RevokeAPIKey(ctx, who.OrgID, k.ID, at); err != nil {
			return err
		}
		return tx.RevokeApproverKeysOf(ctx, who.OrgID, k.ID, at)
	})
	return k, err
}

// RevokeOAuthClient revokes a client of the caller's app: the client and every access
// token issued to it stop working at once, and connections opened with those tokens close
// (4003) on every replica.
func (s *Service) RevokeOAuthClient(ctx context.Context, who Caller, id string) (*store.OAuthClient, error) {
	oc, err := s.OAuthClient(ctx, who, id)
	if err != nil {
		return nil, err
	}
	oc.RevokedAt, err = s.revoke(ctx, who, oc.ID, oc.RevokedAt, "oauth_client", func(tx *store.Store, at time.Time) error {
		if err := tx.RevokeOAuthClient(ctx, who.OrgID, oc.ID, at); err != nil {
			return err
		}
		return tx.RevokeApproverKeysOf(ctx, who.OrgID, oc.ID, at)
	})
	return oc, err
}

// revoke is the one revocation flow of keys and OAuth clients: a credential not yet
// revoked is revoked, with its audit record, in one transaction (one that a concurrent
// request revoked first is not an error); then every process is told to close its
// connections. That announcement goes out on a repeated revoke too, so a retry repairs
// one that was lost. It returns when the credential was revoked.
func (s *Service) revoke(ctx context.Context, who Caller, id string, revokedAt *time.Time, kind string,
	write func(tx *store.Store, at time.Time) error) (*time.Time, error) {
	if revokedAt == nil {
		now := s.now()
		err := s.writeAudited(ctx, who, func(tx *store.Store) error {
			if err := write(tx, now); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			return nil
		}, kind+".revoked", kind, id, nil)
		if err != nil {
			return nil, err
		}
		revokedAt = &now
	}
	s.announce(ctx, who, events.Control{Kind: events.ControlCredentialRevoked, OrgID: who.OrgID, CredentialID: id})
	return revokedAt, nil
}
