package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/opentreasury/treasury/dev/cluster"
	"github.com/opentreasury/treasury/dev/devstack"
	"github.com/opentreasury/treasury/internal/assemble"
)

// runTemporalServe runs a Temporal server on PostgreSQL (persistence and visibility) with
// its Web UI: the cluster's Temporal, built from Temporal's Go modules. Every service runs
// in this one process; its databases and schemas are made or upgraded on start.
func runTemporalServe(args []string) int {
	fs := flag.NewFlagSet("treasury-dev temporal serve", flag.ContinueOnError)
	pg := fs.String("postgres", "", "PostgreSQL URL of the persistence database; visibility goes in <database>_visibility (required)")
	port := fs.Int("port", 7233, "frontend gRPC port")
	uiPort := fs.Int("ui-port", 8233, "Web UI port (-1: no UI)")
	namespace := fs.String("namespace", "default", "namespace registered on start")
	shards := fs.Int("history-shards", 4, "history shards (fixed when the database is created)")
	logLevel := fs.String("log-level", "warn", "the server's own log level")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	log := assemble.NewLogger(slog.LevelInfo).With("process", "temporal")
	if *pg == "" {
		log.Error("--postgres is required")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	t, err := devstack.StartTemporal(ctx, devstack.TemporalConfig{PostgresURL: *pg, Port: *port, UIPort: *uiPort,
		Namespace: *namespace, HistoryShards: int32(*shards), LogLevel: *logLevel, Log: log})
	if err != nil {
		log.Error("temporal could not start", "error", err.Error())
		return 1
	}
	log.Info("ready", "frontend", t.FrontendAddr, "ui", t.UIURL, "namespace", *namespace)
	<-ctx.Done()
	log.Info("stopping")
	t.Stop()
	return 0
}

// runCluster starts the production topology on this machine and stops it on Ctrl-C.
func runCluster(args []string) int {
	self, _ := os.Executable()
	fs := flag.NewFlagSet("treasury-dev cluster", flag.ContinueOnError)
	treasuryBin := fs.String("treasury-bin", filepath.Join(filepath.Dir(self), "treasury"), "the treasury binary (api, worker, migrate, temporal setup)")
	pg := fs.String("postgres", "postgres://postgres@127.0.0.1:5432/?sslmode=disable", "PostgreSQL server (no database in the URL)")
	name := fs.String("name", "treasury_cluster", "name of the store database; Temporal's are <name>_temporal and <name>_temporal_visibility")
	dataDir := fs.String("data-dir", ".cluster", "credentials, keys and one log file per process")
	apiPorts := fs.String("api-ports", "8080,8081", "one api process per port, comma separated")
	workers := fs.Int("workers", 2, "worker processes")
	temporalPort := fs.Int("temporal-port", 7233, "Temporal frontend port")
	uiPort := fs.Int("ui-port", 8233, "Temporal Web UI port")
	fresh := fs.Bool("fresh", false, "drop the cluster's databases and data directory first, and start from nothing")
	noSeed := fs.Bool("no-seed", false, "no demo organisation and no dev signer: start empty, as a production deployment does (make organisations with treasury org create)")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	log := assemble.NewLogger(slog.LevelInfo).With("process", "cluster")
	var ports []int
	for _, p := range strings.Split(*apiPorts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil {
			log.Error("--api-ports must be numbers", "value", p)
			return 2
		}
		ports = append(ports, n)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *fresh {
		if err := cluster.DropDatabases(ctx, *pg, *name); err != nil {
			log.Error("could not drop the cluster's databases", "error", err.Error())
			return 1
		}
		if err := os.RemoveAll(*dataDir); err != nil {
			log.Error("could not remove the data directory", "error", err.Error())
			return 1
		}
	}
	started := time.Now()
	c, err := cluster.Start(ctx, cluster.Options{TreasuryBin: *treasuryBin, DevBin: self, Postgres: *pg, Name: *name,
		DataDir: *dataDir, APIPorts: ports, Workers: *workers, TemporalPort: *temporalPort, UIPort: *uiPort, NoSeed: *noSeed, Log: log})
	if err != nil {
		log.Error("the cluster could not start (each process's log is in "+filepath.Join(*dataDir, "logs")+")", "error", err.Error())
		return 1
	}
	log.Info("ready", "startupMs", time.Since(started).Milliseconds())
	c.Banner(os.Stdout)
	<-ctx.Done()
	fmt.Println("stopping")
	if err := c.Shutdown(); err != nil {
		log.Error("shutdown", "error", err.Error())
		return 1
	}
	return 0
}
