package apitypes

import (
	"encoding/json"

	"github.com/opentreasury/treasury/events"

	"github.com/opentreasury/treasury/policy"
)

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
	App     string          `json:"app"`
	Version int             `json:"version"`
	Rules   json.RawMessage `json:"rules"`
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
	ID     string          `json:"id"`
	App    string          `json:"app"`
	Status string          `json:"status"`
	Rules  json.RawMessage `json:"rules"`
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
	Rules    json.RawMessage `json:"rules"`
	Days     int             `json:"days"`
	Since    events.Time     `json:"since"`
	Until    events.Time     `json:"until"`
	Status   string          `json:"status"`
	Progress DryRunProgress  `json:"progress"`
	Report   DryRunReport    `json:"report"`
	// Error says why a failed run stopped.
	Error *string `json:"error"`
	Creator
	CreatedAt   events.Time  `json:"createdAt"`
	UpdatedAt   events.Time  `json:"updatedAt"`
	CompletedAt *events.Time `json:"completedAt"`
}

// DryRunProgress is how many of the run's orders have been evaluated.
type DryRunProgress struct {
	Evaluated int `json:"evaluated"`
	Total     int `json:"total"`
}

// DryRunReport tallies the orders evaluated so far: unchanged, each shift of outcome with
// its first orders, and what each rule newly refuses or stops refusing.
type DryRunReport struct {
	Evaluated int                          `json:"evaluated"`
	Unchanged int                          `json:"unchanged"`
	Shifts    map[string]DryRunShift       `json:"shifts"`
	ByRule    map[string]policy.RuleCounts `json:"byRule"`
}

// DryRunShift counts the orders of one shift and shows the first of them.
type DryRunShift struct {
	Count    int             `json:"count"`
	Examples []DryRunExample `json:"examples"`
}

// DryRunExample is one order whose outcome would change, linked to the order.
type DryRunExample struct {
	OrderID     string         `json:"orderId"`
	Domain      string         `json:"domain"`
	Href        string         `json:"href"`
	AmountUSD   string         `json:"amountUsd"`
	SubmittedAt events.Time    `json:"submittedAt"`
	Before      policy.Outcome `json:"before"`
	After       policy.Outcome `json:"after"`
}

// PolicyWindows is the headroom of the volume windows of the policy in force
// (GET /policies/{app}/windows): per window, the keys with volume in it, the most used
// first; a window no key has used has one entry with an empty key.
type PolicyWindows struct {
	App           string            `json:"app"`
	PolicyVersion int               `json:"policyVersion"`
	Windows       []PolicyWindowUse `json:"windows"`
}
