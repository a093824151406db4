package devstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/server/common/config"
	tlog "go.temporal.io/server/common/log"
	"go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql"
	"go.temporal.io/server/tools/common/schema"
	sqltool "go.temporal.io/server/tools/sql"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Temporal's own schemas for PostgreSQL, embedded in its module, applied with its own
// schema tool (the code behind temporal-sql-tool's update-schema).
const (
	postgresSchema           = "postgresql/v12/temporal"
	postgresVisibilitySchema = "postgresql/v12/visibility"
)

// postgresStores turns a PostgreSQL URL into the server's two SQL stores: persistence in
// the URL's database and visibility in the same name with _visibility appended.
func postgresStores(rawURL string) (persistence, visibility *config.SQL, err error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, fmt.Errorf("temporal PostgreSQL URL: %w", err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	if u.Scheme != "postgres" && u.Scheme != "postgresql" || name == "" {
		return nil, nil, errors.New("temporal PostgreSQL URL must be postgres://user[:password]@host[:port]/database")
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "5432"
	}
	password, _ := u.User.Password()
	attrs := map[string]string{}
	if mode := u.Query().Get("sslmode"); mode != "" {
		attrs["sslmode"] = mode
	}
	store := func(db string) *config.SQL {
		return &config.SQL{
			PluginName:        postgresql.PluginNamePGX,
			DatabaseName:      db,
			ConnectAddr:       net.JoinHostPort(host, port),
			ConnectProtocol:   "tcp",
			User:              u.User.Username(),
			Password:          password,
			ConnectAttributes: attrs,
			MaxConns:          20,
			MaxIdleConns:      20,
			MaxConnLifetime:   time.Hour,
		}
	}
	return store(name), store(name + "_visibility"), nil
}

// preparePostgres creates both databases when missing and brings their schemas to the
// version this server needs. Safe to run on every start, and by several at once only if
// they agree on the version (as replicas of one build do).
func preparePostgres(persistence, visibility *config.SQL, logger tlog.Logger) error {
	for _, s := range []struct {
		cfg    *config.SQL
		schema string
	}{{persistence, postgresSchema}, {visibility, postgresVisibilitySchema}} {
		admin := *s.cfg
		if err := sqltool.DoCreateDatabase(&admin, "postgres", logger); err != nil {
			return fmt.Errorf("temporal: create database %s: %w", s.cfg.DatabaseName, err)
		}
		conn, err := sqltool.NewConnection(s.cfg, logger)
		if err != nil {
			return fmt.Errorf("temporal: connect to %s: %w", s.cfg.DatabaseName, err)
		}
		err = upgradeSchema(conn, s.schema, logger)
		conn.Close()
		if err != nil {
			return fmt.Errorf("temporal: schema of %s: %w", s.cfg.DatabaseName, err)
		}
	}
	return nil
}

// upgradeSchema is temporal-sql-tool's setup-schema -v 0.0 (on a new database only: on an
// existing one it would reset the recorded version) followed by update-schema.
func upgradeSchema(conn *sqltool.Connection, name string, logger tlog.Logger) error {
	if err := conn.CreateSchemaVersionTables(); err != nil {
		return err
	}
	if _, err := conn.ReadSchemaVersion(); err != nil {
		if err := conn.UpdateSchemaVersion("0.0", "0.0"); err != nil {
			return err
		}
	}
	return schema.NewUpdateSchemaTask(conn, &schema.UpdateConfig{SchemaName: name}, logger).Run()
}

// registerNamespace registers the namespace through the frontend unless it exists. The
// SQLite path writes it straight into the database before the server starts; on
// PostgreSQL the server is meant to be shared, so it goes through the API like any
// administrator's would. Search attributes are then `treasury temporal setup`'s job.
func registerNamespace(ctx context.Context, frontend, namespace string, retention time.Duration) error {
	c, err := client.NewNamespaceClient(client.Options{HostPort: frontend, Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return err
	}
	defer c.Close()
	deadline := time.Now().Add(time.Minute)
	for {
		callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = c.Register(callCtx, &workflowservice.RegisterNamespaceRequest{
			Namespace:                        namespace,
			WorkflowExecutionRetentionPeriod: durationpb.New(retention),
			HistoryArchivalState:             enumspb.ARCHIVAL_STATE_DISABLED,
			VisibilityArchivalState:          enumspb.ARCHIVAL_STATE_DISABLED,
		})
		cancel()
		var exists *serviceerror.NamespaceAlreadyExists
		if err == nil || errors.As(err, &exists) {
			return nil
		}
		// Right after start the frontend can answer Unavailable until membership settles.
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("temporal: register namespace %s: %w", namespace, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
