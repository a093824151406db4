package main

import (
	"context"
	"database/sql"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/opentreasury/treasury/dev/bench/devbundle"
)

// The targets: from the smallest size to the largest, no read's p99 grows more than
// readGrowth times, and creating and submitting stay within writeGrowth of their figures
// at the smallest.
const (
	readGrowth  = 2.0
	writeGrowth = 1.25
)

// report prints one table: each shape's p50 / p99 at every size, its growth from the
// smallest size to the largest and the verdict; the export in entries a second.
func report(name string, results []sizeResult) {
	if len(results) == 0 {
		return
	}
	first, last := results[0], results[len(results)-1]
	fmt.Printf("\n%s, p50 / p99 in ms (the export: entries a second):\n\n| | ", name)
	for _, r := range results {
		fmt.Printf("%s orders | ", thousands(r.orders))
	}
	fmt.Printf("growth, %s → %s | target |\n|---|%s---:|---|\n", thousands(first.orders), thousands(last.orders), strings.Repeat("---:|", len(results)))
	for i, f := range first.figures {
		fmt.Printf("| %s | ", shape(f.name))
		for _, r := range results {
			g := r.figures[i]
			if g.perSecond > 0 {
				fmt.Printf("%.0f | ", g.perSecond)
			} else {
				fmt.Printf("%.1f / %.1f | ", ms(g.p50), ms(g.p99))
			}
		}
		l := last.figures[i]
		var growth, limit float64
		var target string
		switch {
		case f.perSecond > 0:
			growth, limit, target = f.perSecond/l.perSecond, readGrowth, "rate falls ≤ 2×"
		case strings.HasPrefix(f.name, "payment:"):
			growth, limit, target = ratio(l.p50, f.p50), writeGrowth, "p50 ≤ 1.25×"
		default:
			growth, limit, target = ratio(l.p99, f.p99), readGrowth, "p99 ≤ 2×"
		}
		verdict := devbundle.Verdict(growth <= limit)
		fmt.Printf("%.2f× | %s: %s |\n", growth, target, verdict)
		devbundle.Summarize(fmt.Sprintf("%s, %s → %s orders, %s", shape(f.name), thousands(first.orders), thousands(last.orders), name),
			fmt.Sprintf("%.2f×", growth), "", "", target, verdict)
	}
	fmt.Printf("| grown to this size in (s) | ")
	for _, r := range results {
		fmt.Printf("%.0f | ", r.grew.Seconds())
	}
	fmt.Printf(" | |\n| measured in (s) | ")
	for _, r := range results {
		fmt.Printf("%.0f | ", r.measure.Seconds())
	}
	fmt.Printf(" | |\n")
}

// shape drops a figure name's detail that changes with the size.
func shape(name string) string {
	if i := strings.Index(name, " ("); i > 0 && strings.HasPrefix(name, "audit export") {
		return name[:i]
	}
	return name
}

func ratio(a, b time.Duration) float64 {
	if b.Seconds() == 0 {
		return 0
	}
	return a.Seconds() / b.Seconds()
}

func thousands(n int64) string {
	switch {
	case n >= 1000000 && n%1000000 == 0:
		return fmt.Sprintf("%d M", n/1000000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%d k", n/1000)
	}
	return fmt.Sprint(n)
}

// explain prints PostgreSQL's plans, with their timings, of the statements behind the
// list reads, written as the store writes them.
func explain(ctx context.Context, db *sql.DB, orgID, ordersDeep, eventsDeep string) error {
	after, err := base64.RawURLEncoding.DecodeString(ordersDeep)
	if err != nil {
		return err
	}
	// The events' cursor is the last event's id, as SPEC 3.7's after is; the store reads
	// its place first and pages from there, as written here.
	event := eventsDeep
	var place string
	if err := db.QueryRowContext(ctx, `SELECT to_char(tx_started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') || '+00' FROM events WHERE id = $1`, event).Scan(&place); err != nil {
		return err
	}
	statements := []struct{ what, q string }{
		{"orders: first page", `SELECT * FROM orders WHERE org_id = $1 AND app = 'pay' ORDER BY id DESC LIMIT 51`},
		{"orders: 10,000 deep", `SELECT * FROM orders WHERE org_id = $1 AND app = 'pay' AND id < '` + string(after) + `' ORDER BY id DESC LIMIT 51`},
		{"orders: by status", `SELECT * FROM orders WHERE org_id = $1 AND app = 'pay' AND status = 'failed' ORDER BY id DESC LIMIT 51`},
		{"approvals: pending", `SELECT * FROM approval_items WHERE org_id = $1 AND app IN ('pay') AND status = 'pending' ORDER BY id DESC LIMIT 51`},
		{"events: 10,000 deep", `SELECT * FROM events WHERE org_id = $1 AND app IN ('pay') AND order_id IS NOT NULL AND tx_started_at < now()
			AND (tx_started_at, id) > ('` + place + `'::timestamptz, '` + event + `')
			ORDER BY tx_started_at, id LIMIT 101`},
		{"events: of one order", `SELECT * FROM events WHERE org_id = $1 AND app IN ('pay') AND order_id IS NOT NULL AND order_id = (SELECT id FROM orders WHERE org_id = $1 AND app = 'pay' AND status = 'confirmed' ORDER BY id LIMIT 1) ORDER BY sequence LIMIT 101`},
		{"request logs: first page", `SELECT * FROM request_logs WHERE org_id = $1 AND app = 'pay' ORDER BY id DESC LIMIT 51`},
	}
	for _, st := range statements {
		rows, err := db.QueryContext(ctx, "EXPLAIN (ANALYZE, COSTS OFF, SUMMARY ON) "+st.q, orgID)
		if err != nil {
			return fmt.Errorf("explain %s: %w", st.what, err)
		}
		fmt.Printf("\n  plan, %s:\n", st.what)
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				_ = rows.Close()
				return err
			}
			fmt.Println("    " + line)
		}
		if err := rows.Close(); err != nil {
			return err
		}
	}
	return nil
}
