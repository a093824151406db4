package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/opentreasury/treasury/client"
)

func TestReadPayouts(t *testing.T) {
	rows, err := readPayouts(strings.NewReader("reference,wallet,amount,to\n"+
		"inv-1, wal_a, 10.50, 0x11\n"+
		"inv-2,wal_a,3,0x22\n"), "USDC")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Reference != "inv-1" || rows[0].Amount != "10.50" || rows[0].Asset != "USDC" ||
		rows[1].line != 3 || rows[1].Destination.Address != "0x22" {
		t.Fatalf("rows %+v", rows)
	}
	for name, file := range map[string]string{
		"an unknown column":    "reference,wallet,amount,to,memo\nr,w,1,0x1,x\n",
		"a missing column":     "reference,wallet,amount\nr,w,1\n",
		"a repeated reference": "reference,wallet,amount,to\nr,w,1,0x1\nr,w,2,0x1\n",
		"a bad amount":         "reference,wallet,amount,to\nr,w,-1,0x1\n",
		"no rows":              "reference,wallet,amount,to\n",
		"no reference":         "reference,wallet,amount,to\n,w,1,0x1\n",
	} {
		if _, err := readPayouts(strings.NewReader(file), "USDC"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestRowKeyDependsOnTheReferenceOnly(t *testing.T) {
	if rowKey("inv-1") != rowKey("inv-1") || rowKey("inv-1") == rowKey("inv-2") || !strings.HasPrefix(rowKey("inv-1"), "payout-") {
		t.Fatal("row keys are not one per reference")
	}
}

func TestReportExitStatus(t *testing.T) {
	confirmed := reportRow{row: row{payment: payment{Reference: "a"}}, orderID: "ord_1", result: result{done: true, status: "confirmed", txHash: "0xab"}}
	failedRow := reportRow{row: row{payment: payment{Reference: "b"}}, orderID: "ord_2", result: result{code: exitFailed, done: true, status: "failed"}}
	open := reportRow{row: row{payment: payment{Reference: "c"}}, orderID: "ord_3", result: result{status: "pending_approval"}}
	for _, tc := range []struct {
		rows []reportRow
		want int
	}{
		{[]reportRow{confirmed}, exitConfirmed},
		{[]reportRow{confirmed, failedRow}, exitFailed},
		{[]reportRow{confirmed, failedRow, open}, exitUnknown},
	} {
		var out bytes.Buffer
		if got := writeReport(&out, tc.rows, func(string, ...any) {}); got != tc.want {
			t.Errorf("exit %d, want %d", got, tc.want)
		}
		if lines := strings.Count(out.String(), "\n"); lines != len(tc.rows)+1 {
			t.Errorf("%d report lines for %d rows", lines, len(tc.rows))
		}
	}
}

// TestBatchGroupsAreOneWalletAndAssetInFileOrder: rows of one wallet and asset form a
// batch, in the file's order, at most maxRecipients each; a rerun of the same file makes
// the same batches under the same keys.
func TestBatchGroupsAreOneWalletAndAssetInFileOrder(t *testing.T) {
	var rows []row
	for i := range maxRecipients + 3 {
		rows = append(rows, row{payment: payment{WalletID: "wal_a", Asset: "USDC", Amount: "1", Reference: fmt.Sprint("r", i),
			Destination: client.Destination{Address: fmt.Sprintf("0x%040x", i)}}})
	}
	rows = append(rows[:2], append([]row{{payment: payment{WalletID: "wal_b", Asset: "USDC", Amount: "2", Reference: "b0",
		Destination: client.Destination{Address: "0xb0"}}}}, rows[2:]...)...)
	groups := batchGroups(rows)
	if len(groups) != 3 || len(groups[0]) != maxRecipients || len(groups[1]) != 1 || len(groups[2]) != 3 ||
		groups[0][2] != 3 || groups[1][0] != 2 {
		t.Fatalf("groups of %d, %d, %d", len(groups[0]), len(groups[1]), len(groups[2]))
	}
	pick := func(idx []int) []row {
		out := make([]row, len(idx))
		for k, i := range idx {
			out[k] = rows[i]
		}
		return out
	}
	body, refs := batchPayment(pick(groups[0]))
	if len(body.Recipients) != maxRecipients || body.Amount != "" || body.Destination.Address != "" ||
		body.Recipients[2].Reference != "r2" || body.Recipients[2].Address != rows[3].Destination.Address {
		t.Fatalf("batch body %+v", body.Recipients[:3])
	}
	again, _ := batchPayment(pick(batchGroups(rows)[0]))
	if batchKey(refs) != batchKey(refs) || len(again.Recipients) != maxRecipients || batchKey(refs) == batchKey(refs[1:]) {
		t.Fatal("batch keys are not one per group of references")
	}
	if single, _ := batchPayment(pick(groups[1])); single.Destination.Address != "0xb0" || single.Recipients != nil {
		t.Fatalf("a group of one is a plain payment: %+v", single)
	}
}
