// Package policy is the rule document of an app's policy (SPEC section 3.4). It is pure:
// no I/O, so the same rules give the same answer wherever they are evaluated.
package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/shopspring/decimal"
)

// Tier requires quorum approvals for orders worth at least MinUSD.
type Tier struct {
	MinUSD decimal.Decimal `json:"minUsd"`
	Quorum int             `json:"quorum"`
}

// Rules is one app's policy. Amounts are decimal strings in JSON.
type Rules struct {
	MaxOrderUSD          *decimal.Decimal `json:"maxOrderUsd,omitempty"`
	DailyVolumeUSD       *decimal.Decimal `json:"dailyVolumeUsd,omitempty"`
	DestinationWhitelist []string         `json:"destinationWhitelist,omitempty"`
	AllowedPairs         [][2]string      `json:"allowedPairs,omitempty"`
	DeniedPairs          [][2]string      `json:"deniedPairs,omitempty"`
	AllowedProtocols     []string         `json:"allowedProtocols,omitempty"`
	ApprovalTiers        []Tier           `json:"approvalTiers,omitempty"`
}

// ruleNames are the exact field names of a policy document.
var ruleNames = []string{"maxOrderUsd", "dailyVolumeUsd", "destinationWhitelist", "allowedPairs", "deniedPairs", "allowedProtocols", "approvalTiers"}

// Parse reads a policy document strictly: unknown fields (names match exactly, not in any
// case as Go's JSON decoding would) and bad values are errors.
func Parse(doc []byte) (Rules, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(doc, &keys); err != nil {
		return Rules{}, fmt.Errorf("policy: must be a JSON object: %w", err)
	}
	for k := range keys {
		if !slices.Contains(ruleNames, k) {
			return Rules{}, fmt.Errorf("policy: unknown field %q", k)
		}
	}
	var r Rules
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Rules{}, fmt.Errorf("policy: %w", err)
	}
	return r, r.Validate()
}

// Validate checks that amounts are non-negative and tiers are well formed.
func (r Rules) Validate() error {
	for name, d := range map[string]*decimal.Decimal{"maxOrderUsd": r.MaxOrderUSD, "dailyVolumeUsd": r.DailyVolumeUSD} {
		if d != nil && d.IsNegative() {
			return fmt.Errorf("policy: %s must not be negative", name)
		}
	}
	for i, t := range r.ApprovalTiers {
		if t.MinUSD.IsNegative() {
			return fmt.Errorf("policy: approvalTiers[%d].minUsd must not be negative", i)
		}
		if t.Quorum < 1 {
			return fmt.Errorf("policy: approvalTiers[%d].quorum must be at least 1", i)
		}
	}
	return nil
}

// Quorum returns how many approvals an order worth usd needs: the quorum of the highest
// tier whose minimum it reaches, or 0 when no tier applies.
func (r Rules) Quorum(usd decimal.Decimal) int {
	tiers := append([]Tier(nil), r.ApprovalTiers...)
	sort.Slice(tiers, func(i, j int) bool { return tiers[i].MinUSD.LessThan(tiers[j].MinUSD) })
	q := 0
	for _, t := range tiers {
		if usd.GreaterThanOrEqual(t.MinUSD) {
			q = t.Quorum
		}
	}
	return q
}

// Document renders the rules as stored JSON.
func (r Rules) Document() (string, error) {
	b, err := json.Marshal(r)
	return string(b), err
}
