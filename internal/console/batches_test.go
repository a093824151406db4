package console_test

import (
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// TestABatchFromACSV: the pay app's orders page takes a CSV of recipients; problems come
// back said on their lines (the CSV's and the order's alike) with nothing made; a good
// file makes a draft batch payment whose page lists every recipient and offers Submit,
// which submits it.
func TestABatchFromACSV(t *testing.T) {
	p := newPages(t)
	owner := p.owner(t)
	wallet := p.creds.Wallets[0].ID
	page := p.get(t, owner, "/console/pay/orders")
	if page.status != 200 || !strings.Contains(page.html, `action="batches"`) || !strings.Contains(page.html, `value="`+wallet+`"`) {
		t.Fatalf("the batch form on the pay orders page: %d %s", page.status, page.html)
	}
	if trade := p.get(t, owner, "/console/trade/orders"); strings.Contains(trade.html, `action="batches"`) {
		t.Fatal("the trade app offers a batch payment")
	}
	bad := "address,amount,reference\n" +
		"0x1111111111111111111111111111111111111111,1.5,emp-1\n" +
		"0x2222222222222222222222222222222222222222,-3,emp-2\n" +
		"0x12,2,emp-3\n"
	r := p.post(t, owner, "/console/pay/batches", url.Values{"walletId": {wallet}, "asset": {"USDC"}, "csv": {bad}})
	if r.status != 422 || !strings.Contains(r.html, "line 3: amount must be greater than zero") || !strings.Contains(r.html, "0x12,2,emp-3") {
		t.Fatalf("a CSV with bad lines: %d %s", r.status, r.html)
	}
	r = p.post(t, owner, "/console/pay/batches", url.Values{"walletId": {wallet}, "asset": {"USDC"}, "csv": {strings.Replace(bad, "-3", "3", 1)}})
	if r.status != 422 || !strings.Contains(r.html, "line 4: address is not an address on ethereum") {
		t.Fatalf("a CSV with an address of no chain: %d %s", r.status, r.html)
	}
	if r := p.post(t, owner, "/console/pay/batches", url.Values{"walletId": {wallet}, "asset": {"USDC"}, "csv": {"a,1,r,extra\n"}}); r.status != 422 ||
		!strings.Contains(r.html, "line 1: 4 fields") {
		t.Fatalf("a line of four fields: %d %s", r.status, r.html)
	}
	good := "0x1111111111111111111111111111111111111111,1.5,emp-1\n" +
		"0x2222222222222222222222222222222222222222,3\n" +
		"0x1111111111111111111111111111111111111111,2.25,emp-3\n"
	r = p.post(t, owner, "/console/pay/batches", url.Values{"walletId": {wallet}, "asset": {"USDC"}, "reference": {"payroll"}, "csv": {good}})
	m := regexp.MustCompile(`^/console/pay/orders/(ord_[0-9a-f]+)\?notice=`).FindStringSubmatch(r.location)
	if r.status != 303 || m == nil {
		t.Fatalf("a good CSV: %d %s %s", r.status, r.location, r.html)
	}
	order := p.get(t, owner, "/console/pay/orders/"+m[1])
	if order.status != 200 || strings.Count(order.html, "<td><code>0x1111111111111111111111111111111111111111</code></td>") != 2 ||
		!strings.Contains(order.html, "3 recipients") || !strings.Contains(order.html, "<td>emp-3</td>") ||
		!strings.Contains(order.html, `id="submit-order"`) || !strings.Contains(order.html, "<dd>6.75</dd>") {
		t.Fatalf("the batch's page: %d %s", order.status, order.html)
	}
	r = p.post(t, owner, "/console/pay/orders/"+m[1]+"/submit", nil)
	if !strings.Contains(r.location, "notice=Submitted") {
		t.Fatalf("submit: %d %s", r.status, r.location)
	}
	if again := p.get(t, owner, "/console/pay/orders/"+m[1]); strings.Contains(again.html, `id="submit-order"`) {
		t.Fatal("a submitted order still offers Submit")
	}
}

// TestABatchCSVThatDoesNotParse: a line the CSV reader cannot read is said on its line,
// and a byte order mark before the header is no column.
func TestABatchCSVThatDoesNotParse(t *testing.T) {
	p := newPages(t)
	owner := p.owner(t)
	wallet := p.creds.Wallets[0].ID
	r := p.post(t, owner, "/console/pay/batches", url.Values{"walletId": {wallet}, "asset": {"USDC"},
		"csv": {"0x1111111111111111111111111111111111111111,1\na\"b,1\n"}})
	if r.status != 422 || !strings.Contains(r.html, "line 2: ") {
		t.Fatalf("a bare quote: %d %s", r.status, r.html)
	}
	r = p.post(t, owner, "/console/pay/batches", url.Values{"walletId": {wallet}, "asset": {"USDC"},
		"csv": {"\ufeffaddress,amount\n0x1111111111111111111111111111111111111111,1\n0x2222222222222222222222222222222222222222,2\n"}})
	if r.status != 303 {
		t.Fatalf("a header after a byte order mark: %d %s", r.status, r.html)
	}
}
