package main

import (
	"bytes"
	"strings"
	"testing"
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
