package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/policy"
	"github.com/opentreasury/treasury/internal/store"
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

// everyWallet refuses a credential restricted to some wallets what shows the orders and
// volume of every wallet of the app (window headroom, dry runs against history): its
// answers are narrowed to its wallets everywhere, and these cannot be.
func everyWallet(who Caller) error {
	if len(who.ResourceIDs) > 0 {
		return refuse(PermissionDenied, "This credential is restricted to some wallets; window headroom and dry runs against history show every wallet's orders.")
	}
	return nil
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

// PutPolicy publishes an app's rules at once (developer), as the app's next version: they
// apply to orders submitted from then on. An app whose policy in force asks for change
// approvals (changeApprovals) refuses it: its changes go through a draft.
func (s *Service) PutPolicy(ctx context.Context, who Caller, app string, document []byte) (*store.Policy, error) {
	if err := policyApp(who, app, auth.ActionDeveloper); err != nil {
		return nil, err
	}
	document, name, err := rulesOfPut(app, document)
	if err != nil {
		return nil, err
	}
	doc, err := policyDocument(name, document)
	if err != nil {
		return nil, err
	}
	stored := &store.Policy{OrgID: who.OrgID, App: app, Document: doc, UpdatedBy: who.ID, UpdatedAt: s.now()}
	err = s.Store.Tx(ctx, func(tx *store.Store) error {
		if err := tx.LockPolicy(ctx, who.OrgID, app, stored.UpdatedAt); err != nil {
			return err
		}
		inForce, _, err := tx.PolicyRules(ctx, who.OrgID, app, nil)
		if err != nil {
			return err
		}
		if inForce.ChangeApprovals > 0 {
			return refuse(Conflict, fmt.Sprintf("Changes to the %s policy need %d approval(s): create a draft (POST /api/v1/policies/%s/drafts) and have it approved.",
				app, inForce.ChangeApprovals, app))
		}
		return s.publish(ctx, tx, who, stored, &store.PolicyVersion{AuthorPerson: who.Person})
	})
	return stored, err
}

// policyDocument parses a policy document strictly and renders it as stored.
// rulesOfPut reads the body of a PUT of app's policy: the rules themselves, or the policy
// as GET answers it ({app, version, rules, updatedBy, updatedAt}), whose rules it takes,
// so that a read, edited, can be put back. It returns the rules and the field they came
// from, for the errors.
func rulesOfPut(app string, body []byte) ([]byte, string, error) {
	var whole map[string]json.RawMessage
	if err := json.Unmarshal(body, &whole); err != nil {
		return body, "body", nil // policy.Parse says what is wrong with it
	}
	rules, ok := whole["rules"]
	if !ok {
		return body, "body", nil
	}
	var errs []orders.FieldError
	for k := range whole {
		switch k {
		case "rules", "version", "updatedBy", "updatedAt":
		case "app":
			var named string
			if json.Unmarshal(whole[k], &named) != nil || named != app {
				errs = append(errs, field("app", "names another app than the path's "+app))
			}
		default:
			errs = append(errs, field(k, "is not a field of a policy"))
		}
	}
	if len(errs) > 0 {
		return nil, "", invalid(errs...)
	}
	return rules, "rules", nil
}

func policyDocument(name string, document []byte) (string, error) {
	rules, err := policy.Parse(document)
	if err != nil {
		return "", invalid(field(name, err.Error()))
	}
	return rules.Document()
}

// publish puts a policy in force and records it as a version, with its audit record.
func (s *Service) publish(ctx context.Context, tx *store.Store, who Caller, p *store.Policy, v *store.PolicyVersion) error {
	if err := tx.PublishPolicy(ctx, p, v); err != nil {
		return err
	}
	err := tx.AppendPolicyEvent(ctx, p.OrgID, &events.PolicyEvent{App: p.App, CorrelationID: who.CorrelationID, DraftID: v.DraftID,
		OccurredAt: events.TimeOf(p.UpdatedAt), PolicyVersion: v.Version, PublishedBy: who.ID, Restores: v.Restores})
	if err != nil {
		return err
	}
	a := s.audit(who, p.App, "policy.published", "policy", p.App, map[string]any{"version": v.Version, "draftId": v.DraftID,
		"restores": v.Restores, "rules": json.RawMessage(p.Document)})
	return tx.AppendAudit(ctx, a)
}

// PolicyVersions pages through an app's published versions, newest first (developer).
// The cursor is the last version number shown.
func (s *Service) PolicyVersions(ctx context.Context, who Caller, app string, pg Page) ([]store.PolicyVersion, string, error) {
	if err := policyApp(who, app, auth.ActionDeveloper); err != nil {
		return nil, "", err
	}
	below := 0
	if pg.After != "" {
		n, err := strconv.Atoi(pg.After)
		if err != nil || n < 1 {
			return nil, "", invalid(field("cursor", "must be a cursor from an earlier page"))
		}
		below = n
	}
	rows, err := s.Store.PolicyVersions(ctx, who.OrgID, app, below, pg.Limit+1)
	if err != nil {
		return nil, "", err
	}
	rows, next := trim(rows, pg.Limit, func(v *store.PolicyVersion) string { return strconv.Itoa(v.Version) })
	return rows, next, nil
}

// PolicyVersionDiff is a published version and what it changed from the one before.
type PolicyVersionDiff struct {
	store.PolicyVersion
	Diff []policy.Change
}

// PolicyVersion reads one published version of an app's policy and its diff from the
// version before it (developer).
func (s *Service) PolicyVersion(ctx context.Context, who Caller, app string, version int) (*PolicyVersionDiff, error) {
	if err := policyApp(who, app, auth.ActionDeveloper); err != nil {
		return nil, err
	}
	v, err := s.Store.PolicyVersionOf(ctx, who.OrgID, app, version)
	if errors.Is(err, store.ErrNotFound) {
		return nil, refuse(NotFound, fmt.Sprintf("The %s policy has no version %d.", app, version))
	}
	if err != nil {
		return nil, err
	}
	rules, err := policy.Parse([]byte(v.Document))
	if err != nil {
		return nil, err
	}
	before := policy.Rules{}
	if version > 1 {
		prev, err := s.Store.PolicyVersionOf(ctx, who.OrgID, app, version-1)
		switch {
		case err == nil:
			if before, err = policy.Parse([]byte(prev.Document)); err != nil {
				return nil, err
			}
		case !errors.Is(err, store.ErrNotFound): // versions before history was kept are unknown
			return nil, err
		}
	}
	return &PolicyVersionDiff{PolicyVersion: *v, Diff: policy.Diff(before, rules)}, nil
}

// PolicyDraftView is a draft, the approvals it needs and what it would change from the
// version in force.
type PolicyDraftView struct {
	store.PolicyDraft
	Approvals []DraftApproval
	// ApprovalsRequired is the changeApprovals of the policy in force.
	ApprovalsRequired int
	// InForceVersion is the version in force. Diff is against it, or for a published draft
	// against the version its publication replaced: what publishing it changed.
	InForceVersion int
	Diff           []policy.Change
}

// DraftApproval is one person's approval of a draft.
type DraftApproval struct {
	By string    `json:"by"`
	At time.Time `json:"at"`
}

// draftView adds to a draft what the policy in force says of it.
func (s *Service) draftView(ctx context.Context, tx *store.Store, d *store.PolicyDraft) (*PolicyDraftView, error) {
	inForce, version, err := tx.PolicyRules(ctx, d.OrgID, d.App, nil)
	if err != nil {
		return nil, err
	}
	rules, err := policy.Parse([]byte(d.Document))
	if err != nil {
		return nil, err
	}
	// A published draft's rules are in force (or were): it is read against the version it
	// replaced, and the approvals that version asked of it.
	before := inForce
	if d.PublishedVersion != nil {
		replaced := *d.PublishedVersion - 1
		before, _, err = tx.PolicyRules(ctx, d.OrgID, d.App, &replaced)
		if errors.Is(err, store.ErrNotFound) { // a version from before history was kept
			before, err = policy.Rules{}, nil
		}
		if err != nil {
			return nil, err
		}
	}
	approvals, err := approvalsOf(d)
	return &PolicyDraftView{PolicyDraft: *d, Approvals: approvals, ApprovalsRequired: before.ChangeApprovals, InForceVersion: version,
		Diff: policy.Diff(before, rules)}, err
}

// PolicyDraftInput is a draft's body: new rules, or the number of an earlier version whose
// rules it restores (a rollback).
type PolicyDraftInput struct {
	Rules       json.RawMessage
	FromVersion int
}

// CreatePolicyDraft starts a draft of an app's policy (developer): it has no effect until
// published. From a version, it is a rollback to that version's rules.
func (s *Service) CreatePolicyDraft(ctx context.Context, who Caller, app string, in PolicyDraftInput) (*PolicyDraftView, error) {
	if err := policyApp(who, app, auth.ActionDeveloper); err != nil {
		return nil, err
	}
	if (in.Rules == nil) == (in.FromVersion == 0) {
		return nil, invalid(field("rules", "give either rules or fromVersion"))
	}
	now := s.now()
	d := &store.PolicyDraft{ID: ids.New(ids.PolicyDraft), OrgID: who.OrgID, App: app, Author: who.ID,
		AuthorPerson: who.Person, Creator: creatorOf(who), Status: store.DraftOpen, CreatedAt: now, UpdatedAt: now}
	var view *PolicyDraftView
	err := s.Store.Tx(ctx, func(tx *store.Store) error {
		if in.FromVersion != 0 {
			v, err := tx.PolicyVersionOf(ctx, who.OrgID, app, in.FromVersion)
			if errors.Is(err, store.ErrNotFound) {
				return invalid(field("fromVersion", fmt.Sprintf("the %s policy has no version %d", app, in.FromVersion)))
			} else if err != nil {
				return err
			}
			d.Document, d.Restores = v.Document, &v.Version
		} else {
			doc, err := policyDocument("rules", in.Rules)
			if err != nil {
				return err
			}
			d.Document = doc
		}
		_, version, err := tx.PolicyRules(ctx, who.OrgID, app, nil)
		if err != nil {
			return err
		}
		d.BaseVersion = version
		if err := tx.CreatePolicyDraft(ctx, d); err != nil {
			return err
		}
		if err := tx.AppendAudit(ctx, s.audit(who, app, "policy.draft_created", "policy_draft", d.ID,
			map[string]any{"restores": d.Restores, "rules": json.RawMessage(d.Document)})); err != nil {
			return err
		}
		view, err = s.draftView(ctx, tx, d)
		return err
	})
	return view, err
}

// PolicyDrafts pages through an app's drafts, newest first (developer).
func (s *Service) PolicyDrafts(ctx context.Context, who Caller, app, status string, pg Page) ([]*PolicyDraftView, string, error) {
	if err := policyApp(who, app, auth.ActionDeveloper); err != nil {
		return nil, "", err
	}
	if status != "" && status != store.DraftOpen && status != store.DraftPublished && status != store.DraftDiscarded {
		return nil, "", invalid(field("status", "must be open, published or discarded"))
	}
	rows, err := s.Store.ListPolicyDrafts(ctx, who.OrgID, app, status, pg.After, pg.Limit+1)
	if err != nil {
		return nil, "", err
	}
	rows, next := trim(rows, pg.Limit, func(d *store.PolicyDraft) string { return d.ID })
	out := make([]*PolicyDraftView, len(rows))
	for i := range rows {
		if out[i], err = s.draftView(ctx, s.Store, &rows[i]); err != nil {
			return nil, "", err
		}
	}
	return out, next, nil
}

// PolicyDraft reads one draft (developer).
func (s *Service) PolicyDraft(ctx context.Context, who Caller, app, id string) (*PolicyDraftView, error) {
	if err := policyApp(who, app, auth.ActionDeveloper); err != nil {
		return nil, err
	}
	d, err := s.Store.PolicyDraftOf(ctx, who.OrgID, app, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, refuse(NotFound, "There is no draft "+id+" of the "+app+" policy.")
	}
	if err != nil {
		return nil, err
	}
	return s.draftView(ctx, s.Store, d)
}

// draftAction runs one action on an open draft of the app, locked, with its audit record.
func (s *Service) draftAction(ctx context.Context, who Caller, app, id, action string, act func(tx *store.Store, d *store.PolicyDraft) error) (*PolicyDraftView, error) {
	var view *PolicyDraftView
	err := s.Store.Tx(ctx, func(tx *store.Store) error {
		d, err := tx.LockPolicyDraft(ctx, who.OrgID, app, id)
		if errors.Is(err, store.ErrNotFound) {
			return refuse(NotFound, "There is no draft "+id+" of the "+app+" policy.")
		}
		if err != nil {
			return err
		}
		if d.Status != store.DraftOpen {
			return refuse(Conflict, "The draft is "+d.Status+": only an open draft can change.")
		}
		d.UpdatedAt = s.now()
		if err := act(tx, d); err != nil {
			return err
		}
		if err := tx.SavePolicyDraft(ctx, d); err != nil {
			return err
		}
		if err := tx.AppendAudit(ctx, s.audit(who, app, action, "policy_draft", d.ID,
			map[string]any{"status": d.Status, "publishedVersion": d.PublishedVersion, "rules": json.RawMessage(d.Document)})); err != nil {
			return err
		}
		view, err = s.draftView(ctx, tx, d)
		return err
	})
	return view, err
}

// UpdatePolicyDraft replaces an open draft's rules (developer). Whoever saves it becomes
// its author; its approvals so far are withdrawn, and it is re-based on the version in
// force.
func (s *Service) UpdatePolicyDraft(ctx context.Context, who Caller, app, id string, rules json.RawMessage) (*PolicyDraftView, error) {
	if err := policyApp(who, app, auth.ActionDeveloper); err != nil {
		return nil, err
	}
	if rules == nil {
		return nil, invalid(field("rules", "is required: a draft is edited by its rules"))
	}
	doc, err := policyDocument("rules", rules)
	if err != nil {
		return nil, err
	}
	return s.draftAction(ctx, who, app, id, "policy.draft_updated", func(tx *store.Store, d *store.PolicyDraft) error {
		_, version, err := tx.PolicyRules(ctx, who.OrgID, app, nil)
		if err != nil {
			return err
		}
		d.Document, d.BaseVersion, d.Restores = doc, version, nil
		d.Author, d.AuthorPerson, d.Approvals = who.ID, who.Person, "[]"
		return nil
	})
}

// DiscardPolicyDraft closes an open draft unpublished (developer).
func (s *Service) DiscardPolicyDraft(ctx context.Context, who Caller, app, id string) (*PolicyDraftView, error) {
	if err := policyApp(who, app, auth.ActionDeveloper); err != nil {
		return nil, err
	}
	return s.draftAction(ctx, who, app, id, "policy.draft_discarded", func(_ *store.Store, d *store.PolicyDraft) error {
		d.Status = store.DraftDiscarded
		return nil
	})
}

// ApprovePolicyDraft records a person's approval of an open draft and publishes it once
// it has as many as the policy in force asks for (changeApprovals). The approver is a
// signed-in person other than the draft's author, who holds the owner role or the
// developer action on the app.
func (s *Service) ApprovePolicyDraft(ctx context.Context, who Caller, app, id string) (*PolicyDraftView, error) {
	if !auth.IsApp(app) {
		return nil, refuse(NotFound, "There is no app named "+app+".")
	}
	if who.Kind != auth.KindUser || (who.Role != auth.RoleOwner && !who.Can(app, auth.ActionDeveloper)) {
		return nil, refuse(PermissionDenied, "A policy change is approved by a signed-in person who is an owner or holds the 'developer' action on the '"+app+"' app.")
	}
	return s.draftAction(ctx, who, app, id, "policy.draft_approved", func(tx *store.Store, d *store.PolicyDraft) error {
		if who.Person == d.AuthorPerson || who.ID == d.Author {
			return refuse(MakerChecker, "The author of a draft cannot approve it.")
		}
		approvals, err := approvalsOf(d)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(approvals, func(a DraftApproval) bool { return a.By == who.Person }) {
			return refuse(Conflict, "You have approved this draft already.")
		}
		encoded, err := json.Marshal(append(approvals, DraftApproval{By: who.Person, At: d.UpdatedAt}))
		if err != nil {
			return err
		}
		d.Approvals = string(encoded)
		_, _, err = s.publishDraft(ctx, tx, who, d, len(approvals)+1)
		return err
	})
}

// PublishPolicyDraft publishes an open draft that needs no more approvals (developer).
func (s *Service) PublishPolicyDraft(ctx context.Context, who Caller, app, id string) (*PolicyDraftView, error) {
	if err := policyApp(who, app, auth.ActionDeveloper); err != nil {
		return nil, err
	}
	return s.draftAction(ctx, who, app, id, "policy.draft_publish_requested", func(tx *store.Store, d *store.PolicyDraft) error {
		approvals, err := approvalsOf(d)
		if err != nil {
			return err
		}
		published, required, err := s.publishDraft(ctx, tx, who, d, len(approvals))
		if err == nil && !published {
			err = refuse(Conflict, fmt.Sprintf("The draft has %d of the %d approval(s) the %s policy asks for.", len(approvals), required, app))
		}
		return err
	})
}

// publishDraft publishes d when it has the approvals the policy in force asks for
// (required), and leaves it open otherwise. A draft saved before the version now in force
// would undo that version's changes unseen: neither approved nor published, it must be
// saved again first.
func (s *Service) publishDraft(ctx context.Context, tx *store.Store, who Caller, d *store.PolicyDraft, approvals int) (published bool, required int, err error) {
	if err := tx.LockPolicy(ctx, d.OrgID, d.App, d.UpdatedAt); err != nil {
		return false, 0, err
	}
	inForce, version, err := tx.PolicyRules(ctx, d.OrgID, d.App, nil)
	switch {
	case err != nil:
		return false, 0, err
	case version != d.BaseVersion:
		return false, 0, refuse(Conflict, fmt.Sprintf("Version %d of the %s policy was published after this draft was saved: save the draft again to base it on the version in force.", version, d.App))
	case approvals < inForce.ChangeApprovals:
		return false, inForce.ChangeApprovals, nil
	}
	p := &store.Policy{OrgID: d.OrgID, App: d.App, Document: d.Document, UpdatedBy: d.Author, UpdatedAt: d.UpdatedAt}
	v := &store.PolicyVersion{AuthorPerson: d.AuthorPerson, DraftID: &d.ID, Approvals: d.Approvals, Restores: d.Restores}
	if err := s.publish(ctx, tx, who, p, v); err != nil {
		return false, 0, err
	}
	d.Status, d.PublishedVersion = store.DraftPublished, &v.Version
	return true, inForce.ChangeApprovals, nil
}

// approvalsOf reads a draft's approvals.
func approvalsOf(d *store.PolicyDraft) ([]DraftApproval, error) {
	var out []DraftApproval
	err := json.Unmarshal([]byte(d.Approvals), &out)
	return out, err
}

// RollbackPolicy starts a draft that restores an earlier version's rules (developer), and
// publishes it at once when the policy in force asks for no approvals.
func (s *Service) RollbackPolicy(ctx context.Context, who Caller, app string, version int) (*PolicyDraftView, error) {
	d, err := s.CreatePolicyDraft(ctx, who, app, PolicyDraftInput{FromVersion: version})
	if err != nil || d.ApprovalsRequired > 0 {
		return d, err
	}
	return s.PublishPolicyDraft(ctx, who, app, d.ID)
}

// Dry runs against history: how far back, and how many orders of each shift they show.
const (
	DefaultDryRunDays     = 30
	MaxDryRunDays         = 366
	DefaultDryRunExamples = 5
	MaxDryRunExamples     = 50
)

// PolicyDryRunInput asks for a draft's dry run against the last Days days of orders.
type PolicyDryRunInput struct {
	DraftID  string
	Days     int
	Examples int
}

// StartPolicyDryRun starts a dry run of a draft against the app's orders of the last days
// (developer), in the background: the answer is the run as it starts; its progress and
// report are read with PolicyDryRun.
func (s *Service) StartPolicyDryRun(ctx context.Context, who Caller, app string, in PolicyDryRunInput) (*store.PolicyDryRun, error) {
	if err := policyApp(who, app, auth.ActionDeveloper); err != nil {
		return nil, err
	}
	if err := everyWallet(who); err != nil {
		return nil, err
	}
	if in.Days == 0 {
		in.Days = DefaultDryRunDays
	}
	if in.Examples == 0 {
		in.Examples = DefaultDryRunExamples
	}
	var errs []orders.FieldError
	if in.DraftID == "" {
		errs = append(errs, field("draftId", "is required"))
	}
	if in.Days < 1 || in.Days > MaxDryRunDays {
		errs = append(errs, field("days", fmt.Sprintf("must be from 1 to %d", MaxDryRunDays)))
	}
	if in.Examples < 1 || in.Examples > MaxDryRunExamples {
		errs = append(errs, field("examples", fmt.Sprintf("must be from 1 to %d", MaxDryRunExamples)))
	}
	if len(errs) > 0 {
		return nil, invalid(errs...)
	}
	if s.DryRuns == nil {
		return nil, ErrWorkflowsUnavailable
	}
	draft, err := s.Store.PolicyDraftOf(ctx, who.OrgID, app, in.DraftID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, invalid(field("draftId", "is not a draft of the "+app+" policy"))
	} else if err != nil {
		return nil, err
	}
	now := s.now()
	report, err := json.Marshal(policy.NewHistoryReport())
	if err != nil {
		return nil, err
	}
	d := &store.PolicyDryRun{ID: ids.New(ids.PolicyDryRun), OrgID: who.OrgID, App: app, DraftID: draft.ID, Document: draft.Document,
		Days: in.Days, Examples: in.Examples, Since: now.AddDate(0, 0, -in.Days), Until: now, Status: store.DryRunRunning,
		Report: string(report), Creator: creatorOf(who), CreatedAt: now, UpdatedAt: now}
	if d.Total, err = s.Store.CountHistoryOrders(ctx, who.OrgID, app, d.Since, d.Until); err != nil {
		return nil, err
	}
	err = s.writeAudited(ctx, who, func(tx *store.Store) error { return tx.CreatePolicyDryRun(ctx, d) },
		"policy.dry_run_started", "policy_dry_run", d.ID, map[string]any{"draftId": d.DraftID, "days": d.Days})
	if err != nil {
		return nil, err
	}
	// Started after the commit, so that the workflow finds its run. A run whose workflow
	// could not be started ends failed, saying so, rather than stay running for ever.
	if err := s.DryRuns.StartPolicyDryRun(ctx, d.ID); err != nil {
		s.Log.Error("policy dry run not started", "dryRunId", d.ID, "error", err)
		at := s.now()
		d.Status, d.Error, d.UpdatedAt, d.CompletedAt = store.DryRunFailed, "its background job could not be started", at, &at
		if _, err := s.Store.AdvancePolicyDryRun(context.WithoutCancel(ctx), d, d.LastOrderID); err != nil {
			s.Log.Error("policy dry run not marked failed", "dryRunId", d.ID, "error", err)
		}
		return nil, refuse(Unavailable, "The dry run could not be started; try again.")
	}
	return d, nil
}

// PolicyDryRun reads a dry run: its progress, and its report so far (developer).
func (s *Service) PolicyDryRun(ctx context.Context, who Caller, app, id string) (*store.PolicyDryRun, error) {
	if err := policyApp(who, app, auth.ActionDeveloper); err != nil {
		return nil, err
	}
	if err := everyWallet(who); err != nil {
		return nil, err
	}
	d, err := s.Store.PolicyDryRunOf(ctx, who.OrgID, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && d.App != app) {
		return nil, refuse(NotFound, "There is no dry run "+id+" of the "+app+" policy.")
	}
	return d, err
}

// PolicyDryRuns pages through an app's dry runs, newest first, only those of one draft
// when draftID is set (developer).
func (s *Service) PolicyDryRuns(ctx context.Context, who Caller, app, draftID string, pg Page) ([]store.PolicyDryRun, string, error) {
	if err := policyApp(who, app, auth.ActionDeveloper); err != nil {
		return nil, "", err
	}
	if err := everyWallet(who); err != nil {
		return nil, "", err
	}
	list, err := s.Store.ListPolicyDryRuns(ctx, who.OrgID, app, draftID, pg.After, pg.Limit+1)
	if err != nil {
		return nil, "", err
	}
	list, next := trim(list, pg.Limit, func(d *store.PolicyDryRun) string { return d.ID })
	return list, next, nil
}

// MaxWindowKeys is how many keys of each window PolicyWindows shows, the most used first.
const MaxWindowKeys = 20

// PolicyWindows reads the headroom of each volume window of the policy in force
// (developer): for each window, the keys with volume in it now, the most used first, or one
// entry with no key when none has any (every key has the whole limit).
func (s *Service) PolicyWindows(ctx context.Context, who Caller, app string) ([]policy.WindowUse, int, error) {
	if err := policyApp(who, app, auth.ActionDeveloper); err != nil {
		return nil, 0, err
	}
	if err := everyWallet(who); err != nil {
		return nil, 0, err
	}
	rules, version, err := s.Store.PolicyRules(ctx, who.OrgID, app, nil)
	if err != nil {
		return nil, 0, err
	}
	now := s.now()
	out := []policy.WindowUse{}
	for _, w := range rules.Windows {
		used, err := s.Store.WindowUse(ctx, who.OrgID, app, w, now, MaxWindowKeys)
		if err != nil {
			return nil, 0, err
		}
		if len(used) == 0 {
			key := ""
			if w.Scope == policy.ScopeApp {
				key = app
			}
			used = []store.WindowKeyUse{{Key: key}}
		}
		for _, u := range used {
			out = append(out, policy.NewWindowUse(w, u.Key, u.Used))
		}
	}
	return out, version, nil
}

// Evaluation is a policy's dry run on an order body.
type Evaluation struct {
	policy.Evaluation
	PolicyVersion int
	DraftID       string
	AmountUSD     decimal.Decimal
	// DailyVolumeUsedUSD is the wallet's volume today before the order.
	DailyVolumeUsedUSD decimal.Decimal
}

// EvaluatePolicy is the dry run of an order body of the app's domain against the policy in
// force (write or developer) or, for a developer, a published version or a draft: which rules match, whether
// approval is needed and with what quorum, the headroom of each volume window. It changes
// nothing.
func (s *Service) EvaluatePolicy(ctx context.Context, who Caller, app string, body []byte, version int, draftID string) (*Evaluation, error) {
	if err := policyApp(who, app, auth.ActionWrite, auth.ActionDeveloper); err != nil {
		return nil, err
	}
	// The policy in force is what a writer's orders meet; a draft or an earlier version is
	// a developer's setting, which a key that only writes does not read.
	if (draftID != "" || version > 0) && !who.Can(app, auth.ActionDeveloper) {
		return nil, refuse(PermissionDenied, "Evaluating against a draft or an earlier version of the "+app+" policy needs 'developer' on the app; "+
			"without version or draft, the policy in force evaluates with 'write'.")
	}
	domain, ok := DomainOfApp(app)
	if !ok {
		return nil, refuse(NotFound, "The "+app+" app has no orders to evaluate.")
	}
	v, err := s.readOrder(ctx, who, domain.Name, body)
	if err != nil {
		return nil, err
	}
	var (
		rules policy.Rules
		n     int
	)
	switch {
	case draftID != "":
		d, err := s.Store.PolicyDraftOf(ctx, who.OrgID, app, draftID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, refuse(NotFound, "There is no draft "+draftID+" of the "+app+" policy.")
		} else if err != nil {
			return nil, err
		}
		if rules, err = policy.Parse([]byte(d.Document)); err != nil {
			return nil, err
		}
		n = d.BaseVersion
	case version > 0:
		rules, n, err = s.Store.PolicyRules(ctx, who.OrgID, app, &version)
		if errors.Is(err, store.ErrNotFound) {
			return nil, refuse(NotFound, fmt.Sprintf("The %s policy has no version %d.", app, version))
		}
	default:
		rules, n, err = s.Store.PolicyRules(ctx, who.OrgID, app, nil)
	}
	if err != nil {
		return nil, err
	}
	o := v.in.PolicyOrder(app, v.in.WalletID, v.amountUSD)
	usage, err := s.Store.PolicyUsage(ctx, who.OrgID, rules, o, s.now(), false, "")
	if err != nil {
		return nil, err
	}
	return &Evaluation{Evaluation: rules.Evaluate(o, usage), PolicyVersion: n, DraftID: draftID,
		AmountUSD: v.amountUSD, DailyVolumeUsedUSD: usage.DailyVolumeUSD}, nil
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
