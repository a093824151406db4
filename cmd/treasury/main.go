// Command treasury is the production binary: the API, the worker and the operational
// commands, configured from the environment. It holds no Temporal server.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/opentreasury/treasury/client"
	"github.com/opentreasury/treasury/internal/assemble"
	"github.com/opentreasury/treasury/internal/signer"
)

// command is one subcommand: its words on the command line, its flags, and what it does.
type command struct {
	words   []string
	summary string
	// args names the arguments it takes after its flags (e.g. FILE); "" takes none.
	args string
	// env names the environment variables it reads (assemble.EnvVars); a server reads
	// them all.
	env    []string
	server bool
	// flags registers the command's flags; they override the environment.
	flags func(fs *flag.FlagSet, cfg *assemble.Config)
	run   func(ctx context.Context, cfg assemble.Config, proc commandEnv) error
}

// commandEnv is what a command may use of its process besides the configuration;
// tests pass their own.
type commandEnv struct {
	getenv         func(string) string
	stdin          io.Reader
	stdout, stderr io.Writer
	// args are the arguments after the command's flags.
	args []string
}

// configOnly adapts a command that needs nothing but its configuration.
func configOnly(run func(ctx context.Context, cfg assemble.Config) error) func(context.Context, assemble.Config, commandEnv) error {
	return func(ctx context.Context, cfg assemble.Config, _ commandEnv) error { return run(ctx, cfg) }
}

var commands = []command{
	{
		words:   []string{"api"},
		summary: "serve the public HTTP API",
		server:  true,
		flags: func(fs *flag.FlagSet, cfg *assemble.Config) {
			fs.StringVar(&cfg.HTTPAddr, "http-addr", cfg.HTTPAddr, "address to listen on (overrides HTTP_ADDR)")
			metricsFlag(fs, cfg)
		},
		run: configOnly(assemble.RunAPI),
	},
	{
		words:   []string{"worker"},
		summary: "run the Temporal worker (workflows and activities)",
		server:  true,
		flags:   metricsFlag,
		run:     configOnly(assemble.RunWorker),
	},
	{
		words:   []string{"migrate"},
		summary: "apply pending database migrations and exit",
		env:     storeEnv,
		run:     configOnly(assemble.Migrate),
	},
	{
		words:   []string{"signer"},
		summary: "the reference paired signer: sign one wallet's signing requests with its key",
		env:     []string{"TREASURY_TOKEN", "LOG_LEVEL"},
		flags: func(fs *flag.FlagSet, cfg *assemble.Config) {
			fs.StringVar(&signerFlags.keyFile, "key", "", "file holding the wallet's private key as credentials.json gives it: hex of a secp256k1\nkey, or a base64 ed25519 seed (required)")
			fs.StringVar(&signerFlags.wallet, "wallet", "", "id of the wallet the key belongs to (required)")
			fs.StringVar(&signerFlags.url, "url", "http://127.0.0.1:8080", "base URL of the treasury API")
			fs.StringVar(&signerFlags.config, "config", "", "a WebSocket config wanting Wallet.SigningRequested (wsc_…, a treasury config\nfor a device key): each request wakes the signer at once; without it, it polls")
			fs.DurationVar(&signerFlags.interval, "interval", time.Second, "how often to look for pending requests while the live channel is down")
			fs.StringVar(&signerFlags.ledger, "ledger", "", "with --policy: the file where the signer records what it signs, so that a leg is\nsigned once (default: the key file's path with .ledger added)")
			fs.StringVar(&signerFlags.policy, "policy", "", "the signer's own rules (docs/signer.md): chains, allowed and denied destinations and\ncontracts, fee caps; each request is decoded and judged by them, and refused when a check fails")
		},
		run: runSigner,
	},
	{
		words:   []string{"events", "tail"},
		summary: "follow a WebSocket config's live events from a terminal",
		env:     []string{"TREASURY_TOKEN"},
		flags: func(fs *flag.FlagSet, cfg *assemble.Config) {
			fs.StringVar(&tailFlags.url, "url", "http://127.0.0.1:8080", "base URL of the treasury API (http, https, ws or wss)")
			fs.StringVar(&tailFlags.config, "config", "", "id of the WebSocket config to follow, wsc_… (required)")
			fs.StringVar(&tailFlags.token, "token", "", "an sk_, tk_ or pk_ key of the config's app, or an OAuth access token\n(default $TREASURY_TOKEN, which keeps it out of the process list)")
			fs.IntVar(&tailFlags.count, "count", 0, "exit after this many events (0: never)")
			fs.StringVar(&tailFlags.until, "until", "", "exit after an event of this name, e.g. Order.Confirmed")
			fs.BoolVar(&tailFlags.json, "json", false, "print each event frame as received, one JSON object a line")
			fs.DurationVar(&tailFlags.timeout, "timeout", 0, "give up with exit status 1 after this long, e.g. 30s (0: never)")
		},
		run: runTail,
	},
	{
		words:   []string{"temporal", "setup"},
		summary: "register the custom search attributes on the Temporal namespace",
		env:     []string{"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_API_KEY", "TEMPORAL_TLS", "TEMPORAL_TLS_CERT", "TEMPORAL_TLS_KEY", "LOG_LEVEL"},
		run:     configOnly(assemble.SetupTemporal),
	},
	{
		words:   []string{"audit", "verify"},
		args:    "FILE",
		summary: "verify an export of the audit log (FILE, - for stdin): intact, or its first broken entry",
		flags: func(fs *flag.FlagSet, _ *assemble.Config) {
			fs.StringVar(&auditFlags.head, "head", "", "a chain head seen before, SEQ:HASH (chainHead of GET /api/v1/audit-logs, or the\nhead of an earlier verification): the export must reach it, with that hash")
		},
		run: runAuditVerify,
	},
}

func init() { commands = append(commands, operatorCommands...) }

// storeEnv are the variables of a command that opens the treasury store.
var storeEnv = []string{"DATABASE_URL", "SQLITE_PATH", "MIGRATE_ON_START", "LOG_LEVEL"}

// metricsFlag is the flag of the processes that serve /metrics.
func metricsFlag(fs *flag.FlagSet, cfg *assemble.Config) {
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", cfg.MetricsAddr, "address of the /metrics endpoint (overrides METRICS_ADDR)")
}

// signerFlags are the flags of treasury signer; its token comes from TREASURY_TOKEN so
// that it stays out of the process list.
var signerFlags struct {
	keyFile, wallet, url, config, policy, ledger string
	interval                                     time.Duration
}

func runSigner(ctx context.Context, cfg assemble.Config, proc commandEnv) error {
	if signerFlags.keyFile == "" || signerFlags.wallet == "" {
		return errors.New("--key and --wallet are required")
	}
	token := proc.getenv("TREASURY_TOKEN")
	if token == "" {
		return errors.New("set TREASURY_TOKEN to the device's key: a treasury key holding sign (or a key with sign on one app)")
	}
	key, err := signer.LoadKey(signerFlags.keyFile)
	if err != nil {
		return err
	}
	var policy *signer.Policy
	var ledger *signer.Ledger
	if signerFlags.policy != "" {
		if policy, err = signer.LoadPolicy(signerFlags.policy); err != nil {
			return err
		}
		if err := policy.Connect(ctx, nil); err != nil {
			return fmt.Errorf("%s: %w", signerFlags.policy, err)
		}
		if ledger, err = signer.OpenLedger(cmp.Or(signerFlags.ledger, signerFlags.keyFile+".ledger")); err != nil {
			return err
		}
	}
	log := assemble.NewLogger(cfg.LogLevel).With("process", "signer")
	log.Info("signer following signing requests", "wallet", signerFlags.wallet, "url", signerFlags.url, "configId", signerFlags.config,
		"policy", signerFlags.policy)
	if signerFlags.config == "" {
		log.Warn("no --config: polling only; give a WebSocket config to be woken by each request")
	}
	if policy == nil {
		log.Warn("no --policy: the signer signs every consistent request of its wallet; give it its own rules to judge what it signs")
	}
	return signer.Run(ctx, signer.Config{BaseURL: signerFlags.url, Token: token, WalletID: signerFlags.wallet,
		Key: key, ConfigID: signerFlags.config, Interval: signerFlags.interval, Log: log, Policy: policy, Ledger: ledger})
}

// tailFlags are the flags of treasury events tail.
var tailFlags struct {
	url, config, token, until string
	count                     int
	json                      bool
	timeout                   time.Duration
}

// runTail prints events to stdout and what happens to the connection to stderr, so that
// the events can be piped on their own.
func runTail(ctx context.Context, _ assemble.Config, proc commandEnv) error {
	token := tailFlags.token
	if token == "" {
		token = proc.getenv("TREASURY_TOKEN")
	}
	switch {
	case tailFlags.config == "":
		return errors.New("--config is required: the id of a WebSocket config (POST /developer/websockets)")
	case token == "":
		return errors.New("--token is required (or set TREASURY_TOKEN): an sk_, tk_ or pk_ key of the config's app")
	}
	return client.Tail(ctx, client.TailOptions{URL: tailFlags.url, ConfigID: tailFlags.config, Token: token,
		Count: tailFlags.count, Until: tailFlags.until, JSON: tailFlags.json, Timeout: tailFlags.timeout,
		Out: proc.stdout, Log: proc.stderr})
}

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if getenv == nil {
		getenv = os.Getenv
	}
	return runIn(args, commandEnv{getenv: getenv, stdin: os.Stdin, stdout: stdout, stderr: stderr})
}

// runIn runs the command args name in the process proc describes, and returns its exit
// status.
func runIn(args []string, proc commandEnv) int {
	getenv, stderr := proc.getenv, proc.stderr
	cmd, rest := findCommand(args)
	if cmd == nil {
		usage(stderr)
		if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
			return 0
		}
		fmt.Fprintf(stderr, "\ntreasury: unknown command %q\n", strings.Join(args, " "))
		return 2
	}
	cfg, err := assemble.ConfigFromEnv(getenv)
	if err != nil {
		fmt.Fprintln(stderr, "treasury:", err)
		return 2
	}
	fs := newFlagSet(cmd, &cfg, stderr)
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 && cmd.args == "" {
		fmt.Fprintf(stderr, "treasury %s: unexpected arguments %q\n", strings.Join(cmd.words, " "), fs.Args())
		return 2
	}
	proc.args = fs.Args()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cmd.run(ctx, cfg, proc); err != nil {
		var usage usageError
		if errors.As(err, &usage) {
			fmt.Fprintf(stderr, "treasury %s: %v\n", strings.Join(cmd.words, " "), err)
			return 2
		}
		fmt.Fprintf(stderr, "treasury %s: %v\n", strings.Join(cmd.words, " "), err)
		return 1
	}
	return 0
}

// findCommand matches the longest command whose words start args.
func findCommand(args []string) (*command, []string) {
	var best *command
	for i := range commands {
		c := &commands[i]
		if len(args) < len(c.words) {
			continue
		}
		match := true
		for j, w := range c.words {
			if args[j] != w {
				match = false
				break
			}
		}
		if match && (best == nil || len(c.words) > len(best.words)) {
			best = c
		}
	}
	if best == nil {
		return nil, nil
	}
	return best, args[len(best.words):]
}

func newFlagSet(cmd *command, cfg *assemble.Config, out io.Writer) *flag.FlagSet {
	name := strings.Join(cmd.words, " ")
	fs := flag.NewFlagSet("treasury "+name, flag.ContinueOnError)
	fs.SetOutput(out)
	if cmd.flags != nil {
		cmd.flags(fs, cfg)
	}
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage: treasury %s [flags]%s\n\n%s.\n\nFlags:\n", name, strings.TrimRight(" "+cmd.args, " "), cmd.summary)
		fs.PrintDefaults()
		switch {
		case cmd.server:
			fmt.Fprintf(out, "\nEnvironment (the server's):\n%s", assemble.EnvHelp())
		case len(cmd.env) > 0:
			fmt.Fprintf(out, "\nEnvironment:\n%s", assemble.EnvHelp(cmd.env...))
		default:
			fmt.Fprintln(out, "\nEnvironment: none read.")
		}
	}
	return fs
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: treasury <command> [flags]\n\nCommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-16s %s\n", strings.Join(c.words, " "), c.summary)
	}
	fmt.Fprintf(w, "\nConfiguration comes from the environment:\n%s", assemble.EnvHelp())
}
