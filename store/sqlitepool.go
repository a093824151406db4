package store

import (
	"container/list"
	"context"
	"database/sql"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"
)

// statementPool is the SQLite connection pool as gorm sees it, with its statements
// prepared once per connection: the SQLite driver parses a statement's text again on every
// use unless it is prepared, a third of a read's cost.
//
// gorm's own prepared-statement cache is not used: a statement it first meets inside a
// transaction is prepared on that transaction, which closes it at commit, and database/sql
// then prepares it again on every later use (go-gorm/gorm#4644, golang/go#28130). Every
// step of an order is a transaction, so most statements paid the parser every time.
// Here statements are prepared on the pool, where database/sql keeps each on every
// connection it has run on. A transaction never waits for a second connection to
// prepare one (the one holding SQLite's write lock would wait for connections held by
// transactions waiting for that lock): it runs a statement not yet prepared directly,
// once, and the pool prepares it in the background for later uses.
type statementPool struct {
	db  *sql.DB
	max int

	mu        sync.Mutex
	byQuery   map[string]*list.Element // of *pooledStatement
	recent    *list.List               // most recently used first
	preparing map[string]bool
}

type pooledStatement struct {
	query string
	stmt  *sql.Stmt
}

// newStatementPool keeps at most max prepared statements (IN lists of varying length make
// distinct texts), closing the least recently used.
func newStatementPool(db *sql.DB, max int) *statementPool {
	return &statementPool{db: db, max: max, byQuery: map[string]*list.Element{}, recent: list.New(), preparing: map[string]bool{}}
}

// preparable: statements worth keeping. Savepoints carry a name of their own each time.
func preparable(query string) bool {
	q := strings.TrimLeft(query, " \t\n(")
	if len(q) < 6 {
		return false
	}
	switch strings.ToUpper(q[:6]) {
	case "SELECT", "INSERT", "UPDATE", "DELETE":
		return true
	}
	return strings.EqualFold(q[:5], "WITH ")
}

// cached is the prepared statement of query, or nil.
func (p *statementPool) cached(query string) *sql.Stmt {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.byQuery[query]
	if !ok {
		return nil
	}
	p.recent.MoveToFront(e)
	return e.Value.(*pooledStatement).stmt
}

// keep adds a prepared statement, closing the least recently used beyond max. A closed
// statement still in use by a transaction is prepared again there by database/sql.
func (p *statementPool) keep(query string, stmt *sql.Stmt) *sql.Stmt {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.byQuery[query]; ok { // prepared meanwhile by another caller
		_ = stmt.Close()
		p.recent.MoveToFront(e)
		return e.Value.(*pooledStatement).stmt
	}
	p.byQuery[query] = p.recent.PushFront(&pooledStatement{query: query, stmt: stmt})
	for p.recent.Len() > p.max {
		last := p.recent.Back()
		old := p.recent.Remove(last).(*pooledStatement)
		delete(p.byQuery, old.query)
		_ = old.stmt.Close()
	}
	return stmt
}

// statement is query's prepared statement, prepared now if need be; nil when the query is
// not worth keeping or does not prepare (running it reports why).
func (p *statementPool) statement(ctx context.Context, query string) *sql.Stmt {
	if !preparable(query) {
		return nil
	}
	if stmt := p.cached(query); stmt != nil {
		return stmt
	}
	stmt, err := p.db.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	return p.keep(query, stmt)
}

// prepareLater prepares query in the background, for a transaction that cannot wait.
func (p *statementPool) prepareLater(query string) {
	if !preparable(query) {
		return
	}
	p.mu.Lock()
	if p.preparing[query] {
		p.mu.Unlock()
		return
	}
	p.preparing[query] = true
	p.mu.Unlock()
	go func() {
		defer func() {
			p.mu.Lock()
			delete(p.preparing, query)
			p.mu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if stmt, err := p.db.PrepareContext(ctx, query); err == nil {
			p.keep(query, stmt)
		}
	}()
}

func (p *statementPool) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return p.db.PrepareContext(ctx, query)
}

func (p *statementPool) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if stmt := p.statement(ctx, query); stmt != nil {
		return stmt.ExecContext(ctx, args...)
	}
	return p.db.ExecContext(ctx, query, args...)
}

func (p *statementPool) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if stmt := p.statement(ctx, query); stmt != nil {
		return stmt.QueryContext(ctx, args...)
	}
	return p.db.QueryContext(ctx, query, args...)
}

func (p *statementPool) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if stmt := p.statement(ctx, query); stmt != nil {
		return stmt.QueryRowContext(ctx, args...)
	}
	return p.db.QueryRowContext(ctx, query, args...)
}

// BeginTx starts a transaction that uses the pool's prepared statements.
func (p *statementPool) BeginTx(ctx context.Context, opts *sql.TxOptions) (gorm.ConnPool, error) {
	tx, err := p.db.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &statementTx{Tx: tx, pool: p}, nil
}

// GetDBConn is the pool itself, for gorm's DB().
func (p *statementPool) GetDBConn() (*sql.DB, error) { return p.db, nil }

// statementTx is a transaction of the statementPool.
type statementTx struct {
	*sql.Tx
	pool *statementPool
}

// statement is query's prepared statement bound to the transaction, or nil when the pool
// has not prepared it yet (it then will, in the background).
func (t *statementTx) statement(ctx context.Context, query string) *sql.Stmt {
	if stmt := t.pool.cached(query); stmt != nil {
		return t.Tx.StmtContext(ctx, stmt)
	}
	t.pool.prepareLater(query)
	return nil
}

func (t *statementTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if stmt := t.statement(ctx, query); stmt != nil {
		return stmt.ExecContext(ctx, args...)
	}
	return t.Tx.ExecContext(ctx, query, args...)
}

func (t *statementTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if stmt := t.statement(ctx, query); stmt != nil {
		return stmt.QueryContext(ctx, args...)
	}
	return t.Tx.QueryContext(ctx, query, args...)
}

func (t *statementTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if stmt := t.statement(ctx, query); stmt != nil {
		return stmt.QueryRowContext(ctx, args...)
	}
	return t.Tx.QueryRowContext(ctx, query, args...)
}
