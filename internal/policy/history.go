package policy

import (
	"slices"
	"time"
)

// Outcome is what a policy decided, or would decide, for an order.
type Outcome struct {
	Allowed          bool     `json:"allowed"`
	ApprovalRequired bool     `json:"approvalRequired"`
	Quorum           int      `json:"quorum"`
	Violations       []string `json:"violations"`
}

// OutcomeOf is an evaluation's outcome.
func OutcomeOf(e Evaluation) Outcome {
	o := Outcome{Allowed: e.Allowed(), ApprovalRequired: e.ApprovalRequired, Quorum: e.Quorum, Violations: []string{}}
	for _, v := range e.Violations() {
		if !slices.Contains(o.Violations, v.Rule) {
			o.Violations = append(o.Violations, v.Rule)
		}
	}
	return o
}

// Shifts: how an order's outcome moves from what its policy decided to what another
// policy would decide.
const (
	ShiftAllowedToRefused = "allowedToRefused"
	ShiftRefusedToAllowed = "refusedToAllowed"
	ShiftApprovalAdded    = "approvalAdded"
	ShiftApprovalRemoved  = "approvalRemoved"
	ShiftQuorumRaised     = "quorumRaised"
	ShiftQuorumLowered    = "quorumLowered"
)

// Shifts lists every shift, in the order a report shows them.
var Shifts = []string{ShiftAllowedToRefused, ShiftRefusedToAllowed, ShiftApprovalAdded, ShiftApprovalRemoved, ShiftQuorumRaised, ShiftQuorumLowered}

// Shift names how an outcome moved, "" when it did not.
func Shift(before, after Outcome) string {
	switch {
	case before.Allowed && !after.Allowed:
		return ShiftAllowedToRefused
	case !before.Allowed && after.Allowed:
		return ShiftRefusedToAllowed
	case !before.Allowed:
		return ""
	case !before.ApprovalRequired && after.ApprovalRequired:
		return ShiftApprovalAdded
	case before.ApprovalRequired && !after.ApprovalRequired:
		return ShiftApprovalRemoved
	case after.Quorum > before.Quorum:
		return ShiftQuorumRaised
	case after.Quorum < before.Quorum:
		return ShiftQuorumLowered
	}
	return ""
}

// HistoryExample is one order whose outcome would change.
type HistoryExample struct {
	OrderID     string    `json:"orderId"`
	Domain      string    `json:"domain"`
	AmountUSD   string    `json:"amountUsd"`
	SubmittedAt time.Time `json:"submittedAt"`
	Before      Outcome   `json:"before"`
	After       Outcome   `json:"after"`
}

// ShiftReport counts the orders of one shift and keeps the first of them.
type ShiftReport struct {
	Count    int              `json:"count"`
	Examples []HistoryExample `json:"examples"`
}

// RuleCounts is how many orders one rule would newly refuse, and newly stop refusing.
type RuleCounts struct {
	NewlyRefused    int `json:"newlyRefused"`
	NoLongerRefused int `json:"noLongerRefused"`
}

// HistoryReport is a dry run of a policy against past orders: what would have changed.
type HistoryReport struct {
	Evaluated int                     `json:"evaluated"`
	Unchanged int                     `json:"unchanged"`
	Shifts    map[string]*ShiftReport `json:"shifts"`
	ByRule    map[string]*RuleCounts  `json:"byRule"`
}

// NewHistoryReport is an empty report with every shift present.
func NewHistoryReport() *HistoryReport {
	r := &HistoryReport{Shifts: map[string]*ShiftReport{}, ByRule: map[string]*RuleCounts{}}
	for _, s := range Shifts {
		r.Shifts[s] = &ShiftReport{Examples: []HistoryExample{}}
	}
	return r
}

// Add counts one order, keeping at most examples of each shift.
func (r *HistoryReport) Add(ex HistoryExample, examples int) {
	r.Evaluated++
	for _, rule := range ex.After.Violations {
		if !slices.Contains(ex.Before.Violations, rule) {
			r.rule(rule).NewlyRefused++
		}
	}
	for _, rule := range ex.Before.Violations {
		if !slices.Contains(ex.After.Violations, rule) {
			r.rule(rule).NoLongerRefused++
		}
	}
	shift := Shift(ex.Before, ex.After)
	if shift == "" {
		r.Unchanged++
		return
	}
	s := r.Shifts[shift]
	s.Count++
	if len(s.Examples) < examples {
		s.Examples = append(s.Examples, ex)
	}
}

func (r *HistoryReport) rule(name string) *RuleCounts {
	c := r.ByRule[name]
	if c == nil {
		c = &RuleCounts{}
		r.ByRule[name] = c
	}
	return c
}
