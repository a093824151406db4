package orders

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// batchBody is a USDC batch payment body paying n recipients 1.5, 2.5, … each.
func batchBody(n int) string {
	var rs []string
	for i := range n {
		rs = append(rs, fmt.Sprintf(`{"address":"0x%040x","amount":"%d.5","reference":"r-%d"}`, i+1, i+1, i))
	}
	return `{"walletId":"w","asset":"USDC","recipients":[` + strings.Join(rs, ",") + `],"reference":"payroll"}`
}

func TestABatchPaymentIsReadStrictly(t *testing.T) {
	addr := `"0x1111111111111111111111111111111111111111"`
	two := `[{"address":` + addr + `,"amount":"1"},{"address":` + addr + `,"amount":"2.25","label":"Bob"}]`
	cases := []struct {
		name, body string
		wantErrs   []string
	}{
		{"two recipients", `{"walletId":"w","asset":"USDC","recipients":` + two + `}`, nil},
		{"one recipient", `{"walletId":"w","asset":"USDC","recipients":[{"address":` + addr + `,"amount":"1"}]}`, []string{"recipients"}},
		{"501 recipients", batchBody(501), []string{"recipients"}},
		{"with an amount", `{"walletId":"w","asset":"USDC","amount":"3.25","recipients":` + two + `}`, []string{"amount"}},
		{"with a destination", `{"walletId":"w","asset":"USDC","destination":{"address":` + addr + `},"recipients":` + two + `}`, []string{"destination"}},
		{"not an array", `{"walletId":"w","asset":"USDC","recipients":{"address":` + addr + `}}`, []string{"recipients"}},
		{"a number amount", `{"walletId":"w","asset":"USDC","recipients":[{"address":` + addr + `,"amount":1},{"address":` + addr + `,"amount":"1"}]}`,
			[]string{"recipients[0].amount"}},
		{"a negative amount, a missing address, an unknown field", `{"walletId":"w","asset":"USDC","recipients":[{"address":` + addr +
			`,"amount":"-1"},{"amount":"1","memo":"x"}]}`, []string{"recipients[0].amount", "recipients[1].memo", "recipients[1].address"}},
		{"null entry", `{"walletId":"w","asset":"USDC","recipients":[null,{"address":` + addr + `,"amount":"1"}]}`, []string{"recipients[0]"}},
		{"not on a trade", `{"walletId":"w","sellAsset":"USDC","buyAsset":"ETH","sellAmount":"1","maxSlippageBps":1,"recipients":` + two + `}`,
			[]string{"recipients"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			domain := DomainPayment
			if strings.Contains(tc.body, "sellAsset") {
				domain = DomainTrade
			}
			d, errs := Parse(domain, []byte(tc.body))
			if got := fieldsOf(errs); !slices.Equal(got, tc.wantErrs) {
				t.Fatalf("errors on %v, want %v (%+v)", got, tc.wantErrs, errs)
			}
			if tc.wantErrs != nil {
				return
			}
			p := d.Details.(*Payment)
			if asset, total := p.Valued(); asset != "USDC" || total.String() != "3.25" {
				t.Fatalf("valued %s %s, want the recipients' total 3.25 USDC", total, asset)
			}
			if p.Recipients[1].Label != "Bob" || p.Recipients[1].Amount.String() != "2.25" {
				t.Fatalf("recipient 1 read as %+v", p.Recipients[1])
			}
		})
	}
}

// TestABatchIsPaidInPartsOfAChainsSize: each part is a TRANSFER leg paying the next
// BatchPartSize recipients, in order, and every recipient is in exactly one part.
func TestABatchIsPaidInPartsOfAChainsSize(t *testing.T) {
	size := DefaultBatchPartSize
	for _, n := range []int{2, size, size + 1, MaxRecipients} {
		d, errs := Parse(DomainPayment, []byte(batchBody(n)))
		if errs != nil {
			t.Fatal(errs)
		}
		p := d.Details.(*Payment)
		legs := p.Legs("ethereum")
		if want := (n + size - 1) / size; len(legs) != want || slices.ContainsFunc(legs, func(l string) bool { return l != "TRANSFER" }) {
			t.Fatalf("%d recipients: legs %v, want %d TRANSFER", n, legs, want)
		}
		next := 0
		for pos := range legs {
			part, first := p.Part("ethereum", pos)
			if first != next || len(part) == 0 || len(part) > size || part[0] != p.Recipients[first] {
				t.Fatalf("%d recipients: part %d starts at %d with %d, want at %d", n, pos, first, len(part), next)
			}
			next += len(part)
		}
		if next != n {
			t.Fatalf("%d recipients: the parts pay %d", n, next)
		}
	}
}

func TestABatchIsCheckedRecipientByRecipient(t *testing.T) {
	body := `{"walletId":"w","asset":"USDC","recipients":[{"address":"0x1111111111111111111111111111111111111111","amount":"1"},` +
		`{"address":"0x22","amount":"1.0000001"}]}`
	d, errs := Parse(DomainPayment, []byte(body))
	if errs != nil {
		t.Fatal(errs)
	}
	if got := fieldsOf(d.Check("ethereum")); !slices.Equal(got, []string{"recipients[1].amount", "recipients[1].address"}) {
		t.Fatalf("errors on %v", got)
	}
	d, _ = Parse(DomainPayment, []byte(batchBody(3)))
	if got := fieldsOf(d.Check("ethereum")); got != nil {
		t.Fatalf("a good batch: errors on %v", got)
	}
	if got := fieldsOf(d.Check("solana")); !slices.Equal(got, []string{"recipients[0].address", "recipients[1].address", "recipients[2].address"}) {
		t.Fatalf("a batch of EVM addresses on Solana: errors on %v", got)
	}
	if legs := d.Legs("solana"); len(legs) != 1 {
		t.Fatalf("3 recipients on Solana: legs %v", legs)
	}
	nine, _ := Parse(DomainPayment, []byte(batchBody(SolanaBatchPartSize+1)))
	if legs := nine.Legs("solana"); len(legs) != 2 {
		t.Fatalf("%d recipients on Solana: legs %v, want two parts", SolanaBatchPartSize+1, legs)
	}
	po := d.PolicyOrder("pay", "w", d.Details.(*Payment).Amount)
	if len(po.Recipients) != 3 || po.Recipients[2] != "0x0000000000000000000000000000000000000003" || po.Destination != "" {
		t.Fatalf("policy order %+v", po)
	}
}

// TestABatchReadsBackAsStored: the store's column keeps the recipients, and a single
// payment is written as before (no recipients, its destination).
func TestABatchReadsBackAsStored(t *testing.T) {
	d, _ := Parse(DomainPayment, []byte(batchBody(3)))
	v, err := Fields{d.Details}.Value()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(v.(string), "destination") {
		t.Fatalf("a batch is stored with a destination: %s", v)
	}
	var back Fields
	if err := back.Scan(v); err != nil {
		t.Fatal(err)
	}
	p := back.Details.(*Payment)
	if len(p.Recipients) != 3 || p.Recipients[2].Reference != "r-2" || p.Amount.String() != "7.5" {
		t.Fatalf("read back %+v", p)
	}
}

// TestABatchKeepsThePartSizeItWasMadeWith: a part size set when the order is made (from
// its chain's configuration) decides its legs and parts, and is stored with it, so that a
// configuration changed later changes neither.
func TestABatchKeepsThePartSizeItWasMadeWith(t *testing.T) {
	d, _ := Parse(DomainPayment, []byte(batchBody(7)))
	p := d.Details.(*Payment)
	p.PartSize = 3
	if legs := p.Legs("ethereum"); len(legs) != 3 {
		t.Fatalf("7 recipients in parts of 3: legs %v", legs)
	}
	if part, first := p.Part("ethereum", 2); len(part) != 1 || first != 6 {
		t.Fatalf("the last part: %d from %d", len(part), first)
	}
	v, _ := Fields{p}.Value()
	var back Fields
	if err := back.Scan(v); err != nil || back.Details.(*Payment).PartSize != 3 {
		t.Fatalf("read back %+v %v", back.Details, err)
	}
	if _, errs := Parse(DomainPayment, []byte(strings.Replace(batchBody(2), `"reference":"payroll"`, `"partSize":1`, 1))); fieldsOf(errs)[0] != "partSize" {
		t.Fatalf("a body setting its own part size: %v", errs)
	}
}
