package orders

import (
	"encoding/json"
	"math/big"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/internal/policy"
)

var (
	// amountInput is an order amount as docs/openapi.json's PositiveAmountInput allows it.
	amountInput = regexp.MustCompile(`^[0-9]+(\.[0-9]{1,18})?$`)
	// policyAmount is a policy's amount as PolicyRules allows it (zero included).
	policyAmount = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)
	// canonicalAmount is how an amount is shown and stored: no sign, no exponent, no
	// leading zero, no trailing zero after the point.
	canonicalAmount = regexp.MustCompile(`^(0|[1-9][0-9]*)(\.[0-9]*[1-9])?$`)
)

func paymentBody(amount string) []byte {
	return []byte(`{"walletId":"wal_1","asset":"ETH","amount":` + amount +
		`,"destination":{"address":"0x1111111111111111111111111111111111111111"}}`)
}

func hasField(errs []FieldError, field string) bool {
	return slices.ContainsFunc(errs, func(e FieldError) bool { return e.Field == field })
}

// FuzzAmount holds the two parsers of money in request bodies, an order's amount and a
// policy's limits, to SPEC 2 and docs/openapi.json: an amount is a decimal string of
// digits with an optional fraction (at most 18 places for an order, which must be above
// zero), never a JSON number, a sign, an exponent, NaN or a bare point; an accepted
// amount keeps its exact value, and shows and stores as a canonical string that parses
// back to itself.
func FuzzAmount(f *testing.F) {
	for _, s := range []string{"1250.50", "1", "0.000000000000000001", "0.0000000000000000001", "0", "0.00", "-1", "1e3",
		"1E3", "+5", ".5", "5.", "NaN", "Infinity", "\u22121", " 1", "1 ", "0x10", "1_000", "1,5", "00012.3400",
		"99999999999999999999999999999999.5", "1.5e-2", "١٢"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 200 {
			return // longer amounts teach nothing more, and slow the fuzzer's minimising
		}
		quoted, _ := json.Marshal(s)

		// An order's amount.
		in, errs := Parse(DomainPayment, paymentBody(string(quoted)))
		// big.Rat would take "1e999999999" too, and take its time: only plain decimals.
		exact, isDecimal := new(big.Rat), policyAmount.MatchString(s)
		if isDecimal {
			exact.SetString(s)
		}
		want := amountInput.MatchString(s) && exact.Sign() > 0 && len(s) <= MaxAmountLength
		if accepted := !hasField(errs, "amount"); accepted != want {
			t.Fatalf("amount %q: accepted %v (errors %v), want %v", s, accepted, errs, want)
		}
		if want {
			_, amount := in.Valued()
			if amount.Rat().Cmp(exact) != 0 {
				t.Fatalf("amount %q reads as %s", s, amount)
			}
			c := amount.String()
			if !canonicalAmount.MatchString(c) {
				t.Fatalf("amount %q shows as %q, not a canonical decimal string", s, c)
			}
			q, _ := json.Marshal(c)
			again, errs := Parse(DomainPayment, paymentBody(string(q)))
			if _, back := again.Valued(); len(errs) != 0 || back.String() != c {
				t.Fatalf("canonical amount %q of %q does not parse back to itself: %v %v", c, s, back, errs)
			}
			d, err := json.Marshal(in.Details)
			var shown struct{ Amount any }
			if err != nil || json.Unmarshal(d, &shown) != nil || shown.Amount != c {
				t.Fatalf("amount %q is stored as %s, want the string %q", s, d, c)
			}
		}
		// The same characters as a bare JSON value (a number, say) are refused.
		if bareJSON(s) {
			if _, errs := Parse(DomainPayment, paymentBody(s)); !hasField(errs, "amount") {
				t.Fatalf("amount given as the JSON value %s was accepted", s)
			}
		}

		// A policy's limits and tiers.
		wantPolicy := policyAmount.MatchString(s)
		for _, doc := range []string{`{"maxOrderUsd":%s}`, `{"dailyVolumeUsd":%s}`, `{"approvalTiers":[{"minUsd":%s,"quorum":1}]}`} {
			r, err := policy.Parse([]byte(replaceVerb(doc, string(quoted))))
			if (err == nil) != wantPolicy {
				t.Fatalf("policy %s with %q: error %v, want accepted %v", doc, s, err, wantPolicy)
			}
			if err == nil {
				stored, err := r.Document()
				if err != nil {
					t.Fatal(err)
				}
				back, err := policy.Parse([]byte(stored))
				if err != nil {
					t.Fatalf("stored policy %s does not parse back: %v", stored, err)
				}
				if again, _ := back.Document(); again != stored {
					t.Fatalf("stored policy %s reads back as %s", stored, again)
				}
				for _, d := range policyAmounts(back) {
					if !canonicalAmount.MatchString(d.String()) || d.Rat().Cmp(exact) != 0 {
						t.Fatalf("policy amount %q stored as %s", s, d)
					}
				}
			}
			if bareJSON(s) {
				if _, err := policy.Parse([]byte(replaceVerb(doc, s))); err == nil {
					t.Fatalf("policy %s with the JSON value %s was accepted", doc, s)
				}
			}
		}
	})
}

func replaceVerb(format, v string) string { return strings.Replace(format, "%s", v, 1) }

// bareJSON reports whether s is a JSON value other than a string or null.
func bareJSON(s string) bool {
	v := strings.TrimLeft(s, " \t\r\n")
	return json.Valid([]byte(s)) && v[0] != '"' && !strings.HasPrefix(v, "null")
}

func policyAmounts(r policy.Rules) []decimal.Decimal {
	var out []decimal.Decimal
	if r.MaxOrderUSD != nil {
		out = append(out, *r.MaxOrderUSD)
	}
	if r.DailyVolumeUSD != nil {
		out = append(out, *r.DailyVolumeUSD)
	}
	for _, t := range r.ApprovalTiers {
		out = append(out, t.MinUSD)
	}
	return out
}
