// Package migrations holds the versioned SQL schema of the treasury store, one
// directory per dialect, embedded so that both binaries can apply it with goose.
package migrations

import (
	"embed"
	"io/fs"
)

//go:embed postgres/*.sql sqlite/*.sql
var files embed.FS

// Dialect names the SQL flavour of a migration set.
type Dialect string

const (
	Postgres Dialect = "postgres"
	SQLite   Dialect = "sqlite"
)

// FS returns the migrations of one dialect, rooted so that goose sees the files directly.
func FS(d Dialect) (fs.FS, error) {
	return fs.Sub(files, string(d))
}
