// Command retention is a soak of the hourly maintenance on a compressed clock: steady
// traffic written an hour at a time (orders with their events and webhook deliveries, the
// deliveries' attempts, request logs, Idempotency-Key records, OAuth tokens:
// storetest.Traffic), the maintenance activities run after each hour as the schedule runs
// them, with short retentions so that a day passes in seconds. It prints each table's row
// count hour by hour (it levels off once the table's retention has passed), and for the
// hours after that, what the deletes removed and cost: rows, batches, milliseconds per
// 1,000 rows, the longest batch (the longest any writer of the table waited on them),
// beside what writing the same rows cost in the same run.
//
//	go run ./dev/bench/retention
//	go run ./dev/bench/retention -store postgres -orders 800 -batch 500
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"strings"
	"time"

	"github.com/opentreasury/treasury/activities"
	"github.com/opentreasury/treasury/dev/bench/devbundle"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

type options struct {
	orders, requestLogs, tokens, batch int
	databaseURL                        string
}

// The compressed retentions: hours of the clock stand for the days of production, and
// the longest is a third of the run, so that its last third is steady.
var (
	retention = activities.Retention{Events: 3 * time.Hour, Webhooks: 2 * time.Hour, RequestLogs: 2 * time.Hour,
		OAuthTokens: time.Hour}
	idempotencyRetention, tokenTTL = 2 * time.Hour, 15 * time.Minute
)

const hours = 9

func main() {
	which := flag.String("store", "both", "sqlite, postgres or both")
	var o options
	flag.IntVar(&o.orders, "orders", 400, "orders an hour, each with three events, three webhook deliveries and an Idempotency-Key record")
	flag.IntVar(&o.requestLogs, "request-logs", 3000, "request logs an hour")
	flag.IntVar(&o.tokens, "tokens", 300, "OAuth tokens an hour")
	flag.IntVar(&o.batch, "batch", 1000, "rows per delete statement (MAINTENANCE_BATCH)")
	flag.StringVar(&o.databaseURL, "database-url", storetest.PostgresURL(), "PostgreSQL server the run makes a database of its own on (and drops after)")
	flag.Parse()
	stores := []string{*which}
	if *which == "both" {
		stores = []string{"sqlite", "postgres"}
	}
	for _, kind := range stores {
		if err := run(kind, o); err != nil {
			fmt.Fprintln(os.Stderr, kind+":", err)
			os.Exit(1)
		}
	}
}

func run(kind string, o options) error {
	ctx := context.Background()
	s, name, closeStore, err := devbundle.OpenStore(ctx, kind, o.databaseURL, "treasury_bench_retention")
	if err != nil {
		return err
	}
	defer closeStore()
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	clock := start
	steadyFrom := int(2 * retention.Events.Hours())
	costs := map[string]store.Deleted{}
	r := retention
	r.Batch = o.batch
	m := &activities.Maintenance{Store: s, Retention: r, Now: func() time.Time { return clock }}
	steady := false
	m.Observe = func(kind store.Expiring, d store.Deleted) {
		if steady {
			costs[kind.Table] = add(costs[kind.Table], d)
		}
	}
	traffic := &storetest.Traffic{Store: s, OrdersPerHour: o.orders, RequestLogsPerHour: o.requestLogs, TokensPerHour: o.tokens,
		IdempotencyRetention: idempotencyRetention, TokenTTL: tokenTTL}
	if err := traffic.Setup(ctx, start); err != nil {
		return err
	}
	fmt.Printf("\n%s: %d orders, %d request logs and %d OAuth tokens an hour for %d hours; retention %v of events, %v of webhook deliveries, %v of request logs, %v of Idempotency-Key records, %v of tokens past their %v; batches of %d\n\n",
		name, o.orders, o.requestLogs, o.tokens, hours, r.Events, r.Webhooks, r.RequestLogs, idempotencyRetention, r.OAuthTokens, tokenTTL, r.Batch)
	fmt.Printf("| hour | %s |\n| ---: |%s\n", strings.Join(store.BoundedTables, " | "), strings.Repeat(" ---: |", len(store.BoundedTables)))
	var written map[string]storetest.Writes
	var writing, maintaining time.Duration
	counts := make([]map[string]int64, hours+1)
	for h := range hours {
		if h == steadyFrom {
			steady, written = true, maps.Clone(traffic.Written)
		}
		began := time.Now()
		if err := traffic.Hour(ctx, start.Add(time.Duration(h)*time.Hour)); err != nil {
			return err
		}
		wrote := time.Since(began)
		clock = start.Add(time.Duration(h+1) * time.Hour)
		began = time.Now()
		if err := maintain(ctx, m); err != nil {
			return err
		}
		if steady {
			writing, maintaining = writing+wrote, maintaining+time.Since(began)
		}
		if counts[h+1], err = s.RowCounts(ctx); err != nil {
			return err
		}
		row := make([]string, len(store.BoundedTables))
		for i, t := range store.BoundedTables {
			row[i] = fmt.Sprint(counts[h+1][t])
		}
		fmt.Printf("| %d | %s |\n", h+1, strings.Join(row, " | "))
	}
	level := leveledOff(counts, traffic.Written, steadyFrom)
	report(name, costs, since(traffic.Written, written), hours-steadyFrom, writing, maintaining, level)
	return nil
}

// maintain runs the activities of one Maintenance run, in the workflow's order.
func maintain(ctx context.Context, m *activities.Maintenance) error {
	for _, run := range []func(context.Context) (int64, error){m.DeleteExpiredIdempotencyKeys, m.DeleteExpiredEvents,
		m.DeleteExpiredOAuthTokens, m.DeleteExpiredRequestLogs, m.DeleteExpiredSessions, m.DeleteExpiredWebhookDeliveries} {
		if _, err := run(ctx); err != nil {
			return err
		}
	}
	return nil
}

// leveledOff lists the tables whose row count, over the steady hours, moved by no more
// than one hour's inflow.
func leveledOff(counts []map[string]int64, written map[string]storetest.Writes, from int) []string {
	var level []string
	for _, t := range store.BoundedTables {
		if t == store.ExpiringSessions.Table {
			continue // the traffic signs nobody in
		}
		lo, hi := counts[from][t], counts[from][t]
		for _, c := range counts[from:] {
			lo, hi = min(lo, c[t]), max(hi, c[t])
		}
		if hi-lo <= written[t].Rows/hours {
			level = append(level, t)
		}
	}
	return level
}

// report prints what the steady hours' deletes removed and cost, beside writing the same
// rows, and adds the headline figures to the run's summary.
func report(name string, costs map[string]store.Deleted, written map[string]storetest.Writes, steadyHours int,
	writing, maintaining time.Duration, level []string) {
	fmt.Printf("\nThe last %d hours, each table's retention passed (%s):\n\n", steadyHours, name)
	fmt.Println("| table | rows deleted | batches | delete, ms per 1,000 rows | longest batch | writing them, ms per 1,000 rows | delete ÷ write |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
	tables := []string{store.ExpiringEvents.Table, store.ExpiringWebhookDeliveries.Table, store.ExpiringRequestLogs.Table,
		store.ExpiringIdempotencyRecords.Table, store.ExpiringOAuthTokens.Table}
	var longest time.Duration
	for _, t := range tables {
		d, w := costs[t], written[t]
		// A delivery's row is written by its event's transaction; what it costs on its
		// own is leasing it and recording its attempts.
		if t == store.ExpiringWebhookDeliveries.Table {
			w.Took = written["webhook_attempts"].Took
		}
		del, wr := perThousand(d.Took, d.Rows), perThousand(w.Took, w.Rows)
		longest = max(longest, d.Longest)
		fmt.Printf("| %s | %d | %d | %.1f | %.1f ms | %.1f | %.2f |\n", t, d.Rows, d.Batches, del, ms(d.Longest), wr, del/wr)
	}
	fmt.Printf("\nmaintenance %.0f ms an hour beside %.0f ms writing the hour's traffic: %.3f; tables levelled off: %d of %d (%s)\n",
		ms(maintaining)/float64(steadyHours), ms(writing)/float64(steadyHours), maintaining.Seconds()/writing.Seconds(),
		len(level), len(store.BoundedTables)-1, strings.Join(level, ", "))
	devbundle.Summarize("maintenance ÷ the hour of traffic it cleans up after, "+name,
		fmt.Sprintf("%.0f ms an hour", ms(maintaining)/float64(steadyHours)),
		fmt.Sprintf("writes %.0f ms an hour", ms(writing)/float64(steadyHours)),
		fmt.Sprintf("%.3f", maintaining.Seconds()/writing.Seconds()), "report", "")
	devbundle.Summarize("longest delete batch (how long a writer waits on maintenance), "+name,
		fmt.Sprintf("%.1f ms", ms(longest)), "", "", "report", "")
	devbundle.Summarize("bounded tables that level off under steady traffic, "+name,
		fmt.Sprintf("%d of %d", len(level), len(store.BoundedTables)-1), "", "", "all",
		devbundle.Verdict(len(level) == len(store.BoundedTables)-1))
}

func add(a, b store.Deleted) store.Deleted {
	return store.Deleted{Rows: a.Rows + b.Rows, Batches: a.Batches + b.Batches, Took: a.Took + b.Took, Longest: max(a.Longest, b.Longest)}
}

// since is what was written after the snapshot before.
func since(now, before map[string]storetest.Writes) map[string]storetest.Writes {
	out := map[string]storetest.Writes{}
	for k, w := range now {
		out[k] = storetest.Writes{Rows: w.Rows - before[k].Rows, Took: w.Took - before[k].Took}
	}
	return out
}

func perThousand(d time.Duration, rows int64) float64 {
	if rows == 0 {
		return 0
	}
	return ms(d) * 1000 / float64(rows)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
