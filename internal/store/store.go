// Package store is the only package that talks SQL: gorm models, repositories and the
// schema migrations, on PostgreSQL (production) or SQLite (the dev bundle and tests).
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/logger"

	"github.com/opentreasury/treasury/migrations"
)

// ErrNotFound is returned when a row does not exist (or is not visible to the caller).
var ErrNotFound = errors.New("store: not found")

// Store wraps a gorm handle; inside Tx it wraps the transaction.
type Store struct {
	db          *gorm.DB
	dialect     migrations.Dialect
	databaseURL string
	// committed is told the ids of events a transaction appended, once it has committed;
	// counted their names.
	committed *func(eventIDs []string)
	counted   *func(names []string)
	// appended and appendedNames collect, inside a transaction, the ids and the names of
	// the events it wrote, in step.
	appended, appendedNames *[]string
	// audited collects, inside a transaction on PostgreSQL, the organisations of the
	// audit records it wrote, which the process's chainers place in their chains once it
	// has committed (see AppendAudit).
	audited  *[]string
	chainers *auditChainers
	// writers, on SQLite, lets one transaction at a time begin (nil with Config.NoWriterGate).
	writers *writerGate
	// prepared holds, on SQLite once migrated, the plans' statements (plans.go).
	prepared *atomic.Pointer[preparedStatements]
}

// Config selects the database: PostgreSQL when DatabaseURL is set, SQLite at SQLitePath otherwise.
type Config struct {
	DatabaseURL string
	SQLitePath  string
	// MaxOpenConns bounds the pool; 0 keeps a sensible default per dialect.
	MaxOpenConns int
	// NoWriterGate leaves SQLite's write transactions to queue in SQLite's own busy
	// handler, as they did before the gate (see writerGate).
	NoWriterGate bool
}

// Open connects to the configured database. It does not migrate; call Migrate.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	gcfg := &gorm.Config{
		Logger:                 logger.Default.LogMode(logger.Silent),
		SkipDefaultTransaction: true,
		NowFunc:                func() time.Time { return time.Now().UTC() },
	}
	var (
		db      *gorm.DB
		err     error
		dialect migrations.Dialect
	)
	switch {
	case cfg.DatabaseURL != "":
		dialect = migrations.Postgres
		db, err = gorm.Open(postgres.New(postgres.Config{DSN: cfg.DatabaseURL}), gcfg)
	case cfg.SQLitePath != "":
		dialect = migrations.SQLite
		// The SQLite driver parses every statement's text again unless it is prepared: a
		// third of a read's cost. Prepared statements are kept per connection, a bounded
		// number (IN lists of varying length make distinct texts). pgx caches PostgreSQL's
		// itself.
		gcfg.PrepareStmt, gcfg.PrepareStmtMaxSize = true, 512
		var sqlDB *sql.DB
		sqlDB, err = sql.Open("sqlite", SQLiteDSN(cfg.SQLitePath))
		if err == nil {
			db, err = gorm.Open(sqlite.New(sqlite.Config{Conn: sqlDB, DriverName: "sqlite"}), gcfg)
		}
	default:
		return nil, errors.New("store: neither a database URL nor a SQLite path is configured")
	}
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", dialect, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	maxOpen := cfg.MaxOpenConns
	if maxOpen == 0 {
		maxOpen = 20
	}
	sqlDB.SetMaxOpenConns(maxOpen)
	sqlDB.SetMaxIdleConns(maxOpen)
	sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	s := &Store{db: db, dialect: dialect, databaseURL: cfg.DatabaseURL, committed: new(func([]string)),
		counted: new(func([]string)), chainers: &auditChainers{orgs: map[string]*auditRounds{}},
		prepared: new(atomic.Pointer[preparedStatements])}
	if dialect == migrations.SQLite && !cfg.NoWriterGate {
		s.writers = newWriterGate(sqliteBusyTimeout)
	}
	// A schema not migrated yet fails to prepare: Migrate prepares them then.
	_ = s.prepareHot(ctx)
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.Ping(pingCtx); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("store: connect %s: %w", dialect, err)
	}
	return s, nil
}

// SQLiteDSN builds the modernc DSN for a database file: WAL journal, a busy timeout so
// concurrent writers queue instead of failing, foreign keys on, and write transactions
// that take the lock up front (BEGIN IMMEDIATE) so they never deadlock on upgrade.
func SQLiteDSN(path string) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", sqliteBusyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate")
	// One textual time format, which for UTC times also sorts in time order.
	q.Set("_time_format", "sqlite")
	return "file:" + path + "?" + q.Encode()
}

// DatabaseURL is the PostgreSQL URL the store was opened with; "" on SQLite. The event
// bus listens there on a connection of its own.
func (s *Store) DatabaseURL() string { return s.databaseURL }

// Dialect reports which database the store is on.
func (s *Store) Dialect() migrations.Dialect { return s.dialect }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	sqlDB, err := s.db.DB()
	if err != nil {
		return err
	}
	return sqlDB.PingContext(ctx)
}

// Close releases the connection pool.
func (s *Store) Close() error {
	sqlDB, err := s.db.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// Migrate applies every pending migration. On PostgreSQL it holds an advisory lock so
// that several replicas starting at once apply each migration exactly once. Then it
// chains any audit record that has no place in its organisation's chain yet.
func (s *Store) Migrate(ctx context.Context, log *slog.Logger) error {
	fsys, err := migrations.FS(s.dialect)
	if err != nil {
		return err
	}
	sqlDB, err := s.db.DB()
	if err != nil {
		return err
	}
	opts := []goose.ProviderOption{goose.WithDisableGlobalRegistry(true)}
	gooseDialect := goose.DialectSQLite3
	if s.dialect == migrations.Postgres {
		gooseDialect = goose.DialectPostgres
		locker, err := lock.NewPostgresSessionLocker()
		if err != nil {
			return err
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	provider, err := goose.NewProvider(gooseDialect, sqlDB, fsys, opts...)
	if err != nil {
		return fmt.Errorf("store: migrations: %w", err)
	}
	results, err := provider.Up(ctx)
	if err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	if log != nil {
		for _, r := range results {
			log.Info("migration applied", "version", r.Source.Version, "file", r.Source.Path, "took", r.Duration.String())
		}
	}
	// Chaining needs the hash code, which SQL cannot run: it is a step of its own after the
	// migrations, a no-op once every record is chained.
	chained, err := s.chainAuditBacklog(ctx)
	if err != nil {
		return fmt.Errorf("store: chain the audit records written before the chain: %w", err)
	}
	if log != nil && chained > 0 {
		log.Info("audit records chained", "records", chained)
	}
	return s.prepareHot(ctx)
}

// Tx runs fn in one database transaction; fn receives a Store bound to it.
// Events the transaction appends are announced once it commits (see OnEventsCommitted),
// and on PostgreSQL the audit records it appends are then placed in their chains (see
// AppendAudit).
func (s *Store) Tx(ctx context.Context, fn func(tx *Store) error) error {
	nested := s.appended != nil
	appended, names, audited := s.appended, s.appendedNames, s.audited
	if !nested {
		appended, names, audited = new([]string), new([]string), new([]string)
	}
	before := len(*appended)
	if !nested && s.writers != nil {
		release, err := s.writers.enter(ctx)
		if err != nil {
			return err
		}
		defer release()
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return fn(&Store{db: tx, dialect: s.dialect, databaseURL: s.databaseURL, committed: s.committed, counted: s.counted, prepared: s.prepared,
			appended: appended, appendedNames: names, audited: audited})
	})
	if err != nil {
		// A nested transaction rolled back to its savepoint: its events never happened.
		*appended, *names = (*appended)[:before], (*names)[:before]
	}
	if err == nil && !nested && len(*appended) > 0 {
		if s.committed != nil && *s.committed != nil {
			(*s.committed)(*appended)
		}
		if s.counted != nil && *s.counted != nil {
			(*s.counted)(*names)
		}
	}
	if err == nil && !nested && len(*audited) > 0 {
		s.chainCommitted(ctx, *audited)
	}
	return err
}

// OnEventsCommitted sets the function told the ids of the events of each committed
// transaction, on either database: the bus of this process. (On PostgreSQL every
// transaction also notifies other processes itself, see eventAppended.) Set it before the
// store is used.
func (s *Store) OnEventsCommitted(fn func(eventIDs []string)) { *s.committed = fn }

// OnEventNamesCommitted sets the function told the names of the events of each committed
// transaction of this process, for counting them. Set it before the store is used.
func (s *Store) OnEventNamesCommitted(fn func(names []string)) { *s.counted = fn }

func (s *Store) with(ctx context.Context) *gorm.DB { return s.db.WithContext(ctx) }

// forUpdate starts a query whose rows stay locked until the transaction ends. SQLite has
// no row locks and needs none: its write transactions hold the database lock from BEGIN.
func (s *Store) forUpdate(ctx context.Context) *gorm.DB {
	q := s.with(ctx)
	if s.dialect == migrations.Postgres {
		q = q.Clauses(clause.Locking{Strength: "UPDATE"})
	}
	return q
}

// Directions of an id-ordered page.
const (
	oldestFirst = false
	newestFirst = true
)

// page finishes a list query ordered by id: the rows after the cursor id afterID (below it
// when newestFirst), at most limit of them.
func page[T any](q *gorm.DB, afterID string, newest bool, limit int) ([]T, error) {
	order, after := "id", "id > ?"
	if newest {
		order, after = "id DESC", "id < ?"
	}
	if afterID != "" {
		q = q.Where(after, afterID)
	}
	var out []T
	err := q.Order(order).Limit(limit).Find(&out).Error
	return out, err
}

func notFound(err error) error {
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return ErrNotFound
	}
	return err
}

// RedactDatabaseURL hides the password of a database URL so it can be logged.
func RedactDatabaseURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		if strings.Contains(raw, "password=") {
			return "(redacted)"
		}
		return raw
	}
	return u.Redacted()
}
