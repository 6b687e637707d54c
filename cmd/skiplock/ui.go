package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skiplock/skiplock/admin"
	"github.com/skiplock/skiplock/ui"
)

// The environment variables of `skiplock ui`'s Basic auth.
const (
	uiUserEnv     = "SKIPLOCK_UI_USER"
	uiPasswordEnv = "SKIPLOCK_UI_PASSWORD"
)

const uiUsage = `usage: skiplock ui [--addr 127.0.0.1:8080] [--allowed-hosts NAME,...] [--read-only] [--database-url URL] [--schema NAME]

Serves the web dashboard (package ui) at /, the queue metrics at /metrics and a health check
at /healthz. With SKIPLOCK_UI_USER and SKIPLOCK_UI_PASSWORD set, every path but /healthz asks
for them (HTTP Basic auth; put TLS in front of it beyond localhost). Without them only a
loopback address may be bound. Every path but /healthz answers only requests whose Host is an
IP address, localhost, --addr's name or a name of --allowed-hosts (421 otherwise).

`

var uiCommand = &command{
	name:     "ui",
	synopsis: "[--addr 127.0.0.1:8080] [--allowed-hosts NAME,...] [--read-only] [--database-url URL] [--schema NAME]",
	summary:  "serve the web dashboard, /metrics and /healthz",
	help: `Serves the web dashboard (package ui; see docs/ui.md) at /, the queue metrics at /metrics
and a health check at /healthz, until interrupted (Ctrl-C or SIGTERM, exit code 0). With
SKIPLOCK_UI_USER and SKIPLOCK_UI_PASSWORD set, every path but /healthz asks for them (HTTP
Basic auth; put TLS in front of it beyond localhost); without them only a loopback address may
be bound. --read-only shows everything and changes nothing.

Every path but /healthz answers only requests whose Host header is an IP address, localhost (or
a name under .localhost), the name in --addr, or a name listed in --allowed-hosts; any other
Host gets 421 Misdirected Request. This stops DNS rebinding: a web page of a name its owner
points at this machine's address could otherwise read the dashboard and post its forms as
same-origin. With --addr :8080 or 0.0.0.0:8080 there is no name in --addr: list every name the
dashboard is reached by (--allowed-hosts jobs.example.com,jobs); a reverse proxy must pass one
of them (or an address) as the Host. --allowed-hosts '*' answers every Host (only when
something in front of it checks the Host).

Flags: --addr (default 127.0.0.1:8080), --allowed-hosts (comma-separated names, with or without
:port), --read-only, --database-url (then DATABASE_URL, then the PG* variables), --schema.
`,
	runRaw: func(ctx context.Context, e *env, args []string) error {
		return runUI(ctx, args, e.getenv, e.stdout, e.stderr, nil)
	},
}

// runUI is `skiplock ui`: it serves until ctx is done (SIGINT, SIGTERM), then shuts down.
// getenv reads the environment (os.Getenv). ready, when not nil, gets the bound address once
// the server listens (for tests).
func runUI(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, ready chan<- string) error {
	fs := flag.NewFlagSet("skiplock ui", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, uiUsage)
		fs.PrintDefaults()
	}
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on")
	allowedHosts := fs.String("allowed-hosts", "", "comma-separated names the dashboard answers for besides IP addresses, localhost and --addr's name ('*': any)")
	readOnly := fs.Bool("read-only", false, "show everything, change nothing (no forms; POSTs get 403)")
	dbURL := fs.String("database-url", getenv("DATABASE_URL"), "PostgreSQL connection URL (default $DATABASE_URL, else the PG* variables)")
	schema := fs.String("schema", "", "schema skiplock is installed in (default: the connection's search_path)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageErrorf("ui: %v", err)
	}
	if fs.NArg() > 0 {
		return usageErrorf("ui: unexpected argument %q", fs.Arg(0))
	}
	user, password := getenv(uiUserEnv), getenv(uiPasswordEnv)
	if (user == "") != (password == "") {
		return usageErrorf("ui: set both %s and %s, or neither", uiUserEnv, uiPasswordEnv)
	}
	loopback, err := isLoopback(*addr)
	if err != nil {
		return usageErrorf("ui: --addr %q: %w", *addr, err)
	}
	if !loopback && user == "" {
		return usageErrorf("ui: --addr %s is not a loopback address: set %s and %s to require Basic auth", *addr, uiUserEnv, uiPasswordEnv)
	}
	hosts := uiAllowedHosts(*addr, *allowedHosts)
	if _, err := ui.RequireAllowedHost(hosts, http.NotFoundHandler()); err != nil {
		return usageErrorf("ui: --allowed-hosts: %v", err)
	}

	// An empty URL makes pgx read the PG* variables (PGHOST, PGDATABASE, ...).
	cfg, err := pgxpool.ParseConfig(*dbURL)
	if err != nil {
		return fmt.Errorf("ui: --database-url: %w", err)
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("ui: failed to connect: %w", err)
	}
	defer pool.Close()
	pingCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = pool.Ping(pingCtx)
	cancel()
	if err != nil {
		return fmt.Errorf("ui: failed to connect: %w", err)
	}

	logger := slog.New(slog.NewTextHandler(stderr, nil))
	dashboard, err := ui.New(pool, &ui.Options{Schema: *schema, ReadOnly: *readOnly, Logger: logger, AllowedHosts: hosts})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/", dashboard)
	mux.Handle("GET /metrics", admin.New(pool, &admin.Options{Schema: *schema}).MetricsHandler())
	var root http.Handler = mux
	if user != "" {
		root = basicAuth(mux, user, password)
	}
	// Before Basic auth, so that a page of a rebound name cannot even make the browser ask
	// for the credentials; around /metrics too, whose queue names and counts such a page
	// could otherwise read.
	if root, err = ui.RequireAllowedHost(hosts, root); err != nil {
		return err
	}
	top := http.NewServeMux()
	top.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		pingCtx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := pool.Ping(pingCtx); err != nil {
			http.Error(w, "database unreachable", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	top.Handle("/", root)

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("ui: %w", err)
	}
	// A name such as localhost is checked by what it bound: a resolver that maps it
	// elsewhere must not expose a dashboard without credentials.
	if tcp, ok := ln.Addr().(*net.TCPAddr); user == "" && (!ok || !tcp.IP.IsLoopback()) {
		_ = ln.Close()
		return usageErrorf("ui: --addr %s bound %s, which is not a loopback address: set %s and %s to require Basic auth", *addr, ln.Addr(), uiUserEnv, uiPasswordEnv)
	}
	if host, _, _ := net.SplitHostPort(*addr); (host == "" || net.ParseIP(host).IsUnspecified()) && *allowedHosts == "" {
		fmt.Fprintf(stderr, "skiplock ui: listening on every interface: requests by name get 421 unless the name is listed in --allowed-hosts (IP addresses and localhost are answered)\n")
	}
	srv := &http.Server{Handler: top, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	samplerCtx, stopSampler := context.WithCancel(ctx)
	defer stopSampler()
	go func() { _ = dashboard.RunSampler(samplerCtx, 0) }()
	fmt.Fprintf(stdout, "skiplock ui: serving http://%s/%s\n", ln.Addr(), map[bool]string{true: " (read-only)"}[*readOnly])
	if ready != nil {
		ready <- ln.Addr().String()
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("ui: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("ui: failed to shut down: %w", err)
	}
	return nil
}

// uiAllowedHosts is the Host allow-list of `skiplock ui`: --addr's host when it is a name,
// and the entries of --allowed-hosts (IP addresses and localhost are always answered).
func uiAllowedHosts(addr, list string) []string {
	var hosts []string
	if host, _, err := net.SplitHostPort(addr); err == nil && host != "" && net.ParseIP(host) == nil {
		hosts = append(hosts, host)
	}
	for _, h := range strings.Split(list, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// isLoopback reports whether addr's host binds only loopback: localhost or a loopback IP.
// An empty host (":8080") binds every interface.
func isLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	if host == "localhost" {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}

// basicAuth asks for user and password on every request (compared in constant time).
func basicAuth(next http.Handler, user, password string) http.Handler {
	wantUser, wantPassword := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(password))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		gotUser, gotPassword := sha256.Sum256([]byte(u)), sha256.Sum256([]byte(p))
		if !ok || subtle.ConstantTimeCompare(gotUser[:], wantUser[:])&subtle.ConstantTimeCompare(gotPassword[:], wantPassword[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="skiplock", charset="UTF-8"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
