package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
	// modernc's pure-Go SQLite registers the database/sql driver "sqlite", which gorm's
	// dialector opens by name. The Temporal server links the same package, so the name is
	// registered exactly once per binary.
	"modernc.org/sqlite"
)

// SQLite result codes that mean "try again": the database is busy or a table is locked.
const (
	sqliteBusy   = 5
	sqliteLocked = 6
)

// Unavailable reports whether err means the database could not be reached or did not
// answer in time, so the request is safe to retry, as opposed to a failed statement.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) {
		return true
	}
	var netErr *net.OpError
	var connectErr *pgconn.ConnectError
	if errors.As(err, &netErr) || errors.As(err, &connectErr) || pgconn.SafeToRetry(err) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08: connection exception; 57P01–57P03: the server is shutting down or starting.
		return pgErr.Code[:2] == "08" || pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03"
	}
	var liteErr *sqlite.Error
	if errors.As(err, &liteErr) {
		code := liteErr.Code() & 0xff
		return code == sqliteBusy || code == sqliteLocked
	}
	return false
}
