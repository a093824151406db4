package main

import (
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
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/internal/assemble"
	"github.com/opentreasury/treasury/internal/store"
)

const (
	portfolioPath = "/api/v1/treasury/portfolio"
	paymentsPath  = "/api/v1/payments"
	// The seeded pay policy whitelists this address: a payment to it needs no approval.
	destination        = "0x1111111111111111111111111111111111111111"
	defaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
)

func paymentBody(walletID string) string {
	return fmt.Sprintf(`{"walletId":%q,"asset":"USDC","amount":"500","destination":{"address":%q}}`, walletID, destination)
}

// rig is one store with the real API and the bare engine served beside it on loopback.
type rig struct {
	label, short string
	ours, bare   string // base URLs
	// readKey reads the portfolio (treasury app); payKey creates payments (pay app).
	readKey, payKey string
	walletID        string
	// portfolio and payment are the real API's answers, which the bare engine repeats.
	portfolio, payment captured
	close              func()
}

type captured struct {
	status      int
	contentType string
	// headers are the rest of the answer's headers, but those net/http writes itself.
	headers http.Header
	body    []byte
}

func (c captured) headerNames() []string {
	var out []string
	for k := range c.headers {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// newRig opens, migrates and seeds a store, serves the real router and the bare engine,
// and captures the real answers that the bare engine repeats.
func newRig(ctx context.Context, kind string, client *http.Client, o options) (_ *rig, err error) {
	var undo []func()
	cleanup := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	dir, err := os.MkdirTemp("", "treasury-httpcost-")
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() { _ = os.RemoveAll(dir) })

	// The treasury binary's defaults, as if started with no environment at all.
	cfg, err := assemble.ConfigFromEnv(func(string) string { return "" })
	if err != nil {
		return nil, err
	}
	// One credential drives the whole load: the limiter still runs, but never refuses.
	cfg.RateLimit, cfg.RateBurst = 1e6, 1e6
	r := &rig{}
	drop, err := r.pickStore(ctx, kind, dir, &cfg)
	if err != nil {
		return nil, err
	}
	undo = append(undo, drop)

	// Logged as production logs: a JSON line per request, each written as it comes.
	// Production writes to stderr; a file keeps the terminal readable for the same work.
	logFile, err := os.Create(filepath.Join(dir, "api.log"))
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() { _ = logFile.Close() })
	log := slog.New(slog.NewJSONHandler(logFile, &slog.HandlerOptions{Level: cfg.LogLevel})).With("process", "api")

	p, oursURL, err := r.startAPI(ctx, cfg, dir, log, o)
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() { _ = p.Stop() })
	r.ours = oursURL

	if r.portfolio, err = capture(ctx, client, http.MethodGet, oursURL+portfolioPath, r.readKey, ""); err != nil {
		return nil, err
	}
	if r.payment, err = capture(ctx, client, http.MethodPost, oursURL+paymentsPath, r.payKey, paymentBody(r.walletID)); err != nil {
		return nil, err
	}
	if r.portfolio.status != http.StatusOK || r.payment.status != http.StatusCreated {
		return nil, fmt.Errorf("the real API answered GET portfolio %d %s, POST payments %d %s",
			r.portfolio.status, r.portfolio.body, r.payment.status, r.payment.body)
	}
	bareSrv, bareURL, err := serve(bareEngine(r.portfolio, r.payment), "bare", o.labels)
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() { _ = bareSrv.Close() })
	r.bare = bareURL
	r.close = cleanup
	return r, nil
}

// pickStore points cfg at a store of the kind, made for the run; drop removes it after.
func (r *rig) pickStore(ctx context.Context, kind, dir string, cfg *assemble.Config) (drop func(), err error) {
	drop = func() {}
	switch kind {
	case "sqlite":
		cfg.SQLitePath = filepath.Join(dir, "treasury.db")
		r.short = "SQLite"
		r.label = "SQLite, a file in " + dir
	case "postgres":
		base := os.Getenv("DATABASE_URL")
		if base == "" {
			base = defaultPostgresURL
		}
		schemaURL, dropSchema, err := freshSchema(ctx, base)
		if err != nil {
			return nil, err
		}
		drop = dropSchema
		cfg.DatabaseURL = schemaURL
		r.short = "PostgreSQL"
		r.label = "PostgreSQL, " + store.RedactDatabaseURL(schemaURL) + " (a schema of its own, dropped at the end)"
	default:
		return nil, fmt.Errorf("unknown store %q", kind)
	}
	return drop, nil
}

// startAPI runs what an api process runs (assemble.APIComponents), from the same
// constructors, on a loopback port, but for Temporal: creating a payment does not start
// its workflow.
func (r *rig) startAPI(ctx context.Context, cfg assemble.Config, dir string, log *slog.Logger, o options) (*assemble.Process, string, error) {
	p := assemble.NewProcess(cfg, "api", log)
	database := p.Database()
	if o.maxConns != 0 {
		database.Start = func(ctx context.Context) (err error) {
			p.Store, err = openStore(ctx, cfg, o.maxConns)
			return err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	seeded := assemble.Component{Name: "seed", Start: func(ctx context.Context) error {
		creds, err := seed.Ensure(ctx, p.Store, dir, seed.URLs{}, log)
		if err != nil {
			return err
		}
		r.readKey, r.payKey = creds.Keys["treasury"].SK, creds.Keys["pay"].SK
		for _, w := range creds.Wallets {
			if w.Chain == "ethereum" && w.AutoSign {
				r.walletID = w.ID
				return nil
			}
		}
		return errors.New("the seed has no autoSign ethereum wallet")
	}}
	err = p.Start(ctx, database, seeded, p.LiveChannel(), p.HTTP(ln, func() http.Handler {
		if o.labels {
			return labelled("ours", assemble.NewAPIHandler(p))
		}
		return assemble.NewAPIHandler(p)
	}), p.LiveConnections())
	if err != nil {
		_ = ln.Close()
		return nil, "", err
	}
	return p, "http://" + ln.Addr().String(), nil
}

// openStore is assemble.OpenStore with another pool size, to see what the pool does to the cost.
func openStore(ctx context.Context, cfg assemble.Config, maxConns int) (*store.Store, error) {
	s, err := store.Open(ctx, store.Config{DatabaseURL: cfg.DatabaseURL, SQLitePath: cfg.SQLitePath, MaxOpenConns: maxConns})
	if err != nil {
		return nil, err
	}
	if err := s.Migrate(ctx, nil); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// serve runs h in an http.Server configured as production's on a loopback port. With
// labels, the CPU profile tells the sides and routes apart (pprof -tagfocus=req=ours-portfolio).
func serve(h http.Handler, side string, labels bool) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	if labels {
		h = labelled(side, h)
	}
	srv := assemble.NewHTTPServer(ln.Addr().String(), h)
	go func() { _ = srv.Serve(ln) }()
	return srv, "http://" + ln.Addr().String(), nil
}

// labelled labels the connection's goroutine for the request, and leaves the label on it,
// so that writing the answer after the handler returns is counted with the request too.
func labelled(side string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route := "other"
		switch r.URL.Path {
		case portfolioPath:
			route = "portfolio"
		case paymentsPath:
			route = "payments"
		}
		pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels("req", side+"-"+route)))
		h.ServeHTTP(w, r)
	})
}

// capture makes one request to the real API and keeps its answer.
func capture(ctx context.Context, client *http.Client, method, target, key, body string) (captured, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return captured{}, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "httpcost-capture")
	}
	res, err := client.Do(req)
	if err != nil {
		return captured{}, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return captured{}, err
	}
	c := captured{status: res.StatusCode, contentType: res.Header.Get("Content-Type"), headers: res.Header.Clone(), body: raw}
	for _, h := range []string{"Content-Type", "Content-Length", "Date"} {
		c.headers.Del(h)
	}
	return c, nil
}

// bareEngine answers the two routes with the captured bytes and nothing else: no
// middleware, no store, no logging. Gin in release mode, as the api package sets it.
func bareEngine(portfolio, payment captured) http.Handler {
	r := gin.New()
	answer := func(c *gin.Context, a captured) {
		h := c.Writer.Header()
		for k, v := range a.headers {
			h[k] = v
		}
		c.Data(a.status, a.contentType, a.body)
	}
	r.GET(portfolioPath, func(c *gin.Context) { answer(c, portfolio) })
	r.POST(paymentsPath, func(c *gin.Context) {
		_, _ = io.Copy(io.Discard, c.Request.Body)
		answer(c, payment)
	})
	return r
}

// freshSchema creates an empty schema in the database at base (creating the database if
// the server lacks it), and returns a URL whose connections use it and a func dropping it.
func freshSchema(ctx context.Context, base string) (string, func(), error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	admin, err := sql.Open("pgx", base)
	if err != nil {
		return "", nil, err
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := admin.PingContext(pingCtx); err != nil {
		_ = admin.Close()
		if admin, err = createDatabase(pingCtx, u, err); err != nil {
			return "", nil, fmt.Errorf("PostgreSQL at %s is not reachable (start it, or set DATABASE_URL): %w", store.RedactDatabaseURL(base), err)
		}
	}
	schema := "httpcost_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, err := admin.ExecContext(pingCtx, `CREATE SCHEMA "`+schema+`"`); err != nil {
		_ = admin.Close()
		return "", nil, fmt.Errorf("create schema: %w", err)
	}
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, `DROP SCHEMA "`+schema+`" CASCADE`); err != nil {
			fmt.Fprintf(os.Stderr, "schema %s not dropped: %v\n", schema, err)
		}
		_ = admin.Close()
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), drop, nil
}

// createDatabase makes the database when the server answers but lacks it (SQLSTATE
// 3D000), through the server's "postgres" database, and connects to it.
func createDatabase(ctx context.Context, u *url.URL, pingErr error) (*sql.DB, error) {
	var pgErr *pgconn.PgError
	if !errors.As(pingErr, &pgErr) || pgErr.Code != "3D000" {
		return nil, pingErr
	}
	maintURL := *u
	maintURL.Path = "/postgres"
	maint, err := sql.Open("pgx", maintURL.String())
	if err != nil {
		return nil, err
	}
	defer maint.Close()
	name := strings.TrimPrefix(u.Path, "/")
	if _, err := maint.ExecContext(ctx, `CREATE DATABASE "`+name+`"`); err != nil {
		return nil, err
	}
	db, err := sql.Open("pgx", u.String())
	if err != nil {
		return nil, err
	}
	return db, db.PingContext(ctx)
}
