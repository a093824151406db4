package main

import (
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/client"
)

// row is one payout of a CSV file, with the line it came from.
type row struct {
	line int
	payment
}

// columns of a payouts file, by header name; asset may be left out (--asset applies).
var columns = []string{"reference", "wallet", "asset", "amount", "to"}

// readPayouts reads and checks a whole payouts file before anything is paid: a header
// naming the columns, then one payout per line, each reference once.
func readPayouts(r io.Reader, defaultAsset string) ([]row, error) {
	cr := csv.NewReader(r)
	cr.TrimLeadingSpace = true
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("the header: %w", err)
	}
	index := map[string]int{}
	for i, name := range header {
		name = strings.ToLower(strings.TrimSpace(name))
		if !slices.Contains(columns, name) {
			return nil, fmt.Errorf("the header names %q: the columns are %s", name, strings.Join(columns, ", "))
		}
		index[name] = i
	}
	for _, name := range []string{"reference", "wallet", "amount", "to"} {
		if _, ok := index[name]; !ok {
			return nil, fmt.Errorf("the header lacks the column %s", name)
		}
	}
	field := func(rec []string, name string) string {
		if i, ok := index[name]; ok && i < len(rec) {
			return strings.TrimSpace(rec[i])
		}
		return ""
	}
	var rows []row
	var problems []string
	seen := map[string]int{}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		line, _ := cr.FieldPos(0)
		if err != nil {
			return nil, err
		}
		p := payment{WalletID: field(rec, "wallet"), Asset: field(rec, "asset"), Amount: field(rec, "amount"),
			Destination: client.Destination{Address: field(rec, "to")}, Reference: field(rec, "reference")}
		if p.Asset == "" {
			p.Asset = defaultAsset
		}
		switch d, err := decimal.NewFromString(p.Amount); {
		case p.Reference == "":
			problems = append(problems, fmt.Sprintf("line %d: no reference", line))
		case seen[p.Reference] != 0:
			problems = append(problems, fmt.Sprintf("line %d: reference %s is also on line %d", line, p.Reference, seen[p.Reference]))
		case p.WalletID == "" || p.Destination.Address == "":
			problems = append(problems, fmt.Sprintf("line %d: wallet and to are required", line))
		case err != nil || !d.IsPositive():
			problems = append(problems, fmt.Sprintf("line %d: amount %q is not a positive decimal", line, p.Amount))
		}
		seen[p.Reference] = line
		rows = append(rows, row{line: line, payment: p})
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	if len(rows) == 0 {
		return nil, errors.New("no payouts after the header")
	}
	return rows, nil
}

// rowKey is the idempotency key of a payout, derived from its reference alone: a rerun
// sends the same key, so a payout already made is found, never made again; and a row
// changed under the same reference is refused by the server (idempotency_key_reused)
// rather than paid a second time.
func rowKey(reference string) string {
	sum := sha256.Sum256([]byte("payout-job\x00" + reference))
	return "payout-" + hex.EncodeToString(sum[:16])
}

// reportRow is one line of the reconciliation report.
type reportRow struct {
	row
	orderID string
	result
}

// csvRun is what a run over a payouts file is asked: the file, the asset of rows that name
// none, the requests in flight at once, and whether rows are paid as batch payments.
type csvRun struct {
	path, asset string
	concurrency int
	batched     bool
}

// runCSV pays every payout of a file and reports how each ended.
func runCSV(ctx context.Context, c *client.Client, wallets directory, run csvRun, stdout io.Writer, logf func(string, ...any)) int {
	path, defaultAsset, concurrency := run.path, run.asset, run.concurrency
	f, err := os.Open(path)
	if err != nil {
		logf("payout-job: %v", err)
		return exitUsage
	}
	rows, err := readPayouts(f, defaultAsset)
	_ = f.Close()
	if err != nil {
		logf("payout-job: %s: %v", path, err)
		return exitUsage
	}
	// A row names its wallet by id, address or label; every name is found before anything
	// is paid.
	var unknown []string
	for i := range rows {
		w, err := wallets.find(rows[i].WalletID, "")
		if err != nil {
			unknown = append(unknown, fmt.Sprintf("line %d: %v", rows[i].line, err))
			continue
		}
		rows[i].WalletID = w.ID
	}
	if len(unknown) > 0 {
		logf("payout-job: %s: %s", path, strings.Join(unknown, "; "))
		return exitUsage
	}
	logf("%d payouts in %s", len(rows), path)

	report := make([]reportRow, len(rows))
	for i := range rows {
		report[i] = reportRow{row: rows[i], result: result{code: exitUnknown, detail: "not sent: the job was stopped first"}}
	}
	if run.batched {
		payBatches(ctx, c, report, concurrency, logf)
		return writeReport(stdout, report, logf)
	}
	each(ctx, len(rows), concurrency, func(i int) {
		report[i].result = result{}
		id, err := pay(ctx, c, rows[i].payment, rowKey(rows[i].Reference), logf)
		report[i].orderID = id
		if err != nil {
			report[i].result = failed(ctx, logf, "pay "+rows[i].Reference, err, "")
		}
	})
	reconcileAll(ctx, c, report, concurrency, logf)
	return writeReport(stdout, report, logf)
}

// each runs do(0) … do(n-1), at most limit at a time, and returns when all have.
func each(ctx context.Context, n, limit int, do func(i int)) {
	var wg sync.WaitGroup
	slots := make(chan struct{}, max(1, limit))
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			do(i)
		})
	}
	wg.Wait()
}

// reconcileAll follows the events of every paid order until each has its outcome or ctx
// ends: a round reads each open order's new events, and rounds come every pollInterval.
func reconcileAll(ctx context.Context, c *client.Client, report []reportRow, concurrency int, logf func(string, ...any)) {
	cursors := make([]string, len(report))
	for {
		var open []int
		for i, r := range report {
			if r.orderID != "" && !r.done {
				open = append(open, i)
			}
		}
		if len(open) == 0 {
			return
		}
		each(ctx, len(open), concurrency, func(k int) {
			i := open[k]
			r, err := readEvents(ctx, c, report[i].orderID, &cursors[i], logf)
			if err != nil {
				r = failed(ctx, logf, "read the events of "+report[i].orderID, err, report[i].status)
			}
			if r.done || r.status != "" {
				report[i].result = r
			}
		})
		select {
		case <-ctx.Done():
			for _, i := range open {
				if !report[i].done {
					report[i].code, report[i].detail = exitUnknown, "no outcome yet"
				}
			}
			return
		case <-time.After(pollInterval):
		}
	}
}

// writeReport prints the reconciliation report (CSV, one line per payout, in the file's
// order) and returns the job's exit status: 3 when any outcome is unknown (rerun the
// job), else 1 when any payout failed, else 0.
func writeReport(stdout io.Writer, report []reportRow, logf func(string, ...any)) int {
	w := csv.NewWriter(stdout)
	_ = w.Write([]string{"reference", "order_id", "status", "tx_hash", "detail"})
	counts := map[int]int{}
	for _, r := range report {
		code := r.code
		if !r.done {
			code = exitUnknown
		}
		counts[code]++
		_ = w.Write([]string{r.Reference, r.orderID, r.status, r.txHash, r.detail})
	}
	w.Flush()
	logf("%d confirmed, %d failed or rejected, %d without an outcome yet", counts[exitConfirmed], counts[exitFailed], counts[exitUnknown])
	switch {
	case counts[exitUnknown] > 0:
		return exitUnknown
	case counts[exitFailed] > 0:
		return exitFailed
	}
	return exitConfirmed
}

// maxRecipients is the most recipients one batch payment takes.
const maxRecipients = 500

// batchGroups groups the rows into batch payments: the rows of one wallet and asset, in
// the file's order, at most maxRecipients a group. The grouping depends on the file alone,
// so a rerun makes the same groups (and the same idempotency keys).
func batchGroups(rows []row) [][]int {
	var groups [][]int
	open := map[[2]string]int{}
	for i, r := range rows {
		k := [2]string{r.WalletID, r.Asset}
		g, ok := open[k]
		if !ok || len(groups[g]) == maxRecipients {
			g = len(groups)
			groups, open[k] = append(groups, nil), g
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// batchKey is the idempotency key of a batch payment, derived from its rows' references
// in order, as rowKey is from one.
func batchKey(references []string) string {
	sum := sha256.Sum256([]byte("payout-job batch\x00" + strings.Join(references, "\x00")))
	return "payout-batch-" + hex.EncodeToString(sum[:16])
}

// batchPayment is the body of a batch paying the rows: each row a recipient, with its
// reference. A group of one row is a plain payment: a batch has at least two recipients.
func batchPayment(rows []row) (payment, []string) {
	refs := make([]string, len(rows))
	for i, r := range rows {
		refs[i] = r.Reference
	}
	if len(rows) == 1 {
		return rows[0].payment, refs
	}
	p := payment{WalletID: rows[0].WalletID, Asset: rows[0].Asset,
		Reference: fmt.Sprintf("payout-job batch of %d, %s to %s", len(rows), refs[0], refs[len(refs)-1])}
	if len(p.Reference) > 200 {
		p.Reference = fmt.Sprintf("payout-job batch of %d", len(rows))
	}
	for _, r := range rows {
		p.Recipients = append(p.Recipients, client.Recipient{Address: r.Destination.Address, Amount: r.Amount, Reference: r.Reference})
	}
	return p, refs
}

// payBatches pays the report's rows as batch payments, follows each order to its outcome,
// and then reconciles every row from its own recipient on the order: a row is confirmed
// when the part that pays it confirmed, even if a later part failed the order.
func payBatches(ctx context.Context, c *client.Client, report []reportRow, concurrency int, logf func(string, ...any)) {
	groups := batchGroups(func() []row {
		rows := make([]row, len(report))
		for i := range report {
			rows[i] = report[i].row
		}
		return rows
	}())
	orders := make([]reportRow, len(groups))
	for g := range orders {
		orders[g].result = report[groups[g][0]].result
	}
	each(ctx, len(groups), concurrency, func(g int) {
		rows := make([]row, len(groups[g]))
		for k, i := range groups[g] {
			rows[k] = report[i].row
		}
		body, refs := batchPayment(rows)
		key := batchKey(refs)
		if len(rows) == 1 {
			key = rowKey(refs[0])
		}
		orders[g].result = result{}
		id, err := pay(ctx, c, body, key, logf)
		orders[g].orderID = id
		if err != nil {
			orders[g].result = failed(ctx, logf, fmt.Sprintf("pay the batch of %d from %s", len(rows), refs[0]), err, "")
		}
	})
	reconcileAll(ctx, c, orders, concurrency, logf)
	for g, idx := range groups {
		for _, i := range idx {
			report[i].orderID, report[i].result = orders[g].orderID, orders[g].result
		}
		if len(idx) == 1 || orders[g].orderID == "" || !orders[g].done {
			continue
		}
		o, err := c.GetOrder(ctx, client.DomainPayment, orders[g].orderID)
		if err != nil || len(o.Recipients) != len(idx) {
			logf("payout-job: reading the recipients of %s: %v", orders[g].orderID, err)
			continue
		}
		for k, i := range idx {
			rc := o.Recipients[k]
			report[i].status, report[i].txHash = rc.Status, ""
			if rc.TxHash != nil {
				report[i].txHash = *rc.TxHash
			}
			if rc.Status == "confirmed" {
				report[i].code, report[i].detail = exitConfirmed, ""
			} else if report[i].code == exitConfirmed {
				report[i].code = exitFailed
			}
			if report[i].status == "" || report[i].status == "pending" {
				report[i].status = o.Status
			}
		}
	}
}
