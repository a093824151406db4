package service

import (
	"context"

	"github.com/opentreasury/treasury/internal/store"
)

// readableApps are the apps whose records of a kind the caller may read, or a refusal
// when none.
func readableApps(who Caller, r Records) ([]string, error) {
	apps := Reach(who.Principal, r)
	if len(apps) == 0 {
		return nil, refuse(PermissionDenied, "This credential may not read this: it needs read on an app whose records these are.")
	}
	return apps, nil
}

// EventFilter selects stored events: of one order, or all, after an event id.
type EventFilter struct {
	OrderID, After string
	Limit          int
}

// Events lists stored events the caller may read, oldest first (one order's in sequence
// order), for reconciliation after a gap (SPEC 3.7); next is the id to continue after.
func (s *Service) Events(ctx context.Context, who Caller, f EventFilter) ([]store.Event, string, error) {
	apps, err := readableApps(who, Events)
	if err != nil {
		return nil, "", err
	}
	list, err := s.Store.ListEvents(ctx, store.EventFilter{OrgID: who.OrgID, Apps: apps, WalletIDs: who.ResourceIDs,
		OrderID: f.OrderID, AfterID: f.After, Limit: f.Limit + 1})
	if err != nil {
		return nil, "", err
	}
	list, next := trim(list, f.Limit, func(e *store.Event) string { return e.ID })
	return list, next, nil
}

// AuditLogs pages through the audit records the caller may read, newest first.
func (s *Service) AuditLogs(ctx context.Context, who Caller, pg Page) ([]store.AuditLog, string, error) {
	apps, err := readableApps(who, AuditRecords)
	if err != nil {
		return nil, "", err
	}
	list, err := s.Store.ListAudit(ctx, who.OrgID, apps, who.ResourceIDs, pg.After, pg.Limit+1)
	if err != nil {
		return nil, "", err
	}
	list, next := trim(list, pg.Limit, func(a *store.AuditLog) string { return a.ID })
	return list, next, nil
}
