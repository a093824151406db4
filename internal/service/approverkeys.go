package service

import (
	"context"
	"encoding/base64"
	"errors"
	"time"

	"github.com/opentreasury/treasury/internal/approvers"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/store"
)

// ApproverKeyRequest is the approver key an approving credential is created with: its
// scheme and its public key in base64.
type ApproverKeyRequest struct {
	Scheme    string
	PublicKey string
}

// approverKeyFor checks the approver key a credential asks to carry: only a credential
// that approves (a tk key holding approve, an OAuth client with the approve scope) carries
// one. It returns the key to store, without its ids, or the field's errors.
func approverKeyFor(req *ApproverKeyRequest, approves bool, now time.Time) (*store.ApproverKey, []orders.FieldError) {
	if req == nil {
		return nil, nil
	}
	if !approves {
		return nil, []orders.FieldError{field("approverKey", "only a tk key holding approve or an OAuth client with the approve scope carries an approver key")}
	}
	pub, err := approvers.ParsePublicKey(req.Scheme, req.PublicKey)
	if err != nil {
		return nil, []orders.FieldError{field("approverKey", err.Error())}
	}
	return &store.ApproverKey{Scheme: req.Scheme, PublicKey: base64.StdEncoding.EncodeToString(pub), Kind: approvers.KindKey,
		CreatedAt: now}, nil
}

// storeApproverKey stores a credential's approver key in the credential's transaction.
func (s *Service) storeApproverKey(ctx context.Context, tx *store.Store, k *store.ApproverKey, orgID, credentialID string) error {
	k.ID, k.OrgID, k.CredentialID = s.newID(ids.ApproverKey), orgID, &credentialID
	return createApproverKey(ctx, tx, k)
}

// createApproverKey stores an approver key whose public key the organisation has not
// had before (Conflict otherwise): one key is one approver.
func createApproverKey(ctx context.Context, tx *store.Store, k *store.ApproverKey) error {
	err := tx.CreateApproverKey(ctx, k)
	if errors.Is(err, store.ErrApproverKeyTaken) {
		return refuse(Conflict, "This public key is an approver key of the organisation already (revoked or not): each approver signs with a key of their own.")
	}
	return err
}

// ListApproverKeys pages through the organisation's approver keys, newest first, revoked
// ones included (GET /approver-keys): what a signer pins. Any credential or person that
// reads, approves, signs or develops in one of the organisation's apps may list them;
// they are public keys.
func (s *Service) ListApproverKeys(ctx context.Context, who Caller, pg Page) ([]store.ApproverKey, string, error) {
	if !seesApproverKeys(who) {
		return nil, "", refuse(PermissionDenied, "Listing approver keys needs read, approve, sign or developer on one of the organisation's apps.")
	}
	list, err := s.Store.ListApproverKeys(ctx, who.OrgID, pg.After, pg.Limit+1)
	if err != nil {
		return nil, "", err
	}
	page, next := trim(list, pg.Limit, func(k *store.ApproverKey) string { return k.ID })
	return page, next, nil
}

func seesApproverKeys(who Caller) bool {
	for _, app := range who.Apps() {
		for _, action := range []string{auth.ActionRead, auth.ActionApprove, auth.ActionSign, auth.ActionDeveloper} {
			if who.Can(app, action) {
				return true
			}
		}
	}
	return false
}
