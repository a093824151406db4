package apitypes

import (
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/policy"
)

// PolicyRules are an app's policy (SPEC 3.4); every rule is optional. Amounts are decimal
// strings of USD.
type PolicyRules struct {
	MaxOrderUSD string `json:"maxOrderUsd,omitempty"`
	// DailyVolumeUSD limits a wallet's orders submitted since 00:00 UTC.
	DailyVolumeUSD string `json:"dailyVolumeUsd,omitempty"`
	// DestinationWhitelist applies to payments.
	DestinationWhitelist []string `json:"destinationWhitelist,omitempty"`
	// AllowedPairs and DeniedPairs apply to trades; a pair names two assets in either order.
	AllowedPairs [][2]string `json:"allowedPairs,omitempty"`
	DeniedPairs  [][2]string `json:"deniedPairs,omitempty"`
	// AllowedProtocols applies to earn and borrow orders.
	AllowedProtocols []string `json:"allowedProtocols,omitempty"`
	// ApprovalTiers: an order needs the quorum of the highest tier whose MinUSD it reaches.
	ApprovalTiers []ApprovalTier `json:"approvalTiers,omitempty"`
	// Windows limit the volume of the orders sharing a key over rolling windows.
	Windows []PolicyWindow `json:"windows,omitempty"`
	// ChangeApprovals is how many people other than a draft's author must approve a change
	// of the policy, 0 to 10. Above 0, a PUT of the rules is refused (409 conflict):
	// changes go through drafts and their approvals.
	ChangeApprovals int `json:"changeApprovals,omitempty"`
	// SignedApprovals makes every approval decision carry the approver's signature over
	// the item's statement, made with one of the approver's keys.
	SignedApprovals bool `json:"signedApprovals,omitempty"`
}

// PolicyWindow limits to LimitUSD the USD volume of the orders sharing one key over the
// last Hours hours, 1 to 8784. Scope names the key: wallet, app, asset (a trade's sold
// asset) or destination (a payment's). The orders counted are those the policy let
// through and that were not rejected or failed.
type PolicyWindow struct {
	Scope    string `json:"scope"`
	Hours    int    `json:"hours"`
	LimitUSD string `json:"limitUsd"`
}

// ApprovalTier requires Quorum approvals for orders worth at least MinUSD.
type ApprovalTier struct {
	MinUSD string `json:"minUsd"`
	Quorum int    `json:"quorum"`
}

// Policy is an app's policy in force and its version (GET /policies/{app}).
type Policy struct {
	App     string      `json:"app"`
	Version int         `json:"version"`
	Rules   PolicyRules `json:"rules"`
	// UpdatedBy and UpdatedAt are null while the policy was never set (Version 0).
	UpdatedBy *string      `json:"updatedBy"`
	UpdatedAt *events.Time `json:"updatedAt"`
}

// PolicyEvaluation is a dry run's answer (POST /policies/{app}/evaluate): what the policy
// would decide for an order.
type PolicyEvaluation struct {
	App string `json:"app"`
	// PolicyVersion is the version evaluated: the one in force, the one asked for, or for
	// a draft the version it is based on.
	PolicyVersion int `json:"policyVersion"`
	// DraftID is the draft evaluated, null for a published version.
	DraftID *string `json:"draftId"`
	Allowed bool    `json:"allowed"`
	// Violations are the failed Checks; Checks every rule that applied, passed or not.
	Violations       []PolicyCheck `json:"violations"`
	Checks           []PolicyCheck `json:"checks"`
	ApprovalRequired bool          `json:"approvalRequired"`
	Quorum           int           `json:"quorum"`
	AmountUSD        string        `json:"amountUsd"`
	// DailyVolumeUsedUSD is the wallet's volume since 00:00 UTC before the order: what
	// the rule dailyVolumeUsd (a limit) counts.
	DailyVolumeUsedUSD string `json:"dailyVolumeUsedUsd"`
	// Windows is each volume window that applies to the order, with its headroom before it.
	Windows []PolicyWindowUse `json:"windows"`
}

// PolicyCheck is one rule applied to an order.
type PolicyCheck = policy.Check

// PolicyChange is one rule that differs between two policies.
type PolicyChange = policy.Change

// PolicyWindowUse is one volume window for one key (a wallet, an app, an asset or a
// destination): its limit, the volume counted in it and the headroom left.
type PolicyWindowUse struct {
	Scope        string `json:"scope"`
	Key          string `json:"key"`
	Hours        int    `json:"hours"`
	LimitUSD     string `json:"limitUsd"`
	UsedUSD      string `json:"usedUsd"`
	RemainingUSD string `json:"remainingUsd"`
}

// PolicyApproval is one person's approval of a policy draft.
type PolicyApproval struct {
	By string      `json:"by"`
	At events.Time `json:"at"`
}

// PolicyVersion is one published version of an app's policy
// (GET /policies/{app}/versions[/{version}]).
type PolicyVersion struct {
	App     string      `json:"app"`
	Version int         `json:"version"`
	Rules   PolicyRules `json:"rules"`
	// Author is the credential that wrote the rules; AuthorPerson the person behind it.
	Author       string  `json:"author"`
	AuthorPerson *string `json:"authorPerson"`
	// DraftID is the draft it was published from, null for a PUT.
	DraftID   *string          `json:"draftId"`
	Approvals []PolicyApproval `json:"approvals"`
	// Restores is the earlier version a rollback published again.
	Restores    *int        `json:"restores"`
	PublishedAt events.Time `json:"publishedAt"`
	// Diff is what it changed from the version before (read one version to get it).
	Diff []PolicyChange `json:"diff,omitempty"`
}

// PolicyDraft is a proposed policy (…/policies/{app}/drafts): edited freely, in force only
// once published.
type PolicyDraft struct {
	ID     string      `json:"id"`
	App    string      `json:"app"`
	Status string      `json:"status"`
	Rules  PolicyRules `json:"rules"`
	// BaseVersion is the version in force when it was last saved; InForceVersion the
	// version in force now. It can be published only while they are the same.
	BaseVersion    int  `json:"baseVersion"`
	InForceVersion int  `json:"inForceVersion"`
	Restores       *int `json:"restores"`
	// Author is the credential that last saved it; AuthorPerson the person behind it, who
	// cannot approve it.
	Author       string  `json:"author"`
	AuthorPerson *string `json:"authorPerson"`
	// Creator is who started the draft.
	Creator
	Approvals         []PolicyApproval `json:"approvals"`
	ApprovalsRequired int              `json:"approvalsRequired"`
	PublishedVersion  *int             `json:"publishedVersion"`
	// Diff is what publishing it would change from the version in force.
	Diff      []PolicyChange `json:"diff"`
	CreatedAt events.Time    `json:"createdAt"`
	UpdatedAt events.Time    `json:"updatedAt"`
}

// PolicyDryRun is a draft's dry run against the app's past orders
// (…/policies/{app}/dry-runs): what would have changed had the draft been in force.
type PolicyDryRun struct {
	ID      string `json:"id"`
	App     string `json:"app"`
	DraftID string `json:"draftId"`
	// Rules are the draft's rules when the run started.
	Rules    PolicyRules          `json:"rules"`
	Days     int                  `json:"days"`
	Since    events.Time          `json:"since"`
	Until    events.Time          `json:"until"`
	Status   string               `json:"status"`
	Progress PolicyDryRunProgress `json:"progress"`
	Report   PolicyDryRunReport   `json:"report"`
	// Error says why a failed run stopped.
	Error *string `json:"error"`
	Creator
	CreatedAt   events.Time  `json:"createdAt"`
	UpdatedAt   events.Time  `json:"updatedAt"`
	CompletedAt *events.Time `json:"completedAt"`
}

// PolicyDryRunProgress is how many of the run's orders have been evaluated, of Total
// counted when it started.
type PolicyDryRunProgress struct {
	Evaluated int `json:"evaluated"`
	Total     int `json:"total"`
}

// PolicyDryRunReport tallies the orders evaluated so far: unchanged, each shift of outcome
// (keyed by the shift names, every one present) with its first orders, and per rule the
// orders it would newly refuse or stop refusing.
type PolicyDryRunReport struct {
	Evaluated int                          `json:"evaluated"`
	Unchanged int                          `json:"unchanged"`
	Shifts    map[string]PolicyDryRunShift `json:"shifts"`
	ByRule    map[string]PolicyRuleCounts  `json:"byRule"`
}

// PolicyDryRunShift counts the orders of one shift and shows the first of them.
type PolicyDryRunShift struct {
	Count    int                   `json:"count"`
	Examples []PolicyDryRunExample `json:"examples"`
}

// PolicyDryRunExample is one order whose outcome would change: Before is what its policy
// decided at submit, After what the draft would have.
type PolicyDryRunExample struct {
	OrderID string `json:"orderId"`
	Domain  Domain `json:"domain"`
	// Href is the order's path in the API (/api/v1/payments/ord_…).
	Href        string        `json:"href"`
	AmountUSD   string        `json:"amountUsd"`
	SubmittedAt events.Time   `json:"submittedAt"`
	Before      PolicyOutcome `json:"before"`
	After       PolicyOutcome `json:"after"`
}

// PolicyOutcome is what a policy decided, or would decide, for an order. Violations names
// each rule violated once.
type PolicyOutcome = policy.Outcome

// PolicyRuleCounts is how many orders one rule would newly refuse, and stop refusing.
type PolicyRuleCounts = policy.RuleCounts

// PolicyWindows is the headroom of the volume windows of the policy in force
// (GET /policies/{app}/windows): per window, the keys with volume in it, the most used
// first; a window no key has used has one entry with an empty key.
type PolicyWindows struct {
	App           string            `json:"app"`
	PolicyVersion int               `json:"policyVersion"`
	Windows       []PolicyWindowUse `json:"windows"`
}
