package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func openPool(t *testing.T, conns, max int) *statementPool {
	t.Helper()
	db, err := sql.Open("sqlite", SQLiteDSN(filepath.Join(t.TempDir(), "pool.db")))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(conns)
	t.Cleanup(func() { _ = db.Close() })
	p := newStatementPool(db, max)
	if _, err := p.ExecContext(context.Background(), "CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER)"); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *statementPool) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.recent.Len()
}

func TestStatementPoolPreparesOutsideTransactionsAtOnce(t *testing.T) {
	p := openPool(t, 2, 8)
	ctx := context.Background()
	const ins = "INSERT INTO t (k, v) VALUES (?, ?)"
	for i := range 3 {
		if _, err := p.ExecContext(ctx, ins, fmt.Sprint(i), i); err != nil {
			t.Fatal(err)
		}
	}
	if p.cached(ins) == nil {
		t.Fatal("a statement run outside a transaction is not kept prepared")
	}
	var n int
	if err := p.QueryRowContext(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 3 {
		t.Fatalf("count = %d, %v; want 3", n, err)
	}
}

// A statement first met inside a transaction runs there unprepared, is prepared in the
// background, and later transactions run the prepared one; their results are the same.
func TestStatementPoolPreparesTransactionsStatementsForLaterOnes(t *testing.T) {
	p := openPool(t, 2, 8)
	ctx := context.Background()
	const upsert = "INSERT INTO t (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = v + excluded.v"
	add := func() {
		conn, err := p.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		tx := conn.(*statementTx)
		if _, err := tx.ExecContext(ctx, upsert, "a", 1); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	add()
	deadline := time.Now().Add(10 * time.Second)
	for p.cached(upsert) == nil {
		if time.Now().After(deadline) {
			t.Fatal("the transaction's statement was never prepared on the pool")
		}
		time.Sleep(5 * time.Millisecond)
	}
	add()
	add()
	var v int
	if err := p.QueryRowContext(ctx, "SELECT v FROM t WHERE k = ?", "a").Scan(&v); err != nil || v != 3 {
		t.Fatalf("v = %d, %v; want 3 (one unprepared and two prepared runs)", v, err)
	}
}

// Write transactions on every connection of a small pool, each meeting statements the
// pool has not prepared: none waits for a connection to prepare on (which, with SQLite's
// one writer, would wait until the busy timeout).
func TestStatementPoolTransactionsNeverWaitForAnotherConnection(t *testing.T) {
	p := openPool(t, 2, 4) // fewer slots than texts: statements are evicted while in use too
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5 {
				conn, err := p.BeginTx(ctx, nil)
				if err != nil {
					errs <- err
					return
				}
				tx := conn.(*statementTx)
				// A text of its own per iteration: a miss each time.
				q := fmt.Sprintf("INSERT INTO t (k, v) VALUES (?, %d)", i)
				if _, err := tx.ExecContext(ctx, q, fmt.Sprintf("%d-%d", w, i)); err != nil {
					_ = tx.Rollback()
					errs <- err
					return
				}
				if err := tx.Commit(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var n int
	if err := p.QueryRowContext(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 40 {
		t.Fatalf("rows = %d, %v; want 40", n, err)
	}
	if s := p.size(); s > 4 {
		t.Fatalf("the pool keeps %d statements, more than its 4", s)
	}
}

func TestStatementPoolLeavesSavepointsUnprepared(t *testing.T) {
	for q, want := range map[string]bool{
		"SELECT 1": true, " select 1": true, "INSERT INTO t VALUES (1)": true, "update t set v = 1": true,
		"DELETE FROM t": true, "WITH x AS (SELECT 1) SELECT * FROM x": true,
		"SAVEPOINT sp0xc000": false, "RELEASE SAVEPOINT sp1": false, "PRAGMA foreign_keys": false, "": false,
	} {
		if got := preparable(q); got != want {
			t.Errorf("preparable(%q) = %v, want %v", q, got, want)
		}
	}
}
