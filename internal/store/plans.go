package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/opentreasury/treasury/migrations"
)

// Plans: the statements of the hottest writes and reads, made once per model from gorm's
// own schema of it and run on the connection directly.

// An insertPlan is one model's INSERT statement and the fields it binds, in order, made
// once from gorm's own schema of the model. The rows every order step writes (the order
// and its legs, the step, its status change and event, the audit record, the
// idempotency record, webhook deliveries) go through it rather than through gorm's
// Create, which builds and binds the statement again at each call through its callbacks
// and clauses: that building was most of what a create allocated (docs/benchmarks.md,
// "Allocation per request"). The columns come from the same schema gorm migrates and
// reads with, so a field added to a model is written without anyone remembering to.
type insertPlan struct {
	query statement
	// head and row are the statement's parts in SQLite's form, "INSERT INTO t (…) VALUES "
	// and "(?,…)", for statements of many rows.
	head, row string
	fields    []*schema.Field
	// byGorm: the model has a field the plan cannot write as gorm would (a database
	// default gorm leaves out when the value is zero, a time it fills in other than a
	// time.Time); such rows go through gorm's Create.
	byGorm bool
}

type planKey struct {
	model reflect.Type
	omit  string
	mode  insertMode
}

type insertMode int

const (
	insertOrFail insertMode = iota
	// insertOrSkip leaves an existing row (the same primary key) as it is: ON CONFLICT DO
	// NOTHING, and zero rows affected.
	insertOrSkip
)

var (
	insertPlans sync.Map // planKey → *insertPlan
	schemaCache sync.Map // gorm's cache of parsed models, for the plans only
	timeType    = reflect.TypeFor[time.Time]()
)

// insert writes row (a pointer to a model) in one statement on the store's connection
// or transaction, and returns the rows it wrote (0 when insertOrSkip met an existing
// row). omit names fields (Go names) left out, as gorm's Omit does.
func (s *Store) insert(ctx context.Context, row any, mode insertMode, omit ...string) (int64, error) {
	v := reflect.ValueOf(row)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return 0, fmt.Errorf("store: insert takes a pointer to a model, not %T", row)
	}
	plan, err := s.insertPlanOf(v.Type().Elem(), mode, omit)
	if err != nil {
		return 0, err
	}
	if plan.byGorm {
		q := s.with(ctx)
		if len(omit) > 0 {
			q = q.Omit(omit...)
		}
		if mode == insertOrSkip {
			q = q.Clauses(clause.OnConflict{DoNothing: true})
		}
		res := q.Create(row)
		return res.RowsAffected, res.Error
	}
	v = v.Elem()
	args := make([]any, len(plan.fields))
	var now time.Time
	for i, f := range plan.fields {
		args[i] = s.valueOf(ctx, f, v, &now)
	}
	res, err := s.exec(ctx, plan.query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// insertAll writes rows (models of one type) in statements of up to chunk rows each, on
// the store's connection or transaction; a model insert leaves to gorm is written by
// gorm's CreateInBatches.
func insertAll[T any](ctx context.Context, s *Store, rows []T, chunk int) error {
	if len(rows) == 0 {
		return nil
	}
	plan, err := s.insertPlanOf(reflect.TypeFor[T](), insertOrFail, nil)
	if err != nil {
		return err
	}
	if plan.byGorm {
		return s.with(ctx).CreateInBatches(rows, chunk).Error
	}
	var now time.Time
	for len(rows) > 0 {
		n := min(chunk, len(rows))
		args := make([]any, 0, n*len(plan.fields))
		for r := range rows[:n] {
			v := reflect.ValueOf(&rows[r]).Elem()
			for _, f := range plan.fields {
				args = append(args, s.valueOf(ctx, f, v, &now))
			}
		}
		q := s.statementIn(plan.head + strings.Repeat(plan.row+",", n-1) + plan.row)
		if _, err := s.exec(ctx, q, args...); err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}

// valueOf is the value insert binds for a field of the model v: gorm's, with a zero
// creation or update time filled in as gorm's Create fills it, with the one time of the
// statement (*now, taken at its first use).
func (s *Store) valueOf(ctx context.Context, f *schema.Field, v reflect.Value, now *time.Time) any {
	value, zero := f.ValueOf(ctx, v)
	if zero && (f.AutoCreateTime != 0 || f.AutoUpdateTime != 0) {
		if now.IsZero() {
			*now = s.db.NowFunc()
		}
		if f.Set(ctx, v, *now) == nil {
			return *now
		}
	}
	return value
}

// insertPlanOf makes, or finds made, the plan for a model.
func (s *Store) insertPlanOf(model reflect.Type, mode insertMode, omit []string) (*insertPlan, error) {
	key := planKey{model: model, omit: strings.Join(omit, ","), mode: mode}
	if p, ok := insertPlans.Load(key); ok {
		return p.(*insertPlan), nil
	}
	sch, err := s.schemaOf(model)
	if err != nil {
		return nil, err
	}
	// What gorm's Create does besides writing the columns (hooks, its clauses,
	// associations) is left to gorm.
	p := &insertPlan{byGorm: sch.BeforeCreate || sch.AfterCreate || sch.BeforeSave || sch.AfterSave ||
		len(sch.CreateClauses) > 0 || len(sch.Relationships.Relations) > 0}
	var cols []string
	for _, name := range sch.DBNames {
		f := sch.FieldsByDBName[name]
		if !f.Creatable || slices.Contains(omit, f.Name) {
			continue
		}
		timed := f.AutoCreateTime != 0 || f.AutoUpdateTime != 0
		if f.HasDefaultValue || f.Serializer != nil || (timed && f.FieldType != timeType) {
			p.byGorm = true
		}
		p.fields = append(p.fields, f)
		cols = append(cols, strconv.Quote(f.DBName))
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("store: %s has no columns to write", model)
	}
	p.head = "INSERT INTO " + strconv.Quote(sch.Table) + " (" + strings.Join(cols, ",") + ") VALUES "
	p.row = "(" + strings.Repeat("?,", len(cols)-1) + "?)"
	q := p.head + p.row
	if mode == insertOrSkip {
		q += " ON CONFLICT DO NOTHING"
	}
	p.query = sqlStatement(q)
	actual, _ := insertPlans.LoadOrStore(key, p)
	return actual.(*insertPlan), nil
}

// A takePlan reads one row of a model's table into the model: every column gorm reads,
// set as gorm sets them (NULL as the zero value, SQLite's times parsed), without gorm
// building the query at each call. The lookups every create makes go through it.
type takePlan struct {
	query  statement
	fields []*schema.Field
}

type takeKey struct {
	model reflect.Type
	where string
}

var takePlans sync.Map // takeKey → *takePlan

// take reads into dst (a pointer to a model) the first row of its table that matches
// where (a condition with ? placeholders); ErrNotFound when none does.
func (s *Store) take(ctx context.Context, dst any, where statement, args ...any) error {
	v := reflect.ValueOf(dst).Elem()
	p, err := s.takePlanOf(v.Type(), where)
	if err != nil {
		return err
	}
	values := make([]any, len(p.fields))
	targets := make([]any, len(p.fields))
	for i := range values {
		targets[i] = &values[i]
	}
	if err := s.queryRow(ctx, p.query, args...).Scan(targets...); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		return err
	}
	for i, f := range p.fields {
		if err := f.Set(ctx, v, values[i]); err != nil {
			return fmt.Errorf("store: read %s.%s: %w", p.fields[i].Schema.Table, f.DBName, err)
		}
	}
	return nil
}

// takePlanOf makes, or finds made, the plan that reads a model by a condition.
func (s *Store) takePlanOf(model reflect.Type, where statement) (*takePlan, error) {
	key := takeKey{model: model, where: where.sqlite}
	if p, ok := takePlans.Load(key); ok {
		return p.(*takePlan), nil
	}
	sch, err := s.schemaOf(model)
	if err != nil {
		return nil, err
	}
	p := &takePlan{}
	var cols []string
	for _, name := range sch.DBNames {
		if f := sch.FieldsByDBName[name]; f.Readable {
			p.fields = append(p.fields, f)
			cols = append(cols, strconv.Quote(f.DBName))
		}
	}
	p.query = sqlStatement("SELECT " + strings.Join(cols, ",") + " FROM " + strconv.Quote(sch.Table) + " WHERE " + where.sqlite + " LIMIT 1")
	actual, _ := takePlans.LoadOrStore(key, p)
	return actual.(*takePlan), nil
}

// schemaOf is gorm's schema of a model, as gorm itself parses it.
func (s *Store) schemaOf(model reflect.Type) (*schema.Schema, error) {
	return schema.Parse(reflect.New(model).Interface(), &schemaCache, s.db.NamingStrategy)
}

// A statement is SQL, written by hand or by a plan, in both dialects' placeholders: ?
// on SQLite, $1, $2, … on PostgreSQL (made from the ? form once).
type statement struct{ sqlite, postgres string }

func sqlStatement(q string) statement {
	return statement{sqlite: q, postgres: numbered(q)}
}

// numbered is q with its ? placeholders numbered as PostgreSQL's: $1, $2, …
func numbered(q string) string {
	pg := make([]byte, 0, len(q)+strings.Count(q, "?")*3)
	n := 0
	for i := range len(q) {
		if q[i] != '?' {
			pg = append(pg, q[i])
			continue
		}
		n++
		pg = strconv.AppendInt(append(pg, '$'), int64(n), 10)
	}
	return string(pg)
}

// statementIn is q, written with ? placeholders, as a statement of the store's dialect
// only: for a statement made at each call, which need not carry the other form.
func (s *Store) statementIn(q string) statement {
	if s.dialect == migrations.Postgres {
		return statement{postgres: numbered(q)}
	}
	return statement{sqlite: q}
}

func (s *Store) text(q statement) string {
	if s.dialect == migrations.Postgres {
		return q.postgres
	}
	return q.sqlite
}

// exec runs a statement on the store's connection or transaction: prepared, when it is
// one of the prepared statements.
func (s *Store) exec(ctx context.Context, q statement, args ...any) (sql.Result, error) {
	if st := s.preparedFor(ctx, q); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return s.db.Statement.ConnPool.ExecContext(ctx, s.text(q), args...)
}

// queryRow runs a query of one row as exec runs a statement.
func (s *Store) queryRow(ctx context.Context, q statement, args ...any) *sql.Row {
	if st := s.preparedFor(ctx, q); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return s.db.Statement.ConnPool.QueryRowContext(ctx, s.text(q), args...)
}

// query runs a query as exec runs a statement.
func (s *Store) query(ctx context.Context, q statement, args ...any) (*sql.Rows, error) {
	if st := s.preparedFor(ctx, q); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return s.db.Statement.ConnPool.QueryContext(ctx, s.text(q), args...)
}

// preparedStatements are the plans' statements on SQLite, prepared on the pool once
// the schema is migrated. gorm prepares a statement it first meets inside a transaction
// on that transaction only, and database/sql then prepares it again in every later
// transaction (go-gorm/gorm#4644): a quarter of a create's CPU went to parsing its
// statements again. A statement prepared on the pool is bound to a transaction with
// Tx.StmtContext, which prepares it on the transaction's own connection the first time
// and reuses it after; nothing is prepared on another connection while a transaction
// waits. PostgreSQL needs none of this: pgx caches prepared statements per connection.
type preparedStatements struct {
	byQuery map[string]*sql.Stmt
}

// preparedFor is the statement prepared for q, bound to the store's transaction when it
// is in one; nil when q was not prepared (then it runs as gorm runs statements). Only
// SQLite's are prepared, so they are found by their SQLite form.
func (s *Store) preparedFor(ctx context.Context, q statement) *sql.Stmt {
	ps := s.prepared.Load()
	if ps == nil {
		return nil
	}
	st := ps.byQuery[q.sqlite]
	if st == nil {
		return nil
	}
	switch pool := s.db.Statement.ConnPool.(type) {
	case *gorm.PreparedStmtDB:
		return st
	case *gorm.PreparedStmtTX:
		if tx, ok := pool.Tx.(*sql.Tx); ok {
			return tx.StmtContext(ctx, st)
		}
	}
	return nil
}

// The rows and reads of every order step, and of a create: their statements are
// prepared on SQLite (preparedStatements).
var (
	hotInserts = []struct {
		model any
		mode  insertMode
	}{
		{&Order{}, insertOrFail}, {&OrderLeg{}, insertOrFail}, {&orderStep{}, insertOrSkip},
		{&OrderStatusChange{}, insertOrFail}, {&Event{}, insertOrFail}, {&AuditLog{}, insertOrFail},
		{&IdempotencyRecord{}, insertOrSkip}, {&WebhookDelivery{}, insertOrSkip},
	}
	hotTakes = []struct {
		model any
		where statement
	}{{&Wallet{}, walletOfOrg}, {&IdempotencyRecord{}, idempotencyRecordOf}}
	hotStatements = []statement{auditHeadQuery, moveAuditHead, appWebhookConfigs}
)

// prepareHot prepares the hot statements on SQLite once their tables are there: at Open
// when the schema is already migrated (a process started without migrating), else at
// the end of Migrate.
func (s *Store) prepareHot(ctx context.Context) error {
	if s.dialect != migrations.SQLite || s.prepared.Load() != nil {
		return nil
	}
	if _, ok := s.db.Statement.ConnPool.(*gorm.PreparedStmtDB); !ok {
		return nil // statements run as gorm runs them; nothing binds prepared ones
	}
	var queries []string
	for _, h := range hotInserts {
		p, err := s.insertPlanOf(reflect.TypeOf(h.model).Elem(), h.mode, nil)
		if err != nil {
			return err
		}
		queries = append(queries, p.query.sqlite)
	}
	for _, h := range hotTakes {
		p, err := s.takePlanOf(reflect.TypeOf(h.model).Elem(), h.where)
		if err != nil {
			return err
		}
		queries = append(queries, p.query.sqlite)
	}
	for _, q := range hotStatements {
		queries = append(queries, q.sqlite)
	}
	sqlDB, err := s.db.DB()
	if err != nil {
		return err
	}
	set := &preparedStatements{byQuery: map[string]*sql.Stmt{}}
	closeAll := func() {
		for _, st := range set.byQuery {
			_ = st.Close()
		}
	}
	for _, q := range queries {
		st, err := sqlDB.PrepareContext(ctx, q)
		if err != nil {
			closeAll()
			return fmt.Errorf("store: prepare %q: %w", q, err)
		}
		set.byQuery[q] = st
	}
	if !s.prepared.CompareAndSwap(nil, set) {
		closeAll() // another start prepared them first
	}
	return nil
}
