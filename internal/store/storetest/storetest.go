// Package storetest opens throw-away stores for tests: a SQLite file in a temp directory,
// and a PostgreSQL schema of its own per test (TEST_DATABASE_URL, default the local
// server's "test" database), so runs never collide and leave nothing behind.
package storetest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/opentreasury/treasury/internal/store"
)

// DefaultPostgresURL is used when TEST_DATABASE_URL is unset.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// PostgresURL returns the base URL of the test PostgreSQL server.
func PostgresURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultPostgresURL
}

// ForEachDialect runs fn as a subtest on a fresh, migrated SQLite store and on a fresh,
// migrated PostgreSQL store.
func ForEachDialect(t *testing.T, fn func(t *testing.T, s *store.Store)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { fn(t, NewSQLite(t)) })
	t.Run("postgres", func(t *testing.T) { fn(t, NewPostgres(t)) })
}

// ForEachDialectWithSQL is ForEachDialect with a database/sql handle on the store's
// database besides, for tests that change rows behind the store's back (as someone
// tampering with the database would). Statements take $1, $2, … on both databases.
func ForEachDialectWithSQL(t *testing.T, fn func(t *testing.T, s *store.Store, db *sql.DB)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "treasury.db")
		fn(t, openSQLite(t, path), rawDB(t, "sqlite", store.SQLiteDSN(path)))
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := PostgresSchemaURL(t)
		fn(t, openPostgres(t, dsn), rawDB(t, "pgx", dsn))
	})
}

// ForEachDialectInTwoProcesses runs fn with two stores on one database, as two
// processes of the service (replicas) have them, on SQLite and on PostgreSQL.
func ForEachDialectInTwoProcesses(t *testing.T, fn func(t *testing.T, a, b *store.Store)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "treasury.db")
		fn(t, openSQLite(t, path), openSQLite(t, path))
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := PostgresSchemaURL(t)
		fn(t, openPostgres(t, dsn), openPostgres(t, dsn))
	})
}

func rawDB(t testing.TB, driver, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatalf("open %s: %v", driver, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// NewSQLite opens a migrated SQLite store in a temp directory.
func NewSQLite(t testing.TB) *store.Store {
	t.Helper()
	return openSQLite(t, filepath.Join(t.TempDir(), "treasury.db"))
}

func openSQLite(t testing.TB, path string) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), store.Config{SQLitePath: path})
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(context.Background(), nil); err != nil {
		t.Fatalf("migrate sqlite: %v", err)
	}
	return s
}

// NewPostgres opens a migrated store in a new schema of the test PostgreSQL database and
// drops the schema when the test ends.
func NewPostgres(t testing.TB) *store.Store {
	t.Helper()
	return openPostgres(t, PostgresSchemaURL(t))
}

func openPostgres(t testing.TB, dsn string) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), store.Config{DatabaseURL: dsn})
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(context.Background(), nil); err != nil {
		t.Fatalf("migrate postgres: %v", err)
	}
	return s
}

// createDatabase makes the test database when the server answers but lacks it (SQLSTATE
// 3D000), through the server's "postgres" database, and connects to it.
func createDatabase(ctx context.Context, base string, pingErr error) (*sql.DB, error) {
	var pgErr *pgconn.PgError
	if !errors.As(pingErr, &pgErr) || pgErr.Code != "3D000" {
		return nil, pingErr
	}
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	name := strings.TrimPrefix(u.Path, "/")
	u.Path = "/postgres"
	maint, err := sql.Open("pgx", u.String())
	if err != nil {
		return nil, err
	}
	defer maint.Close()
	if _, err := maint.ExecContext(ctx, `CREATE DATABASE "`+name+`"`); err != nil {
		var dup *pgconn.PgError
		if !errors.As(err, &dup) || dup.Code != "42P04" { // created meanwhile by another test
			return nil, err
		}
	}
	db, err := sql.Open("pgx", base)
	if err != nil {
		return nil, err
	}
	return db, db.PingContext(ctx)
}

// PostgresSchemaURL creates an empty schema for the test and returns a URL whose
// connections use it. The schema is dropped at cleanup.
func PostgresSchemaURL(t testing.TB) string {
	t.Helper()
	base := PostgresURL()
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := admin.PingContext(ctx); err != nil {
		_ = admin.Close()
		if admin, err = createDatabase(ctx, base, err); err != nil {
			t.Fatalf("PostgreSQL at %s is not reachable (start it, or point TEST_DATABASE_URL at one): %v", base, err)
		}
	}
	schema := "t_" + uuid.NewString()[:8] + fmt.Sprint(time.Now().UnixNano()%100000)
	if _, err := admin.ExecContext(ctx, `CREATE SCHEMA "`+schema+`"`); err != nil {
		_ = admin.Close()
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = admin.ExecContext(ctx, `DROP SCHEMA "`+schema+`" CASCADE`)
		_ = admin.Close()
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("TEST_DATABASE_URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// AwaitLockWaiter returns once a session of the test PostgreSQL server waits on a lock
// while running a statement that contains fragment: a test that must let a transaction go
// only after another one queued behind it asserts that state instead of sleeping.
func AwaitLockWaiter(t testing.TB, fragment string) {
	t.Helper()
	db, err := sql.Open("pgx", PostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	deadline := time.Now().Add(time.Minute)
	for {
		var waiting int
		err := db.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND position($1 in query) > 0`, fragment).Scan(&waiting)
		switch {
		case err != nil:
			t.Fatal(err)
		case waiting > 0:
			return
		case time.Now().After(deadline):
			t.Fatalf("no session waits on a lock running %q", fragment)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
