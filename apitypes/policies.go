package apitypes

import "github.com/opentreasury/treasury/policy"

// PolicyEvaluation is a dry run's answer (POST /policies/{app}/evaluate): what the policy
// would decide for an order.
type PolicyEvaluation struct {
	App           string `json:"app"`
	PolicyVersion int    `json:"policyVersion"`
	Allowed       bool   `json:"allowed"`
	// Violations are the failed Checks; Checks every rule that applied, passed or not.
	Violations       []PolicyCheck `json:"violations"`
	Checks           []PolicyCheck `json:"checks"`
	ApprovalRequired bool          `json:"approvalRequired"`
	Quorum           int           `json:"quorum"`
	AmountUSD        string        `json:"amountUsd"`
	DailyVolumeUSD   string        `json:"dailyVolumeUsd"`
}

// PolicyCheck is one rule applied to an order.
type PolicyCheck = policy.Check
