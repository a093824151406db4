package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/shopspring/decimal"
)

// Rule names, as they appear in violations and dry-run checks.
const (
	RuleMaxOrderUSD          = "maxOrderUsd"
	RuleDailyVolumeUSD       = "dailyVolumeUsd"
	RuleDestinationWhitelist = "destinationWhitelist"
	RuleAllowedPairs         = "allowedPairs"
	RuleDeniedPairs          = "deniedPairs"
	RuleAllowedProtocols     = "allowedProtocols"
	RuleApprovalTiers        = "approvalTiers"
)

// Order is what the policy looks at in an order.
type Order struct {
	Domain    string // payment, trade, earn, borrow
	AmountUSD decimal.Decimal
	// Destination is a payment's destination address.
	Destination string
	// SellAsset and BuyAsset are a trade's pair.
	SellAsset, BuyAsset string
	// Protocol is an earn or borrow order's protocol.
	Protocol string
}

// Check is the outcome of one rule for one order.
type Check struct {
	Rule    string `json:"rule"`
	Passed  bool   `json:"passed"`
	Message string `json:"message"`
}

// Violation is a rule an order breaks, as a refused submit reports it.
type Violation struct {
	Rule    string `json:"rule"`
	Message string `json:"message"`
}

// Evaluation is the policy's decision on an order.
type Evaluation struct {
	// Checks lists every rule that applies to the order, passed or not.
	Checks []Check `json:"checks"`
	// ApprovalRequired and Quorum come from the approval tiers.
	ApprovalRequired bool `json:"approvalRequired"`
	Quorum           int  `json:"quorum"`
}

// Violations are the failed checks.
func (e Evaluation) Violations() []Check {
	var out []Check
	for _, c := range e.Checks {
		if !c.Passed {
			out = append(out, c)
		}
	}
	return out
}

// Allowed reports whether no rule was violated.
func (e Evaluation) Allowed() bool { return len(e.Violations()) == 0 }

// Evaluate decides an order against the rules. spentTodayUSD is the wallet's volume of
// the current day before this order, counting only orders that were not rejected or failed.
// It is pure: the same inputs always give the same decision.
func (r Rules) Evaluate(o Order, spentTodayUSD decimal.Decimal) Evaluation {
	var e Evaluation
	add := func(rule string, passed bool, format string, args ...any) {
		e.Checks = append(e.Checks, Check{Rule: rule, Passed: passed, Message: fmt.Sprintf(format, args...)})
	}
	usd := o.AmountUSD.StringFixedBank(2)
	if r.MaxOrderUSD != nil {
		ok := o.AmountUSD.LessThanOrEqual(*r.MaxOrderUSD)
		add(RuleMaxOrderUSD, ok, "order worth %s USD against a limit of %s USD", usd, r.MaxOrderUSD.String())
	}
	if r.DailyVolumeUSD != nil {
		total := spentTodayUSD.Add(o.AmountUSD)
		ok := total.LessThanOrEqual(*r.DailyVolumeUSD)
		add(RuleDailyVolumeUSD, ok, "wallet volume today would be %s USD against a limit of %s USD", total.StringFixedBank(2), r.DailyVolumeUSD.String())
	}
	switch o.Domain {
	case "payment":
		if len(r.DestinationWhitelist) > 0 {
			ok := slices.ContainsFunc(r.DestinationWhitelist, func(a string) bool { return strings.EqualFold(a, o.Destination) })
			add(RuleDestinationWhitelist, ok, "destination %s %s on the whitelist", o.Destination, isOrNot(ok))
		}
	case "trade":
		pair := fmt.Sprintf("%s/%s", o.SellAsset, o.BuyAsset)
		if len(r.AllowedPairs) > 0 {
			ok := containsPair(r.AllowedPairs, o.SellAsset, o.BuyAsset)
			add(RuleAllowedPairs, ok, "pair %s %s among the allowed pairs", pair, isOrNot(ok))
		}
		if len(r.DeniedPairs) > 0 {
			denied := containsPair(r.DeniedPairs, o.SellAsset, o.BuyAsset)
			add(RuleDeniedPairs, !denied, "pair %s %s among the denied pairs", pair, isOrNot(denied))
		}
	case "earn", "borrow":
		if len(r.AllowedProtocols) > 0 {
			ok := slices.ContainsFunc(r.AllowedProtocols, func(p string) bool { return strings.EqualFold(p, o.Protocol) })
			add(RuleAllowedProtocols, ok, "protocol %s %s allowed", o.Protocol, isOrNot(ok))
		}
	}
	e.Quorum = r.Quorum(o.AmountUSD)
	e.ApprovalRequired = e.Quorum > 0
	if len(r.ApprovalTiers) > 0 {
		msg := fmt.Sprintf("order worth %s USD needs no approval", usd)
		if e.ApprovalRequired {
			msg = fmt.Sprintf("order worth %s USD needs %d approval(s)", usd, e.Quorum)
		}
		add(RuleApprovalTiers, true, "%s", msg)
	}
	return e
}

// containsPair reports whether the pair is listed, in either order: a pair names two
// assets, not a direction.
func containsPair(pairs [][2]string, a, b string) bool {
	return slices.ContainsFunc(pairs, func(p [2]string) bool {
		return (strings.EqualFold(p[0], a) && strings.EqualFold(p[1], b)) ||
			(strings.EqualFold(p[0], b) && strings.EqualFold(p[1], a))
	})
}

func isOrNot(b bool) string {
	if b {
		return "is"
	}
	return "is not"
}
