package client

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"

	"github.com/opentreasury/treasury/apitypes"
)

// PolicyRules are an app's policy (SPEC 3.4); every rule is optional. Amounts are decimal
// strings of USD.
type PolicyRules = apitypes.PolicyRules

// PolicyWindow limits the USD volume of the orders sharing one key over rolling hours.
type PolicyWindow = apitypes.PolicyWindow

// ApprovalTier requires Quorum approvals for orders worth at least MinUSD.
type ApprovalTier = apitypes.ApprovalTier

// Policy is an app's policy and its version.
type Policy = apitypes.Policy

// PolicyEvaluation is a dry run's answer: what the policy would decide for an order.
type PolicyEvaluation = apitypes.PolicyEvaluation

// PolicyCheck is one rule applied to an order.
type PolicyCheck = apitypes.PolicyCheck

// PolicyWindowUse is one volume window for the key of the order evaluated: the volume
// counted in it before the order and the headroom left.
type PolicyWindowUse = apitypes.PolicyWindowUse

// PolicyChange is one rule that differs between two policies.
type PolicyChange = apitypes.PolicyChange

// PolicyApproval is one person's approval of a policy draft.
type PolicyApproval = apitypes.PolicyApproval

// PolicyVersion is one published version of an app's policy, kept for good. An order's
// PolicyVersion names the one that evaluated it.
type PolicyVersion = apitypes.PolicyVersion

// The statuses of a PolicyDraft. Only an open draft changes.
const (
	PolicyDraftOpen      = "open"
	PolicyDraftPublished = "published"
	PolicyDraftDiscarded = "discarded"
)

// PolicyDraft is a proposed policy: edited freely, in force only once published.
type PolicyDraft = apitypes.PolicyDraft

// PolicyDraftRequest is a new draft: Rules, or FromVersion, a published version whose
// rules it restores. Rules is a pointer because empty rules (no rule at all) are a policy
// too.
type PolicyDraftRequest struct {
	Rules       *PolicyRules `json:"rules,omitempty"`
	FromVersion int          `json:"fromVersion,omitempty"`
}

// PolicyDraftFilter narrows a list of policy drafts.
type PolicyDraftFilter struct {
	// Status is PolicyDraftOpen, PolicyDraftPublished or PolicyDraftDiscarded; empty for all.
	Status string
	ListOptions
}

func (f PolicyDraftFilter) query() url.Values {
	q := f.ListOptions.query()
	set(q, "status", f.Status)
	return q
}

// PolicyTarget is what EvaluatePolicyAgainst evaluates an order against: a published
// Version, or the draft DraftID; the zero value is the policy in force.
type PolicyTarget struct {
	Version int
	DraftID string
}

func (t PolicyTarget) query() url.Values {
	q := url.Values{}
	if t.Version != 0 {
		q.Set("version", strconv.Itoa(t.Version))
	}
	set(q, "draft", t.DraftID)
	return q
}

func policyPath(app string) string { return "/policies/" + url.PathEscape(app) }

func policyVersionPath(app string, version int) string {
	return policyPath(app) + "/versions/" + strconv.Itoa(version)
}

func policyDraftPath(app, id string) string { return policyPath(app) + "/drafts/" + url.PathEscape(id) }

// GetPolicy reads an app's policy (GET /policies/{app}, action developer).
func (c *Client) GetPolicy(ctx context.Context, app string, opts ...CallOption) (*Policy, error) {
	return get[Policy](ctx, c, policyPath(app), opts)
}

// PutPolicy replaces an app's rules (PUT /policies/{app}, action developer) and publishes
// them at once as its next version; orders submitted afterwards are held to them. A policy
// whose ChangeApprovals is above 0 refuses it (409 conflict): use CreatePolicyDraft.
func (c *Client) PutPolicy(ctx context.Context, app string, rules PolicyRules, opts ...CallOption) (*Policy, error) {
	return do[Policy](ctx, c, http.MethodPut, policyPath(app), rules, opts)
}

// EvaluatePolicy runs the policy in force of the order's app over it without changing
// anything (POST /policies/{app}/evaluate, action write or developer).
func (c *Client) EvaluatePolicy(ctx context.Context, order OrderRequest, opts ...CallOption) (*PolicyEvaluation, error) {
	return c.EvaluatePolicyAgainst(ctx, order, PolicyTarget{}, opts...)
}

// EvaluatePolicyAgainst is EvaluatePolicy against a published version or a draft of the
// policy: what an order would meet if that version were restored or the draft published.
func (c *Client) EvaluatePolicyAgainst(ctx context.Context, order OrderRequest, target PolicyTarget, opts ...CallOption) (*PolicyEvaluation, error) {
	if order == nil {
		return nil, fmt.Errorf("client: EvaluatePolicy needs a PaymentRequest, TradeRequest, EarnRequest or BorrowRequest")
	}
	info, err := domainInfo(order.orderDomain())
	if err != nil {
		return nil, err
	}
	return do[PolicyEvaluation](ctx, c, http.MethodPost, withQuery(policyPath(info.App)+"/evaluate", target.query()), order, opts)
}

// ListPolicyVersions reads a page of an app's published policy versions, newest first,
// without their Diff (GET /policies/{app}/versions, action developer).
func (c *Client) ListPolicyVersions(ctx context.Context, app string, o ListOptions, opts ...CallOption) (*Page[PolicyVersion], error) {
	return list[PolicyVersion](ctx, c, policyPath(app)+"/versions", o.query(), opts)
}

// PolicyVersions iterates over an app's published policy versions, newest first.
func (c *Client) PolicyVersions(ctx context.Context, app string, o ListOptions, opts ...CallOption) iter.Seq2[PolicyVersion, error] {
	return all[PolicyVersion](ctx, c, policyPath(app)+"/versions", o.query(), "cursor", opts)
}

// GetPolicyVersion reads one published version of an app's policy with its Diff from the
// version before (action developer).
func (c *Client) GetPolicyVersion(ctx context.Context, app string, version int, opts ...CallOption) (*PolicyVersion, error) {
	return get[PolicyVersion](ctx, c, policyVersionPath(app, version), opts)
}

// RollbackPolicy starts a draft restoring an earlier version's rules (action developer).
// When the policy in force asks for no change approvals the draft is published at once
// (Status PolicyDraftPublished, PublishedVersion set); otherwise it waits for approvals.
func (c *Client) RollbackPolicy(ctx context.Context, app string, version int, opts ...CallOption) (*PolicyDraft, error) {
	return do[PolicyDraft](ctx, c, http.MethodPost, policyVersionPath(app, version)+"/rollback", nil, opts)
}

// CreatePolicyDraft starts an open draft of an app's policy (action developer); it changes
// nothing until published.
func (c *Client) CreatePolicyDraft(ctx context.Context, app string, req PolicyDraftRequest, opts ...CallOption) (*PolicyDraft, error) {
	return do[PolicyDraft](ctx, c, http.MethodPost, policyPath(app)+"/drafts", req, opts)
}

// ListPolicyDrafts reads a page of an app's policy drafts, newest first (action developer).
func (c *Client) ListPolicyDrafts(ctx context.Context, app string, f PolicyDraftFilter, opts ...CallOption) (*Page[PolicyDraft], error) {
	return list[PolicyDraft](ctx, c, policyPath(app)+"/drafts", f.query(), opts)
}

// PolicyDrafts iterates over an app's policy drafts, newest first.
func (c *Client) PolicyDrafts(ctx context.Context, app string, f PolicyDraftFilter, opts ...CallOption) iter.Seq2[PolicyDraft, error] {
	return all[PolicyDraft](ctx, c, policyPath(app)+"/drafts", f.query(), "cursor", opts)
}

// GetPolicyDraft reads one draft (action developer).
func (c *Client) GetPolicyDraft(ctx context.Context, app, id string, opts ...CallOption) (*PolicyDraft, error) {
	return get[PolicyDraft](ctx, c, policyDraftPath(app, id), opts)
}

// UpdatePolicyDraft replaces an open draft's rules (PUT, action developer). The caller
// becomes its author, its approvals are withdrawn and it is re-based on the version in
// force.
func (c *Client) UpdatePolicyDraft(ctx context.Context, app, id string, rules PolicyRules, opts ...CallOption) (*PolicyDraft, error) {
	body := PolicyDraftRequest{Rules: &rules}
	return do[PolicyDraft](ctx, c, http.MethodPut, policyDraftPath(app, id), body, opts)
}

// ApprovePolicyDraft records the approval of a signed-in person (WithSession), the owner
// or holding developer on the app, and publishes the draft once it has ApprovalsRequired.
// Its author may not approve it (403 maker_checker_violation); a stale draft, one not
// open or one already approved by the caller is a 409 conflict.
func (c *Client) ApprovePolicyDraft(ctx context.Context, app, id string, opts ...CallOption) (*PolicyDraft, error) {
	return c.policyDraftAction(ctx, app, id, "approve", opts)
}

// PublishPolicyDraft publishes an open draft that has the approvals the policy in force
// asks for (action developer); missing approvals or a stale draft are a 409 conflict.
func (c *Client) PublishPolicyDraft(ctx context.Context, app, id string, opts ...CallOption) (*PolicyDraft, error) {
	return c.policyDraftAction(ctx, app, id, "publish", opts)
}

// DiscardPolicyDraft closes an open draft unpublished (action developer).
func (c *Client) DiscardPolicyDraft(ctx context.Context, app, id string, opts ...CallOption) (*PolicyDraft, error) {
	return c.policyDraftAction(ctx, app, id, "discard", opts)
}

func (c *Client) policyDraftAction(ctx context.Context, app, id, action string, opts []CallOption) (*PolicyDraft, error) {
	return do[PolicyDraft](ctx, c, http.MethodPost, policyDraftPath(app, id)+"/"+action, nil, opts)
}

// PolicyWindows is the headroom of the volume windows of an app's policy in force, now:
// per window, the keys with volume in it, the most used first (at most 20); a window no
// key has used has one entry with an empty Key (the app's name for an app window).
type PolicyWindows = apitypes.PolicyWindows

// GetPolicyWindows reads the headroom of each volume window of an app's policy in force
// (GET /policies/{app}/windows, action developer).
func (c *Client) GetPolicyWindows(ctx context.Context, app string, opts ...CallOption) (*PolicyWindows, error) {
	return get[PolicyWindows](ctx, c, policyPath(app)+"/windows", opts)
}

// The statuses of a PolicyDryRun. Only a running one changes.
const (
	PolicyDryRunRunning   = "running"
	PolicyDryRunCompleted = "completed"
	PolicyDryRunFailed    = "failed"
)

// The shifts of a PolicyDryRunReport: how an order's outcome would move. An order that
// moves counts in the first that applies, in this order.
const (
	PolicyShiftAllowedToRefused = "allowedToRefused"
	PolicyShiftRefusedToAllowed = "refusedToAllowed"
	PolicyShiftApprovalAdded    = "approvalAdded"
	PolicyShiftApprovalRemoved  = "approvalRemoved"
	PolicyShiftQuorumRaised     = "quorumRaised"
	PolicyShiftQuorumLowered    = "quorumLowered"
)

// PolicyDryRunRequest asks for a draft's dry run against the app's orders of the last
// Days days (1 to 366), showing up to Examples orders of each shift (1 to 50). Zero
// means the service's default: 30 days, 5 examples.
type PolicyDryRunRequest struct {
	DraftID  string `json:"draftId"`
	Days     int    `json:"days,omitempty"`
	Examples int    `json:"examples,omitempty"`
}

// PolicyDryRun is a draft's dry run against the app's past orders: what would have
// changed had the draft been in force when each was submitted. It runs in the background;
// GetPolicyDryRun reads its progress and its report so far.
type PolicyDryRun = apitypes.PolicyDryRun

// PolicyDryRunProgress is how many of the run's orders have been evaluated.
type PolicyDryRunProgress = apitypes.PolicyDryRunProgress

// PolicyDryRunReport tallies the orders evaluated so far.
type PolicyDryRunReport = apitypes.PolicyDryRunReport

// PolicyDryRunShift counts the orders of one shift and shows the first of them.
type PolicyDryRunShift = apitypes.PolicyDryRunShift

// PolicyDryRunExample is one order whose outcome would change.
type PolicyDryRunExample = apitypes.PolicyDryRunExample

// PolicyOutcome is what a policy decided, or would decide, for an order.
type PolicyOutcome = apitypes.PolicyOutcome

// PolicyRuleCounts is how many orders one rule would newly refuse, and stop refusing.
type PolicyRuleCounts = apitypes.PolicyRuleCounts

// StartPolicyDryRun starts a dry run of a draft of any status against the app's past
// orders (POST /policies/{app}/dry-runs, action developer); it changes nothing. The
// answer is the run as it starts: poll GetPolicyDryRun until its Status is no longer
// PolicyDryRunRunning. An unknown draft or a number out of range is a 422; a run that
// could not be started is a 503, retried as the client's RetryPolicy says.
func (c *Client) StartPolicyDryRun(ctx context.Context, app string, req PolicyDryRunRequest, opts ...CallOption) (*PolicyDryRun, error) {
	return do[PolicyDryRun](ctx, c, http.MethodPost, policyPath(app)+"/dry-runs", req, opts)
}

// GetPolicyDryRun reads a dry run: its progress and its report so far (action
// developer). A run of another app is a 404.
func (c *Client) GetPolicyDryRun(ctx context.Context, app, id string, opts ...CallOption) (*PolicyDryRun, error) {
	return get[PolicyDryRun](ctx, c, policyPath(app)+"/dry-runs/"+url.PathEscape(id), opts)
}
