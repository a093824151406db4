// Package policy is the rule document of an app's policy (SPEC section 3.4). It is pure:
// no I/O, so the same rules give the same answer wherever they are evaluated.
package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
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
	Windows              []Window         `json:"windows,omitempty"`
	// ChangeApprovals is how many people other than a draft's author must approve it
	// before it is published; at 0 a PUT of the rules publishes them at once. A change of
	// it is published under the value in force.
	ChangeApprovals int `json:"changeApprovals,omitempty"`
	// SignedApprovals makes every approval decision on the app's orders carry the
	// approver's own signature over the item's statement (SPEC 3.3, 3.5a), made with an
	// approver key of the deciding person or credential.
	SignedApprovals bool `json:"signedApprovals,omitempty"`
}

// CountsVolume reports whether a rule limits volume (dailyVolumeUsd or a window): only
// then does evaluating an order need the volume of other orders counted.
func (r Rules) CountsVolume() bool { return r.DailyVolumeUSD != nil || len(r.Windows) > 0 }

// Window limits the USD volume of the orders sharing one key (a wallet, an app, an asset
// or a destination) over the last Hours hours, counted when each order passed the policy.
type Window struct {
	Scope    string          `json:"scope"`
	Hours    int             `json:"hours"`
	LimitUSD decimal.Decimal `json:"limitUsd"`
}

// Window scopes: what the orders a window counts together share.
const (
	ScopeWallet      = "wallet"
	ScopeApp         = "app"
	ScopeAsset       = "asset"
	ScopeDestination = "destination"
)

// Scopes lists the window scopes.
var Scopes = []string{ScopeWallet, ScopeApp, ScopeAsset, ScopeDestination}

// MaxWindowHours is the longest window: a year.
const MaxWindowHours = 366 * 24

// ruleNames are the exact field names of a policy document.
var ruleNames = []string{"maxOrderUsd", "dailyVolumeUsd", "destinationWhitelist", "allowedPairs", "deniedPairs", "allowedProtocols", "approvalTiers", "windows", "changeApprovals", "signedApprovals"}

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
	for _, name := range []string{"maxOrderUsd", "dailyVolumeUsd"} {
		if err := checkAmount(name, keys[name]); err != nil {
			return Rules{}, err
		}
	}
	// Lists hold what they say, as given: Go's decoding would read a null as "" and cut a
	// pair of three assets to two, or fill one of one.
	for _, name := range []string{"destinationWhitelist", "allowedProtocols"} {
		var list []*string
		if json.Unmarshal(keys[name], &list) == nil && slices.Contains(list, nil) {
			return Rules{}, fmt.Errorf("policy: %s must be a list of strings", name)
		}
	}
	for _, name := range []string{"allowedPairs", "deniedPairs"} {
		var pairs [][]*string
		if json.Unmarshal(keys[name], &pairs) == nil && slices.ContainsFunc(pairs, func(p []*string) bool {
			return len(p) != 2 || p[0] == nil || p[1] == nil
		}) {
			return Rules{}, fmt.Errorf(`policy: %s must be pairs of two assets, such as ["ETH","USDC"]`, name)
		}
	}
	// A tier's fields too match exactly, and its minimum is a decimal string. Any other
	// shape of the list is the decoder's to refuse.
	var tiers []map[string]json.RawMessage
	if json.Unmarshal(keys["approvalTiers"], &tiers) == nil {
		for i, t := range tiers {
			for k := range t {
				if k != "minUsd" && k != "quorum" {
					return Rules{}, fmt.Errorf("policy: approvalTiers[%d]: unknown field %q", i, k)
				}
			}
			if err := checkAmount(fmt.Sprintf("approvalTiers[%d].minUsd", i), t["minUsd"]); err != nil {
				return Rules{}, err
			}
		}
	}
	if err := checkWindows(keys["windows"]); err != nil {
		return Rules{}, err
	}
	var r Rules
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Rules{}, fmt.Errorf("policy: %w", err)
	}
	return r, r.Validate()
}

// checkWindows refuses a window whose fields are not exactly scope, hours and limitUsd, or
// whose limit is not a decimal string.
func checkWindows(raw json.RawMessage) error {
	var windows []map[string]json.RawMessage
	if json.Unmarshal(raw, &windows) != nil {
		return nil
	}
	for i, w := range windows {
		for k := range w {
			if k != "scope" && k != "hours" && k != "limitUsd" {
				return fmt.Errorf("policy: windows[%d]: unknown field %q", i, k)
			}
		}
		if w["limitUsd"] == nil {
			return fmt.Errorf("policy: windows[%d].limitUsd is required", i)
		}
		if err := checkAmount(fmt.Sprintf("windows[%d].limitUsd", i), w["limitUsd"]); err != nil {
			return err
		}
	}
	return nil
}

// amountPattern is an amount as a policy writes it (SPEC 2): a decimal string of digits
// and an optional fraction; never a JSON number, a sign or an exponent.
var amountPattern = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)

// checkAmount refuses an amount field (raw JSON, nil when absent) that is not a decimal
// string.
func checkAmount(name string, raw json.RawMessage) error {
	if raw == nil || string(raw) == "null" {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil || !amountPattern.MatchString(s) {
		return fmt.Errorf("policy: %s must be a decimal string such as \"5000000\" or \"0.25\"", name)
	}
	return nil
}

// Validate checks that amounts are non-negative and tiers are well formed.
func (r Rules) Validate() error {
	for name, d := range map[string]*decimal.Decimal{"maxOrderUsd": r.MaxOrderUSD, "dailyVolumeUsd": r.DailyVolumeUSD} {
		if d != nil && d.IsNegative() {
			return fmt.Errorf("policy: %s must not be negative", name)
		}
	}
	for i, w := range r.Windows {
		if !slices.Contains(Scopes, w.Scope) {
			return fmt.Errorf("policy: windows[%d].scope must be one of wallet, app, asset, destination", i)
		}
		if w.Hours < 1 || w.Hours > MaxWindowHours {
			return fmt.Errorf("policy: windows[%d].hours must be from 1 to %d", i, MaxWindowHours)
		}
		if w.LimitUSD.IsNegative() {
			return fmt.Errorf("policy: windows[%d].limitUsd must not be negative", i)
		}
	}
	if r.ChangeApprovals < 0 || r.ChangeApprovals > 10 {
		return fmt.Errorf("policy: changeApprovals must be from 0 to 10")
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
