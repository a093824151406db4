package service

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"unicode/utf8"

	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/chain/keys"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/workflows"
)

// SigningFilter narrows a list of signing requests.
type SigningFilter struct {
	Status string
	Page
}

// SigningRequestsAll asks a list of signing requests for every status.
const SigningRequestsAll = ApprovalsAll

// ListSigningRequests pages through the signing requests the caller may see (SPEC 3.5):
// the pending ones unless Status asks for another status, or for all.
func (s *Service) ListSigningRequests(ctx context.Context, who Caller, f SigningFilter) (list []store.SigningRequest, next string, err error) {
	var ok bool
	if f.Status, ok = queueStatus(f.Status, orders.SigningStatuses); !ok {
		return nil, "", invalid(field("status", "must be pending (the default), signed, expired or all"))
	}
	apps := Reach(who.Principal, SigningRequests)
	if apps == nil {
		return nil, "", refuse(PermissionDenied, "Listing signing requests needs read or sign on an app that orders, or a signing device's key (a treasury tk_ with sign, restricted to its wallets).")
	}
	list, err = s.Store.ListSigningRequests(ctx, store.SigningFilter{OrgID: who.OrgID, Apps: apps,
		WalletIDs: who.ResourceIDs, Status: f.Status, AfterID: f.After, Limit: f.Limit + 1})
	if err != nil {
		return nil, "", err
	}
	list, next = trim(list, f.Limit, func(r *store.SigningRequest) string { return r.ID })
	return list, next, nil
}

// SigningRequest reads a signing request the caller may see: of an app it holds read or
// sign on, or of any app for a signing device, for a wallet within its reach; any other is
// not found.
func (s *Service) SigningRequest(ctx context.Context, who Caller, id string) (*store.SigningRequest, error) {
	r, err := s.Store.SigningRequest(ctx, who.OrgID, id)
	if errors.Is(err, store.ErrNotFound) ||
		(err == nil && (!slices.Contains(Reach(who.Principal, SigningRequests), r.App) || !who.CanReach(r.WalletID))) {
		return nil, refuse(NotFound, "No signing request with this id.")
	}
	return r, err
}

// SubmitSignature verifies a signature (base64) of a pending request against its wallet,
// in the request's scheme (secp256k1: over its digest, and it recovers to the wallet's
// address; ed25519: over its message, under the wallet's public key), and signals it to the order's
// workflow (SPEC 3.5). The
// API's route and the dev bundle's signer both come through here.
func (s *Service) SubmitSignature(ctx context.Context, who Caller, requestID, signatureB64 string) (*store.SigningRequest, error) {
	r, err := s.SigningRequest(ctx, who, requestID)
	if err != nil {
		return nil, err
	}
	if !who.Can(r.App, auth.ActionSign) && !who.SigningDevice() {
		return nil, refuse(PermissionDenied, "Signing needs the 'sign' action on the '"+r.App+"' app, or a signing device's key (a treasury tk_ with sign, restricted to the wallet).")
	}
	if r.Status != orders.SigningPending || !s.now().Before(r.ExpiresAt) {
		return nil, refuse(Conflict, "This signing request is no longer pending (signed or expired).")
	}
	sig, err := base64.StdEncoding.DecodeString(signatureB64)
	if err != nil {
		return nil, badSignature()
	}
	w, err := s.Store.Wallet(ctx, r.OrgID, r.WalletID)
	if err != nil {
		return nil, err
	}
	signed, err := signedBytes(w.Scheme, r)
	if err != nil {
		return nil, err
	}
	if err := keys.Verify(w.Scheme, w.Address, w.PublicKey, signed, sig); err != nil {
		if !errors.Is(err, keys.ErrBadSignature) {
			s.Log.Warn("signature not checked", "signingRequestId", r.ID, "walletId", w.ID, "error", err.Error())
		}
		return nil, badSignature()
	}
	if s.Workflows == nil {
		return nil, ErrWorkflowsUnavailable
	}
	err = s.Workflows.SignalSignature(ctx, r.OrderID, workflows.Signature{SigningRequestID: r.ID, Signature: signatureB64,
		CorrelationID: who.CorrelationID})
	if err != nil {
		return nil, err
	}
	s.auditAfter(ctx, s.audit(who, r.App, "signature.submitted", "signing_request", r.ID, nil))
	return r, nil
}

// refusalReason is a refusal's reason: the name of the check that failed, in the
// signer's own words (destination_not_allowed, unknown_method, …).
var refusalReason = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// maxRefusalDetail bounds what a refusal says beside its reason.
const maxRefusalDetail = 1000

// RefuseSigningRequest records that the signer refused a pending signing request (POST
// /signing-requests/{id}/refusal): the order's workflow fails it signer_refused, with the
// reason in Order.Failed and in the audit log. It takes the same credentials as a
// signature.
func (s *Service) RefuseSigningRequest(ctx context.Context, who Caller, requestID, reason, detail string) (*store.SigningRequest, error) {
	var errs []orders.FieldError
	if !refusalReason.MatchString(reason) {
		errs = append(errs, field("reason", "must be the name of the check that failed: lowercase letters, digits and _, at most 64"))
	}
	if utf8.RuneCountInString(detail) > maxRefusalDetail {
		errs = append(errs, field("detail", fmt.Sprintf("must be at most %d characters", maxRefusalDetail)))
	}
	if len(errs) > 0 {
		return nil, invalid(errs...)
	}
	r, err := s.SigningRequest(ctx, who, requestID)
	if err != nil {
		return nil, err
	}
	if !who.Can(r.App, auth.ActionSign) && !who.SigningDevice() {
		return nil, refuse(PermissionDenied, "Refusing needs the 'sign' action on the '"+r.App+"' app, or a signing device's key (a treasury tk_ with sign, restricted to the wallet).")
	}
	if r.Status != orders.SigningPending || !s.now().Before(r.ExpiresAt) {
		return nil, refuse(Conflict, "This signing request is no longer pending (signed, refused or expired).")
	}
	if s.Workflows == nil {
		return nil, ErrWorkflowsUnavailable
	}
	err = s.Workflows.SignalRefusal(ctx, r.OrderID, workflows.Refusal{SigningRequestID: r.ID, Reason: reason, Detail: detail,
		CorrelationID: who.CorrelationID})
	if err != nil {
		return nil, err
	}
	s.auditAfter(ctx, s.audit(who, r.App, "signing_request.refused", "signing_request", r.ID,
		map[string]any{"orderId": r.OrderID, "reason": reason, "detail": detail}))
	return r, nil
}

func badSignature() *Error {
	return refuse(InvalidSignature, "The signature does not verify against the wallet over the digest (secp256k1: 65 bytes r‖s‖v that recover to the wallet's address; ed25519: 64 bytes under its public key).")
}

// signedBytes is what a signature of the request by a wallet of scheme covers
// (keys.Signed): its digest, or for ed25519 its message, the request's unsigned bytes.
func signedBytes(scheme string, r *store.SigningRequest) ([]byte, error) {
	digest, err := hex.DecodeString(r.Digest)
	if err != nil {
		return nil, fmt.Errorf("signing request %s has a bad digest", r.ID)
	}
	message, err := hex.DecodeString(r.RawUnsignedTx)
	if err != nil {
		return nil, fmt.Errorf("signing request %s has bad unsigned bytes", r.ID)
	}
	signed, err := keys.Signed(scheme, digest, message)
	if err != nil {
		return nil, fmt.Errorf("signing request %s: %w", r.ID, err)
	}
	return signed, nil
}
