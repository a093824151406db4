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
	RuleWindows              = "windows"
)

// Order is what the policy looks at in an order.
type Order struct {
	Domain    string // payment, trade, earn, borrow
	AmountUSD decimal.Decimal
	// App and WalletID are the order's app and wallet; Asset the asset it moves (a trade's
	// the one it sells). With Destination they are the keys of the volume windows.
	App, WalletID, Asset string
	// Destination is a payment's destination address; Recipients, instead, a batch
	// payment's recipients' addresses, in order.
	Destination string
	Recipients  []string
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
	// Windows is each volume window that applies to the order, with its headroom.
	Windows []WindowUse `json:"windows"`
}

// Usage is the volume counted against an order's limits before it.
type Usage struct {
	// DailyVolumeUSD is the wallet's volume of the current UTC day.
	DailyVolumeUSD decimal.Decimal
	// Windows[i] is the volume of Rules.Windows[i] for the order's key (WindowKey); a
	// missing entry counts as zero.
	Windows []decimal.Decimal
}

// WindowUse is one window for one key: its volume before the order, and the headroom left.
type WindowUse struct {
	Scope        string          `json:"scope"`
	Key          string          `json:"key"`
	Hours        int             `json:"hours"`
	LimitUSD     decimal.Decimal `json:"limitUsd"`
	UsedUSD      decimal.Decimal `json:"usedUsd"`
	RemainingUSD decimal.Decimal `json:"remainingUsd"`
}

// NewWindowUse is a window's use by key with used USD counted in it.
func NewWindowUse(w Window, key string, used decimal.Decimal) WindowUse {
	return WindowUse{Scope: w.Scope, Key: key, Hours: w.Hours, LimitUSD: w.LimitUSD, UsedUSD: used,
		RemainingUSD: decimal.Max(decimal.Zero, w.LimitUSD.Sub(used))}
}

// WindowKey is the key the window counts the order under, and false when the window does
// not apply to it (a destination window and an order with no destination).
func WindowKey(w Window, o Order) (string, bool) {
	var key string
	switch w.Scope {
	case ScopeWallet:
		key = o.WalletID
	case ScopeApp:
		key = o.App
	case ScopeAsset:
		key = strings.ToUpper(o.Asset)
	case ScopeDestination:
		key = strings.ToLower(o.Destination)
	}
	return key, key != ""
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

// Evaluate decides an order against the rules, given the volume counted before it (only
// orders the policy let through that were not rejected or failed count). It is pure: the
// same inputs always give the same decision.
func (r Rules) Evaluate(o Order, u Usage) Evaluation {
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
		total := u.DailyVolumeUSD.Add(o.AmountUSD)
		ok := total.LessThanOrEqual(*r.DailyVolumeUSD)
		add(RuleDailyVolumeUSD, ok, "wallet volume today would be %s USD against a limit of %s USD", total.StringFixedBank(2), r.DailyVolumeUSD.String())
	}
	for i, w := range r.Windows {
		if w.Scope == ScopeDestination && len(o.Recipients) > 0 {
			// A destination's window counts the orders to that destination; a batch's
			// recipients would each need their share counted, which the windows do not
			// keep. Refused rather than let through uncounted.
			add(RuleWindows, false, "a destination window (%d h) cannot count a batch of %d recipients: pay them one by one, or scope the window by wallet, app or asset",
				w.Hours, len(o.Recipients))
			continue
		}
		key, ok := WindowKey(w, o)
		if !ok {
			continue
		}
		used := decimal.Zero
		if i < len(u.Windows) {
			used = u.Windows[i]
		}
		e.Windows = append(e.Windows, NewWindowUse(w, key, used))
		total := used.Add(o.AmountUSD)
		add(RuleWindows, total.LessThanOrEqual(w.LimitUSD), "volume of %s %s over %d h would be %s USD against a limit of %s USD",
			w.Scope, key, w.Hours, total.StringFixedBank(2), w.LimitUSD.String())
	}
	switch o.Domain {
	case "payment":
		switch listed := func(d string) bool {
			return slices.ContainsFunc(r.DestinationWhitelist, func(a string) bool { return strings.EqualFold(a, d) })
		}; {
		case len(r.DestinationWhitelist) == 0:
		case len(o.Recipients) > 0:
			var off []string
			for i, d := range o.Recipients {
				if !listed(d) {
					off = append(off, fmt.Sprintf("recipients[%d] %s", i, d))
				}
			}
			if len(off) == 0 {
				add(RuleDestinationWhitelist, true, "all %d recipients are on the whitelist", len(o.Recipients))
			} else {
				add(RuleDestinationWhitelist, false, "%d of %d recipients are not on the whitelist: %s", len(off), len(o.Recipients),
					strings.Join(off, ", "))
			}
		default:
			ok := listed(o.Destination)
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
