package main

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/migrations"
)

// The history is made in the database itself, by statements that copy the template
// orders' rows (INSERT … SELECT over a series of numbers): no row crosses the wire, so a
// million orders take minutes, not hours. Copy i of the history is the order placed i
// minutes before the templates ran (-spacing: 1,440 orders a day, a million orders about
// two years), every time in its rows moved back by as much; every id in it is the template's with a
// number in front (prefix_00<8 hex digits><the template's last 22>), so:
//   - the copies of one order refer to each other as the template's rows do;
//   - they sort before every id the service mints (UUIDv7: 01…), older ones first, as a
//     real history's do, whichever size added them;
//   - the copies of different templates interleave, as a real history's domains do.
//
// JSON bodies (an event's data, an order's details) are the template's: the bytes and the
// indexes are what the reads measured here pay for. The hourly maintenance runs when the
// bundle starts and an hour later, so nothing copied is deleted for its age during a run:
// the tables hold what EVENT_RETENTION, WEBHOOK_RETENTION and REQUEST_LOG_RETENTION set
// to forever would keep.

// historyTop numbers copy 0 of the history: copy i is numbered historyTop-i, so that an
// older copy sorts first. The crowd waiting for approvers is numbered above it.
const historyTop = pendingBase - 1

// idColumns are the columns that hold ids of the copied rows themselves (or their
// workflow's, which names the order); every other column is copied as it is.
var idColumns = map[string]bool{"id": true, "order_id": true, "item_id": true, "approval_item_id": true,
	"signing_request_id": true, "event_id": true, "message_id": true, "delivery_id": true, "submission_id": true,
	"workflow_id": true}

// orderTables are the tables that hold an order's rows, each with how its rows are found
// from the template orders' ids (a parent first: foreign keys).
var orderTables = []struct{ table, where string }{
	{"orders", "id IN (%s)"},
	{"order_legs", "order_id IN (%s)"},
	{"order_status_history", "order_id IN (%s)"},
	{"order_steps", "order_id IN (%s)"},
	{"order_starts", "order_id IN (%s)"},
	{"approval_items", "order_id IN (%s)"},
	{"approval_decisions", "item_id IN (SELECT id FROM approval_items WHERE order_id IN (%s))"},
	{"signing_requests", "order_id IN (%s)"},
	{"events", "order_id IN (%s)"},
	{"webhook_deliveries", "order_id IN (%s)"},
	{"webhook_attempts", "delivery_id IN (SELECT id FROM webhook_deliveries WHERE order_id IN (%s))"},
}

// copier writes copies of rows on one database, in its dialect.
type copier struct {
	mu      sync.Mutex // over what concurrent chunks add up
	db      *sql.DB
	dialect migrations.Dialect
	columns map[string][]string
	spacing time.Duration
}

func newCopier(ctx context.Context, db *sql.DB, dialect migrations.Dialect, spacing time.Duration) (*copier, error) {
	c := &copier{db: db, dialect: dialect, columns: map[string][]string{}, spacing: spacing}
	tables := []string{"wallets", "balances", "request_logs"}
	for _, t := range orderTables {
		tables = append(tables, t.table)
	}
	for _, t := range tables {
		q := `SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`
		if dialect == migrations.SQLite {
			q = `SELECT name FROM pragma_table_info(?) ORDER BY cid`
		}
		rows, err := db.QueryContext(ctx, q, t)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				_ = rows.Close()
				return nil, err
			}
			c.columns[t] = append(c.columns[t], name)
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
		if len(c.columns[t]) == 0 {
			return nil, fmt.Errorf("table %s has no columns", t)
		}
	}
	return c, nil
}

// series is the numbers from..to-1 as a row source s(i).
func (c *copier) series(from, to int64) string {
	if c.dialect == migrations.Postgres {
		return fmt.Sprintf("generate_series(%d, %d) AS s(i)", from, to-1)
	}
	return fmt.Sprintf("(WITH RECURSIVE n(i) AS (SELECT %d UNION ALL SELECT i + 1 FROM n WHERE i < %d) SELECT i FROM n) AS s", from, to-1)
}

// numbering is how a copy's rows are made from the template's: the number in its ids and
// how far back its times move, as SQL expressions of s.i (the series' number).
type numbering struct{ number, back string }

// asIs numbers copies by s.i and keeps their times.
var asIs = numbering{number: "s.i"}

// history numbers copy s.i from historyTop down and moves it back by s.i times spacing,
// the time between two orders of the history (a minute; none puts the whole history at
// the templates' time, in today's volume).
func history(spacing time.Duration) numbering {
	n := numbering{number: fmt.Sprintf("(%d - s.i)", historyTop)}
	if spacing >= time.Second {
		n.back = fmt.Sprintf("s.i * %d", int(spacing.Seconds()))
	}
	return n
}

// rewritten is the expression of column col's id in the copy; a value too short to be an
// id (the empty string where there is none) is kept.
func (c *copier) rewritten(col string, n numbering) string {
	if c.dialect == migrations.Postgres {
		return fmt.Sprintf("CASE WHEN length(t.%[1]s) >= 34 THEN split_part(t.%[1]s, '_', 1) || '_00' || lpad(to_hex(%[2]s), 8, '0') || right(t.%[1]s, 22) ELSE t.%[1]s END", col, n.number)
	}
	return fmt.Sprintf("CASE WHEN length(t.%[1]s) >= 34 THEN substr(t.%[1]s, 1, instr(t.%[1]s, '_')) || '00' || printf('%%08x', %[2]s) || substr(t.%[1]s, -22) ELSE t.%[1]s END", col, n.number)
}

// moved is the expression of time column col in the copy.
func (c *copier) moved(col string, n numbering) string {
	if n.back == "" {
		return "t." + col
	}
	if c.dialect == migrations.Postgres {
		return fmt.Sprintf("t.%s - (%s) * interval '1 second'", col, n.back)
	}
	// SQLite keeps times as text (store.SQLiteDSN's format); strftime reads and writes it.
	return fmt.Sprintf("strftime('%%Y-%%m-%%d %%H:%%M:%%f+00:00', t.%s, '-' || (%s) || ' seconds')", col, n.back)
}

// isTime tells the time columns by their names, the schema's convention.
func isTime(col string) bool {
	return col == "at" || strings.HasSuffix(col, "_at") || col == "lease_until"
}

// selectList is the copy's columns: ids renumbered, times moved, the rest (or what extra
// says) as is.
func (c *copier) selectList(table string, n numbering, extra map[string]string) (cols, exprs string) {
	var e []string
	for _, col := range c.columns[table] {
		switch {
		case extra[col] != "":
			e = append(e, extra[col])
		case idColumns[col]:
			e = append(e, c.rewritten(col, n))
		case isTime(col):
			e = append(e, c.moved(col, n))
		default:
			e = append(e, "t."+col)
		}
	}
	return strings.Join(c.columns[table], ", "), strings.Join(e, ", ")
}

// copyRows inserts, for every i in from..to-1 that filter keeps, a copy of table's rows
// matched by where.
func (c *copier) copyRows(ctx context.Context, tx *sql.Tx, table, where string, from, to int64, filter string, n numbering, extra map[string]string) (int64, error) {
	cols, exprs := c.selectList(table, n, extra)
	q := fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s, %s WHERE %s", table, cols, exprs, table+" t", c.series(from, to), qualify(where))
	if filter != "" {
		q += " AND (" + filter + ")"
	}
	res, err := tx.ExecContext(ctx, q)
	if err != nil {
		return 0, fmt.Errorf("copy %s: %w", table, err)
	}
	return res.RowsAffected()
}

// qualify points a where clause's leading column at the template row t.
func qualify(where string) string { return "t." + where }

// chunk is how many copies one transaction writes: a SQLite writer holds the database's
// one lock while it runs, and the bundle's own writers wait behind it.
const chunk = 20000

// inChunks runs write over from..to-1, per numbers at a time, each in a transaction. On
// PostgreSQL two sessions take the chunks in turn: one session's INSERT … SELECT keeps one
// of the server's cores busy and left the other idle while 1 M orders were copied. SQLite
// has one writer: there the chunks go one after the other. write runs concurrently on
// PostgreSQL, so what it adds up is guarded by c.mu.
func (c *copier) inChunks(ctx context.Context, from, to, per int64, write func(tx *sql.Tx, lo, hi int64) error) error {
	sessions := 1
	if c.concurrent() {
		sessions = 2
	}
	next := make(chan int64)
	errs := make(chan error, sessions)
	for range sessions {
		go func() {
			var err error
			for lo := range next {
				if err == nil {
					err = c.inTx(ctx, func(tx *sql.Tx) error { return write(tx, lo, min(lo+per, to)) })
				}
			}
			errs <- err
		}()
	}
	for lo := from; lo < to; lo += per {
		next <- lo
	}
	close(next)
	var first error
	for range sessions {
		first = cmp.Or(first, <-errs)
	}
	return first
}

// copyOrders writes copies from..to-1 of the history: copy i is of the template whose
// share of tenths holds i mod 10.
func (c *copier) copyOrders(ctx context.Context, ts []*template, from, to int64) (map[string]int64, error) {
	rows := map[string]int64{}
	slot := 0
	var slots [][]int // per template, the residues of i mod 10 that are its copies
	for _, t := range ts {
		var mine []int
		for range t.weight {
			mine = append(mine, slot)
			slot++
		}
		slots = append(slots, mine)
	}
	if slot != 10 {
		return nil, fmt.Errorf("the templates' weights add up to %d tenths, not 10", slot)
	}
	err := c.inChunks(ctx, from, to, chunk, func(tx *sql.Tx, lo, hi int64) error {
		for _, ot := range orderTables {
			for k, t := range ts {
				if len(slots[k]) == 0 {
					continue
				}
				residues := make([]string, len(slots[k]))
				for j, r := range slots[k] {
					residues[j] = fmt.Sprint(r)
				}
				n, err := c.copyRows(ctx, tx, ot.table, fmt.Sprintf(ot.where, quote(t.id)), lo, hi,
					fmt.Sprintf("s.i %% 10 IN (%s)", strings.Join(residues, ", ")), history(c.spacing), nil)
				if err != nil {
					return err
				}
				c.mu.Lock()
				rows[ot.table] += n
				c.mu.Unlock()
			}
		}
		return nil
	})
	return rows, err
}

// pendingBase numbers the copies of the order waiting for approvers after every copy of
// the history: they are the newest of the copies, as a crowd waiting now would be, and
// keep the template's times.
const pendingBase = 0x7f000000

// copyPending writes n copies of the waiting order (and of its approval item).
func (c *copier) copyPending(ctx context.Context, t *template, n int64) (map[string]int64, error) {
	rows := map[string]int64{}
	err := c.inChunks(ctx, pendingBase, pendingBase+n, chunk, func(tx *sql.Tx, lo, hi int64) error {
		for _, ot := range orderTables {
			k, err := c.copyRows(ctx, tx, ot.table, fmt.Sprintf(ot.where, quote(t.id)), lo, hi, "", asIs, nil)
			if err != nil {
				return err
			}
			c.mu.Lock()
			rows[ot.table] += k
			c.mu.Unlock()
		}
		return nil
	})
	return rows, err
}

// copyRequestLogs writes n request logs, copies of those the templates' run left.
func (c *copier) copyRequestLogs(ctx context.Context, orgID string, ids []string, from, n int64) (int64, error) {
	if len(ids) == 0 {
		return 0, fmt.Errorf("the templates' run left no request logs")
	}
	var written int64
	copies := (n + int64(len(ids)) - 1) / int64(len(ids))
	// A copy of the set stands for the requests of len(ids)/logsPerOrder orders, and is
	// moved back by their time.
	spread := history(c.spacing * time.Duration(len(ids)) / logsPerOrder)
	err := c.inChunks(ctx, from, from+copies, max(1, chunk/int64(len(ids))), func(tx *sql.Tx, lo, hi int64) error {
		k, err := c.copyRows(ctx, tx, "request_logs", fmt.Sprintf("id IN (%s)", quote(ids...)), lo, hi, "", spread, nil)
		c.mu.Lock()
		written += k
		c.mu.Unlock()
		return err
	})
	return written, err
}

// copyWallets makes n wallets, copies of one (address rewritten too: an address is
// unique on its chain), each with the original's balances.
func (c *copier) copyWallets(ctx context.Context, walletID string, n int64) error {
	address := "'0x' || lpad(to_hex(s.i), 10, '0') || substr(t.address, 13)"
	if c.dialect == migrations.SQLite {
		address = "'0x' || printf('%010x', s.i) || substr(t.address, 13)"
	}
	return c.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := c.copyRows(ctx, tx, "wallets", fmt.Sprintf("id = %s", quote(walletID)), 1, n+1, "", asIs, map[string]string{"address": address,
			"label": "'payroll ' || s.i", "auto_sign": "false"}); err != nil {
			return err
		}
		_, err := c.copyRows(ctx, tx, "balances", fmt.Sprintf("wallet_id = %s", quote(walletID)), 1, n+1, "", asIs,
			map[string]string{"wallet_id": c.rewritten("wallet_id", asIs)})
		return err
	})
}

// concurrent says whether the database takes writers side by side: PostgreSQL does, SQLite
// has one writer at a time.
func (c *copier) concurrent() bool { return c.dialect == migrations.Postgres }

func (c *copier) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// settle leaves the database as steady use would: the planner's statistics read and, on
// PostgreSQL, the new rows vacuumed (the visibility map set, so that index-only scans need
// not visit the heap), which autovacuum would otherwise do in the middle of the next
// measurement. On SQLite the copies are moved from the write-ahead log into the database:
// written faster than the checkpoints at each commit could move them, with the bundle
// reading beside them, they left a log of 2 GB at 100 k in which every read looked its
// pages up first.
func (c *copier) settle(ctx context.Context) error {
	if c.dialect == migrations.Postgres {
		// And the pages the copies dirtied written out now, not by the checkpointer spread
		// over the next minutes, in the middle of the measurement.
		_, err := c.db.ExecContext(ctx, "VACUUM (ANALYZE)")
		if err == nil {
			_, err = c.db.ExecContext(ctx, "CHECKPOINT")
		}
		return err
	}
	if _, err := c.db.ExecContext(ctx, "ANALYZE"); err != nil {
		return err
	}
	var busy, logged, moved int
	if err := c.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logged, &moved); err != nil {
		return err
	}
	if busy != 0 {
		return fmt.Errorf("checkpoint: %d of %d pages of the log moved, the rest held by readers", moved, logged)
	}
	return nil
}

func quote(values ...string) string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
	}
	return strings.Join(out, ", ")
}

// requestLogIDs are the request logs of the organisation written since the template run
// began (the seed's are before it).
func requestLogIDs(ctx context.Context, db *sql.DB, dialect migrations.Dialect, orgID string, since time.Time) ([]string, error) {
	q := `SELECT id FROM request_logs WHERE org_id = $1 AND at >= $2 ORDER BY id`
	if dialect == migrations.SQLite {
		q = strings.NewReplacer("$1", "?", "$2", "?").Replace(q)
	}
	rows, err := db.QueryContext(ctx, q, orgID, since.UTC())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// auditCopies are n audit entries shaped as those the templates' run recorded (their
// actions, actors and details), the k-th copy of the set from copy number from on, for
// store.ImportAudit. Their ids and resource ids carry the copy's number as the orders'
// copies do, but the numbering is the set's own: a resource id need not name an order that
// exists, and the times are the run's. What the export measured here reads is the chain.
func auditCopies(model []store.AuditLog, from, n int64) []store.AuditLog {
	out := make([]store.AuditLog, 0, n)
	for i := from; int64(len(out)) < n; i++ {
		for _, m := range model {
			if int64(len(out)) == n {
				break
			}
			a := m
			a.ID = copyID(m.ID, i)
			if strings.Count(a.ResourceID, "_") == 1 && len(a.ResourceID) >= 34 {
				a.ResourceID = copyID(a.ResourceID, i)
			}
			a.Seq, a.PrevHash, a.Hash = 0, "", ""
			out = append(out, a)
		}
	}
	return out
}

// copyID is copier.rewritten in Go.
func copyID(id string, i int64) string {
	prefix, _, _ := strings.Cut(id, "_")
	return fmt.Sprintf("%s_00%08x%s", prefix, i, id[len(id)-22:])
}
