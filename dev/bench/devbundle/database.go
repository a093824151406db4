package devbundle

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the pgx database/sql driver

	"github.com/opentreasury/treasury/internal/store"
)

// CreateDatabase makes an empty database on the PostgreSQL server for one run and returns its URL
// and what drops it. A database rather than a schema: the live channel's bus uses
// LISTEN/NOTIFY, whose channels are per database, so a schema would share them with
// anything else running on the server (the test suites do).
func CreateDatabase(ctx context.Context, server, prefix string) (string, func(), error) {
	u, err := url.Parse(server)
	if err != nil {
		return "", nil, err
	}
	admin, err := sql.Open("pgx", server)
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	name := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano())
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE "`+name+`"`); err != nil {
		_ = admin.Close()
		return "", nil, errors.Join(fmt.Errorf("create database on %s", u.Redacted()), err)
	}
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// FORCE: a connection the bundle left behind must not keep the database alive.
		if _, err := admin.ExecContext(ctx, `DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE)`); err != nil {
			fmt.Fprintf(os.Stderr, "drop database %s: %v\n", name, err)
		}
		_ = admin.Close()
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}

// OpenStore opens a fresh, migrated store for one run of a bench: "sqlite" in a temporary
// directory, or "postgres" in a database made on server (CreateDatabase). It returns the
// store's name for the bench's lines, and what closes and removes it.
func OpenStore(ctx context.Context, kind, server, prefix string) (s *store.Store, name string, closeStore func(), err error) {
	cfg, drop := store.Config{}, func() {}
	switch kind {
	case "sqlite":
		dir, err := os.MkdirTemp("", prefix+"-")
		if err != nil {
			return nil, "", nil, err
		}
		cfg.SQLitePath, name, drop = filepath.Join(dir, "treasury.db"), "SQLite", func() { _ = os.RemoveAll(dir) }
	case "postgres":
		if cfg.DatabaseURL, drop, err = CreateDatabase(ctx, server, prefix); err != nil {
			return nil, "", nil, err
		}
		name = "PostgreSQL"
	default:
		return nil, "", nil, fmt.Errorf("unknown store %q", kind)
	}
	if s, err = store.Open(ctx, cfg); err == nil {
		if err = s.Migrate(ctx, nil); err != nil {
			_ = s.Close()
		}
	}
	if err != nil {
		drop()
		return nil, "", nil, err
	}
	return s, name, func() { _ = s.Close(); drop() }, nil
}
