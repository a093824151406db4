// Package cluster runs the production topology on one machine, without Docker: a Temporal
// server on PostgreSQL (persistence and visibility) with its Web UI, two `treasury api`
// and two `treasury worker` processes, one PostgreSQL store, and a dev signer standing in
// for the organisations' signing devices. Every process is a child the cluster supervises:
// one that exits is started again, as an orchestrator would, and the fault tests kill,
// stop and resume them by name.
package cluster

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the pgx database/sql driver
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/opentreasury/treasury/dev/devchains"
	"github.com/opentreasury/treasury/dev/devsigner"
	"github.com/opentreasury/treasury/dev/freeport"
	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/internal/assemble"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/webhook"
)

// Options describe the cluster; zero values give the defaults of `make run-cluster`.
type Options struct {
	// TreasuryBin is the production binary; DevBin the dev one, which holds the Temporal
	// server (`treasury-dev temporal serve`).
	TreasuryBin, DevBin string
	// Postgres is the server, as a URL without a database; databases named Name,
	// Name_temporal and Name_temporal_visibility are made on it when missing.
	Postgres string
	Name     string
	// DataDir holds the credentials, the dev signer's keys, the webhook sealing key and
	// one log file per process.
	DataDir string
	// APIPorts, one api process each (8080 and 8081 by default; 0 picks a free port).
	APIPorts []int
	// Workers is the number of worker processes (2 by default).
	Workers int
	// TemporalPort and UIPort of the Temporal server (7233 and 8233; 0 picks free ones).
	TemporalPort, UIPort int
	// Env is added to every treasury process's environment (e.g. RATE_LIMIT).
	Env []string
	// NoSeed starts the cluster from nothing, as a production deployment starts: no demo
	// organisation, no credentials file, no dev signer; organisations come from
	// `treasury org create`.
	NoSeed bool
	// AfterSeed, when set, runs once the seed has made the organisation and its wallets
	// (Credentials, the dev signer's keys in DataDir) and before any worker or api process
	// starts: what the processes read at start (CHAINS_FILE's chains, say) can be made
	// from the seeded wallets there.
	AfterSeed func(ctx context.Context, c *Cluster) error
	// NoDevChains leaves the chains to the caller, who serves them through Env
	// (CHAINS_FILE, SOLANA_RPC_URL, CHAINS). Otherwise the launcher runs the dev chains
	// (devchains: ethereum and polygon in its own process, served over HTTP on loopback,
	// solana as a child process), funds the seeded wallets on them, and points every
	// treasury process at them.
	NoDevChains bool
	Log         *slog.Logger
}

// Cluster is a running cluster.
type Cluster struct {
	APIURLs       []string
	TemporalAddr  string
	TemporalUIURL string
	DatabaseURL   string
	// MetricsURLs are the processes' Prometheus endpoints, by process name.
	MetricsURLs map[string]string
	Credentials *seed.Credentials
	// CredentialsPath is the credentials file, as the dev bundle writes it.
	CredentialsPath string

	opts     Options
	log      *slog.Logger
	launcher *assemble.Process
	// chains are the dev chains, and chainEnv what points a treasury process at them.
	chains   *devchains.Chains
	chainEnv []string
	procs    map[string]*process
	order    []string // start order
	logFiles []*os.File
	// Chosen by prepare.
	temporalDB, temporalPort, uiPort string
	apiAddrs                         []string
}

// Process names: "temporal", "api-1", "api-2", "worker-1", "worker-2".
const Temporal = "temporal"

// API and Worker name the i-th (from 1) api and worker process.
func API(i int) string    { return "api-" + strconv.Itoa(i) }
func Worker(i int) string { return "worker-" + strconv.Itoa(i) }

// Start brings the cluster up and returns when every API answers ready.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	opts = opts.withDefaults()
	c := &Cluster{opts: opts, log: opts.Log, procs: map[string]*process{}, MetricsURLs: map[string]string{}}
	if err := os.MkdirAll(filepath.Join(opts.DataDir, "logs"), 0o700); err != nil {
		return nil, err
	}
	env, err := c.prepare(ctx)
	if err != nil {
		return nil, err
	}
	// The launcher is a process of its own: the store (for the seed), and the dev signer
	// with the service and event follower it needs.
	c.launcher = assemble.NewProcess(assemble.Config{DatabaseURL: c.DatabaseURL, TemporalAddress: c.TemporalAddr,
		TemporalNamespace: "default", ShutdownTimeout: 30 * time.Second}, "cluster", c.log)
	p := c.launcher
	err = p.Start(ctx,
		c.child(Temporal, opts.DevBin, nil, "temporal", "serve", "--postgres", c.temporalDB,
			"--port", c.temporalPort, "--ui-port", c.uiPort),
		c.setup(env),
		p.Database(),
		c.seed(),
		p.TemporalClient(),
		p.EventFollower(),
		c.devSigner(),
		assemble.Component{Name: "after seed", Start: func(ctx context.Context) error {
			if opts.AfterSeed == nil {
				return nil
			}
			return opts.AfterSeed(ctx, c)
		}},
		c.devChains(),
		c.children(env),
		assemble.Component{Name: "ready", Start: func(ctx context.Context) error {
			for _, u := range c.APIURLs {
				if err := waitReady(ctx, u, 90*time.Second); err != nil {
					return err
				}
			}
			return nil
		}},
	)
	if err != nil {
		c.closeLogs()
		return nil, err
	}
	return c, nil
}

func (o Options) withDefaults() Options {
	o.Postgres = cmp.Or(o.Postgres, "postgres://postgres@127.0.0.1:5432/?sslmode=disable")
	o.Name = cmp.Or(o.Name, "treasury_cluster")
	o.DataDir = cmp.Or(o.DataDir, ".cluster")
	o.Workers = cmp.Or(o.Workers, 2)
	o.TemporalPort = cmp.Or(o.TemporalPort, 7233)
	o.UIPort = cmp.Or(o.UIPort, 8233)
	if o.APIPorts == nil {
		o.APIPorts = []int{8080, 8081}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return o
}

// prepare makes the databases, picks the ports and returns the environment every
// treasury process gets.
func (c *Cluster) prepare(ctx context.Context) (env []string, err error) {
	opts := c.opts
	for _, db := range []string{opts.Name, opts.Name + "_temporal"} {
		if err := ensureDatabase(ctx, opts.Postgres, db); err != nil {
			return nil, err
		}
	}
	if c.DatabaseURL, err = withDatabase(opts.Postgres, opts.Name); err != nil {
		return nil, err
	}
	c.temporalDB, _ = withDatabase(opts.Postgres, opts.Name+"_temporal")
	temporalPort, err := freeport.OrFree("127.0.0.1", opts.TemporalPort)
	if err != nil {
		return nil, fmt.Errorf("temporal port: %w", err)
	}
	uiPort, err := freeport.OrFree("127.0.0.1", opts.UIPort)
	if err != nil {
		return nil, fmt.Errorf("temporal UI port: %w", err)
	}
	c.temporalPort, c.uiPort = strconv.Itoa(temporalPort), strconv.Itoa(uiPort)
	c.TemporalAddr = net.JoinHostPort("127.0.0.1", c.temporalPort)
	c.TemporalUIURL = "http://" + net.JoinHostPort("127.0.0.1", c.uiPort)
	for _, p := range opts.APIPorts {
		port, err := freeport.OrFree("127.0.0.1", p)
		if err != nil {
			return nil, fmt.Errorf("api port %d: %w", p, err)
		}
		c.apiAddrs = append(c.apiAddrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		c.APIURLs = append(c.APIURLs, "http://"+c.apiAddrs[len(c.apiAddrs)-1])
	}
	sealKey, err := webhook.KeyFile(filepath.Join(opts.DataDir, "webhook-key"))
	if err != nil {
		return nil, err
	}
	return slices.Concat([]string{
		"DATABASE_URL=" + c.DatabaseURL,
		"TEMPORAL_ADDRESS=" + c.TemporalAddr,
		"TEMPORAL_UI_URL=" + c.TemporalUIURL,
		"MIGRATE_ON_START=false",
		"WEBHOOK_SECRET_KEY=" + sealKey,
		// Receivers on this machine, as in the dev bundle; production refuses both.
		"WEBHOOK_ALLOW_HTTP=true",
		"WEBHOOK_ALLOW_LOOPBACK=true",
	}, opts.Env), nil
}

// setup migrates the store and registers the search attributes (waiting up to a minute
// for the Temporal frontend), as an operator would before starting the processes.
func (c *Cluster) setup(env []string) assemble.Component {
	return assemble.Component{Name: "setup", Start: func(ctx context.Context) error {
		onceLog, err := c.logFile("setup")
		if err != nil {
			return err
		}
		if err := runOnce(ctx, onceLog, env, c.opts.TreasuryBin, "migrate"); err != nil {
			return err
		}
		return runOnce(ctx, onceLog, env, c.opts.TreasuryBin, "temporal", "setup")
	}}
}

// Chains are the dev chains the launcher runs, nil with Options.NoDevChains.
func (c *Cluster) Chains() *devchains.Chains { return c.chains }

// devChains runs the dev chains in the launcher, unless the caller serves the chains.
func (c *Cluster) devChains() assemble.Component {
	if c.opts.NoDevChains {
		return assemble.Component{Name: "no dev chains"}
	}
	return assemble.Component{Name: "dev chains",
		Start: func(ctx context.Context) (err error) {
			c.chains, err = devchains.Start(ctx, devchains.Options{Dir: c.opts.DataDir, Store: c.launcher.Store,
				Spenders: devchains.SeededSpenders(c.opts.DataDir, c.Credentials), HTTP: true, Log: c.log})
			if err != nil {
				return err
			}
			if c.chainEnv, err = c.chains.Env(filepath.Join(c.opts.DataDir, "chains.json")); err != nil {
				_ = c.chains.Close()
			}
			return err
		},
		Stop: func(context.Context) error { return c.chains.Close() },
	}
}

// devSigner signs the seeded autoSign wallets' requests; a cluster with no seed has none.
func (c *Cluster) devSigner() assemble.Component {
	if c.opts.NoSeed {
		return assemble.Component{Name: "no dev signer", Start: func(context.Context) error { return nil }}
	}
	return devsigner.Component(c.launcher, c.opts.DataDir)
}

// seed makes (or finds) the demo organisation and its credentials file, unless the cluster
// starts from nothing.
func (c *Cluster) seed() assemble.Component {
	return assemble.Component{Name: "seed", Start: func(ctx context.Context) (err error) {
		if c.opts.NoSeed {
			return nil
		}
		urls := seed.URLs{BaseURL: c.APIURLs[0], WSURL: "ws://" + c.apiAddrs[0], TemporalUIURL: c.TemporalUIURL}
		c.Credentials, err = seed.Ensure(ctx, c.launcher.Store, c.opts.DataDir, urls, c.log)
		c.CredentialsPath = filepath.Join(c.opts.DataDir, seed.CredentialsFile)
		return err
	}}
}

// children starts the worker and api processes, each serving /metrics on an address of
// its own; they stop (the newest first) before the launcher's own parts.
func (c *Cluster) children(env []string) assemble.Component {
	var started []assemble.Component
	return assemble.Component{Name: "treasury processes",
		Start: func(ctx context.Context) error {
			withMetrics := func(name string, extra ...string) ([]string, error) {
				port, err := freeport.OrFree("127.0.0.1", 0)
				if err != nil {
					return nil, err
				}
				addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
				c.MetricsURLs[name] = "http://" + addr + "/metrics"
				// The options' Env comes after the dev chains' CHAINS_FILE, so a caller's own
				// CHAINS_FILE replaces it (a caller serving every chain itself sets NoDevChains).
				return slices.Concat(c.chainEnv, env, extra, []string{"METRICS_ADDR=" + addr}), nil
			}
			for i := range c.opts.Workers + len(c.apiAddrs) {
				name, extra, arg := Worker(i+1), []string(nil), "worker"
				if i >= c.opts.Workers {
					j := i - c.opts.Workers
					name, extra, arg = API(j+1), []string{"HTTP_ADDR=" + c.apiAddrs[j]}, "api"
				}
				penv, err := withMetrics(name, extra...)
				if err != nil {
					return err
				}
				child := c.child(name, c.opts.TreasuryBin, penv, arg)
				if err := child.Start(ctx); err != nil {
					return err
				}
				started = append(started, child)
			}
			return nil
		},
		Stop: func(ctx context.Context) error {
			var errs []error
			for i := len(started) - 1; i >= 0; i-- {
				errs = append(errs, started[i].Stop(ctx))
			}
			return errors.Join(errs...)
		},
	}
}

// child is one supervised child process.
func (c *Cluster) child(name, path string, env []string, args ...string) assemble.Component {
	return assemble.Component{Name: name,
		Start: func(ctx context.Context) error {
			err := c.add(ctx, name, path, env, args...)
			if p, ok := c.procs[name]; ok && err != nil {
				_ = p.stop(30 * time.Second) // started, but never became ready
			}
			return err
		},
		Stop: func(context.Context) error { return c.procs[name].stop(30 * time.Second) },
	}
}

func (c *Cluster) add(ctx context.Context, name, path string, env []string, args ...string) error {
	out, err := c.logFile(name)
	if err != nil {
		return err
	}
	p := &process{name: name, path: path, args: args, env: env, out: out, log: c.log}
	if err := p.start(); err != nil {
		return err
	}
	c.procs[name] = p
	c.order = append(c.order, name)
	if name == Temporal {
		return waitNamespace(ctx, c.TemporalAddr, "default", 2*time.Minute)
	}
	return nil
}

// waitNamespace waits until the server answers for the namespace: its frontend opens
// before `temporal serve` has registered it.
func waitNamespace(ctx context.Context, addr, namespace string, timeout time.Duration) error {
	if err := freeport.WaitOpen(ctx, addr, timeout); err != nil {
		return err
	}
	nc, err := client.NewNamespaceClient(client.Options{HostPort: addr, Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return err
	}
	defer nc.Close()
	deadline := time.Now().Add(timeout)
	for {
		callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := nc.Describe(callCtx, namespace)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("namespace %s not there within %s: %w", namespace, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (c *Cluster) logFile(name string) (io.Writer, error) {
	f, err := os.OpenFile(filepath.Join(c.opts.DataDir, "logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	c.logFiles = append(c.logFiles, f)
	return f, nil
}

// Names lists the supervised processes in start order.
func (c *Cluster) Names() []string { return append([]string(nil), c.order...) }

// Kill sends SIGKILL to a process; the cluster starts it again half a second later.
func (c *Cluster) Kill(name string) error {
	p, err := c.proc(name)
	if err != nil {
		return err
	}
	return p.signal(syscall.SIGKILL, false, 10*time.Second)
}

// Terminate sends SIGTERM and waits for the process to drain and exit; it is started
// again like a killed one.
func (c *Cluster) Terminate(name string) error {
	p, err := c.proc(name)
	if err != nil {
		return err
	}
	return p.signal(syscall.SIGTERM, false, 30*time.Second)
}

// Hold stops a process (SIGTERM) and keeps it stopped until Resume.
func (c *Cluster) Hold(name string) error {
	p, err := c.proc(name)
	if err != nil {
		return err
	}
	return p.signal(syscall.SIGTERM, true, 30*time.Second)
}

// Resume starts a held process again.
func (c *Cluster) Resume(name string) error {
	p, err := c.proc(name)
	if err != nil {
		return err
	}
	return p.resume()
}

// Crashes counts the exits of a process that nobody asked for.
func (c *Cluster) Crashes(name string) int {
	p, err := c.proc(name)
	if err != nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.crashes
}

// PID of a running process (0 if none).
func (c *Cluster) PID(name string) int {
	if p, err := c.proc(name); err == nil {
		return p.pid()
	}
	return 0
}

func (c *Cluster) proc(name string) (*process, error) {
	p, ok := c.procs[name]
	if !ok {
		names := c.Names()
		sort.Strings(names)
		return nil, fmt.Errorf("no process %q (have %s)", name, strings.Join(names, ", "))
	}
	return p, nil
}

// Store is the cluster's store, for checks from outside the processes.
func (c *Cluster) Store() *store.Store { return c.launcher.Store }

// Banner is what `treasury-dev cluster` prints once the cluster is up.
func (c *Cluster) Banner(w io.Writer) {
	cr := c.Credentials
	signer, console := "no seed, no dev signer", ""
	if cr != nil {
		signer, console = "dev signer in the launcher", fmt.Sprintf(" (sign in as %s, password %s)", cr.Owner.Email, cr.Owner.Password)
	}
	chains := "chains served from the caller's nodes"
	if c.chains != nil {
		chains = "dev chains in the launcher: ethereum and polygon on go-ethereum, solana on Solana's runtime"
	}
	fmt.Fprintf(w, "\ntreasury cluster is ready (development machine: %s; %s)\n\n", chains, signer)
	for i, u := range c.APIURLs {
		fmt.Fprintf(w, "  API %d         %s/api/v1   (pid %d, metrics %s)\n", i+1, u, c.PID(API(i+1)), c.MetricsURLs[API(i+1)])
	}
	for i := range c.opts.Workers {
		fmt.Fprintf(w, "  worker %d      pid %d, metrics %s\n", i+1, c.PID(Worker(i+1)), c.MetricsURLs[Worker(i+1)])
	}
	fmt.Fprintf(w, `  Console       %s/console/%s
  Temporal      %s (PostgreSQL: %s_temporal, %s_temporal_visibility; pid %d)
  Temporal UI   %s
  Store         %s
`, c.APIURLs[0], console, c.TemporalAddr, c.opts.Name, c.opts.Name, c.PID(Temporal), c.TemporalUIURL, store.RedactDatabaseURL(c.DatabaseURL))
	logs := filepath.Join(c.opts.DataDir, "logs")
	if cr == nil {
		fmt.Fprintf(w, `  Logs          %s

No organisation yet: make one with
  DATABASE_URL='%s' PUBLIC_URL=%s treasury org create --name <name> --owner-email <address>
and open the sign-in link it prints (docs/onboarding.md).

Press Ctrl-C to stop everything.
`, logs, c.DatabaseURL, c.APIURLs[0])
		return
	}
	fmt.Fprintf(w, `  Credentials   %s
  Logs          %s

  treasury sk   %s
  pay sk        %s

Press Ctrl-C to stop everything.
`, c.CredentialsPath, logs, cr.Keys["treasury"].SK, cr.Keys["pay"].SK)
}

// Shutdown stops every process, the newest first (api, workers, the dev signer, then
// Temporal).
func (c *Cluster) Shutdown() error {
	err := c.launcher.Stop()
	c.closeLogs()
	return err
}

func (c *Cluster) closeLogs() {
	for _, f := range c.logFiles {
		_ = f.Close()
	}
	c.logFiles = nil
}

// ensureDatabase creates a database on the server unless it exists.
func ensureDatabase(ctx context.Context, server, name string) error {
	db, err := sql.Open("pgx", server)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return fmt.Errorf("PostgreSQL at %s: %w", store.RedactDatabaseURL(server), err)
	}
	if exists {
		return nil
	}
	if _, err := db.ExecContext(ctx, `CREATE DATABASE "`+strings.ReplaceAll(name, `"`, ``)+`"`); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// DropDatabases removes what Start made on the server (the fault tests start afresh).
func DropDatabases(ctx context.Context, server, name string) error {
	db, err := sql.Open("pgx", server)
	if err != nil {
		return err
	}
	defer db.Close()
	var errs []error
	for _, n := range []string{name, name + "_temporal", name + "_temporal_visibility"} {
		_, err := db.ExecContext(ctx, `DROP DATABASE IF EXISTS "`+strings.ReplaceAll(n, `"`, ``)+`" WITH (FORCE)`)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func withDatabase(server, name string) (string, error) {
	u, err := url.Parse(server)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

// waitReady polls an API's /readyz until it answers 200.
func waitReady(ctx context.Context, base string, timeout time.Duration) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	for {
		resp, err := hc.Get(base + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %s: %w", base, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
