package service

import (
	"context"
	"errors"
	"time"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/auth"
	"github.com/opentreasury/treasury/policy"
	"github.com/opentreasury/treasury/store"
)

// policyApp refuses an unknown app (NotFound) or a caller holding none of the actions on it.
func policyApp(who Caller, app string, actions ...string) error {
	if !auth.IsApp(app) {
		return refuse(NotFound, "There is no app named "+app+".")
	}
	for _, a := range actions {
		if who.Can(app, a) {
			return nil
		}
	}
	return refuse(PermissionDenied, "This credential may not do this on the '"+app+"' app.")
}

// Policy reads an app's policy (developer); an app without one has version 0 and no rules.
func (s *Service) Policy(ctx context.Context, who Caller, app string) (*store.Policy, error) {
	if err := policyApp(who, app, auth.ActionDeveloper); err != nil {
		return nil, err
	}
	p, err := s.Store.Policy(ctx, who.OrgID, app)
	if errors.Is(err, store.ErrNotFound) {
		return &store.Policy{OrgID: who.OrgID, App: app, Document: "{}"}, nil
	}
	return p, err
}

// PutPolicy replaces an app's rules (developer): they apply to orders submitted from now on.
func (s *Service) PutPolicy(ctx context.Context, who Caller, app string, document []byte) (*store.Policy, error) {
	if err := policyApp(who, app, auth.ActionDeveloper); err != nil {
		return nil, err
	}
	rules, err := policy.Parse(document)
	if err != nil {
		return nil, invalid(field("body", err.Error()))
	}
	doc, err := rules.Document()
	if err != nil {
		return nil, err
	}
	stored := &store.Policy{OrgID: who.OrgID, App: app, Document: doc, UpdatedBy: who.ID, UpdatedAt: s.now()}
	err = s.Store.Tx(ctx, func(tx *store.Store) error {
		if err := tx.PutPolicy(ctx, stored); err != nil {
			return err
		}
		a := s.audit(who, app, "policy.updated", "policy", app, nil)
		a.Details = doc
		return tx.AppendAudit(ctx, a)
	})
	return stored, err
}

// Evaluation is a policy's dry run on an order body.
type Evaluation struct {
	policy.Evaluation
	PolicyVersion  int
	AmountUSD      decimal.Decimal
	DailyVolumeUSD decimal.Decimal
}

// EvaluatePolicy is the dry run of an order body of the app's domain against the current
// policy (write or developer): which rules match, whether approval is needed and with what
// quorum. It changes nothing.
func (s *Service) EvaluatePolicy(ctx context.Context, who Caller, app string, body []byte) (*Evaluation, error) {
	if err := policyApp(who, app, auth.ActionWrite, auth.ActionDeveloper); err != nil {
		return nil, err
	}
	domain, ok := DomainOfApp(app)
	if !ok {
		return nil, refuse(NotFound, "The "+app+" app has no orders to evaluate.")
	}
	v, err := s.readOrder(ctx, who, domain.Name, body)
	if err != nil {
		return nil, err
	}
	rules := policy.Rules{}
	version := 0
	if p, err := s.Store.Policy(ctx, who.OrgID, app); err == nil {
		if rules, err = policy.Parse([]byte(p.Document)); err != nil {
			return nil, err
		}
		version = p.Version
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	now := s.now()
	dayStart := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	spent, err := s.Store.WalletVolumeSince(ctx, v.wallet.ID, dayStart, "")
	if err != nil {
		return nil, err
	}
	return &Evaluation{Evaluation: rules.Evaluate(v.in.PolicyOrder(v.amountUSD), spent), PolicyVersion: version,
		AmountUSD: v.amountUSD, DailyVolumeUSD: spent}, nil
}

// ListRequestLogs pages through the caller's app's recent requests, newest first.
func (s *Service) ListRequestLogs(ctx context.Context, who Caller, f store.RequestLogFilter, pg Page) ([]store.RequestLog, string, error) {
	if err := developer(who); err != nil {
		return nil, "", err
	}
	if f.Status != 0 && (f.Status < 100 || f.Status > 599) {
		return nil, "", invalid(field("status", "must be an HTTP status, 100 to 599"))
	}
	rows, err := s.Store.ListRequestLogs(ctx, who.OrgID, who.App, f, pg.After, pg.Limit+1)
	if err != nil {
		return nil, "", err
	}
	rows, next := trim(rows, pg.Limit, func(r *store.RequestLog) string { return r.ID })
	return rows, next, nil
}
