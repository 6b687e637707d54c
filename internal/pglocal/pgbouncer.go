package pglocal

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrPgBouncerNotFound is returned by FindPgBouncer and StartPgBouncer when no pgbouncer
// binary exists. Its message says how to install one.
var ErrPgBouncerNotFound = errors.New("pgbouncer not found: install it with " +
	"`sudo apt-get install pgbouncer` (or set PGBOUNCER to the binary); scripts/test installs it when run as root")

// PgBouncerPoolSizeDefault is the number of server connections the pgbouncer of
// StartPgBouncer keeps per database and user: small, so that clients really share them.
const PgBouncerPoolSizeDefault = 5

// FindPgBouncer returns the path of the pgbouncer binary: the PGBOUNCER environment
// variable if set, else pgbouncer on PATH, else /usr/sbin/pgbouncer (Debian puts it there,
// outside an ordinary user's PATH). Otherwise it returns ErrPgBouncerNotFound.
func FindPgBouncer() (string, error) {
	if p := os.Getenv("PGBOUNCER"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("failed to use PGBOUNCER: %w", err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/pgbouncer", "/usr/local/sbin/pgbouncer", "/usr/local/bin/pgbouncer"} {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", ErrPgBouncerNotFound
}

// PgBouncerOptions configures StartPgBouncer. Only the upstream server's Port is required.
type PgBouncerOptions struct {
	// Host and Port are the PostgreSQL server's address. Host defaults to 127.0.0.1.
	Host string
	Port int

	// User and Password are what pgbouncer logs in to the server with, for every
	// database. Clients must connect to pgbouncer as the same User; pgbouncer does not
	// check their password (auth_type = trust). User defaults to "postgres"; Password to
	// none.
	User     string
	Password string

	// PoolMode is pgbouncer's pool_mode: "transaction", "session" or "statement".
	// Defaults to "transaction", the mode in which a client gets a server connection only
	// for the length of each transaction.
	PoolMode string

	// PoolSize is default_pool_size, the server connections per database and user.
	// Defaults to PgBouncerPoolSizeDefault.
	PoolSize int

	// Settings are extra or replacing [pgbouncer] settings of the ini file, e.g.
	// {"server_round_robin": "1"}. The defaults are listen_addr = 127.0.0.1, a free
	// listen_port, no Unix socket, auth_type = trust, max_client_conn = 500,
	// ignore_startup_parameters = extra_float_digits and admin_users = User.
	Settings map[string]string

	// Logf receives one line per step (start, stop). Nil discards them.
	Logf func(format string, args ...any)

	// OSUser is the operating system user that runs pgbouncer when the process is root
	// (pgbouncer refuses to run as root). Empty means "postgres" if that user exists,
	// else "nobody". It is ignored when the process is not root.
	OSUser string

	// StartTimeout bounds the wait for pgbouncer to accept connections, and for it to
	// exit on Close. Zero means StartTimeoutDefault.
	StartTimeout time.Duration
}

// PgBouncer is a pgbouncer process started by StartPgBouncer. Every database name a client
// asks for is forwarded to the database of the same name on the upstream server.
type PgBouncer struct {
	bin     string
	version string
	tmpDir  string
	logPath string
	user    string
	port    int
	timeout time.Duration
	logf    func(format string, args ...any)

	cmd     *exec.Cmd
	exited  chan struct{} // closed once cmd has been waited for
	waitErr error         // cmd.Wait's result; read after exited is closed
	wd      *watchdog     // the watchdog, if any

	closeOnce sync.Once
	closeErr  error
}

// pgbouncerSettingRE matches pgbouncer setting names.
var pgbouncerSettingRE = regexp.MustCompile(`^[a-z_]+$`)

// StartPgBouncer writes a pgbouncer configuration into a fresh temporary directory, starts
// pgbouncer on a free loopback port and waits until it accepts connections. The caller
// must Close it. Like Start's servers it has a watchdog that stops it if this process dies
// without closing it.
func StartPgBouncer(ctx context.Context, opts *PgBouncerOptions) (*PgBouncer, error) {
	if opts == nil {
		opts = &PgBouncerOptions{}
	}
	if opts.Port <= 0 || opts.Port > 65535 {
		return nil, fmt.Errorf("invalid Port %d: must be 1 to 65535", opts.Port)
	}
	switch opts.PoolMode {
	case "", "transaction", "session", "statement":
	default:
		return nil, fmt.Errorf("invalid PoolMode %q: must be transaction, session or statement", opts.PoolMode)
	}
	if opts.PoolSize < 0 {
		return nil, fmt.Errorf("invalid PoolSize %d: cannot be negative", opts.PoolSize)
	}
	for name, value := range opts.Settings {
		if !pgbouncerSettingRE.MatchString(name) || strings.ContainsAny(value, "\r\n") {
			return nil, fmt.Errorf("invalid Settings entry %q = %q", name, value)
		}
	}
	if strings.ContainsAny(opts.Host+opts.User+opts.Password, "\r\n") {
		return nil, errors.New("invalid Host, User or Password: must not contain line breaks")
	}
	bin, err := FindPgBouncer()
	if err != nil {
		return nil, err
	}
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("failed to run %s --version: %w", bin, err)
	}
	version, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")

	b := &PgBouncer{
		bin:     bin,
		version: version,
		user:    opts.User,
		timeout: opts.StartTimeout,
		logf:    opts.Logf,
	}
	if b.user == "" {
		b.user = "postgres"
	}
	if b.timeout <= 0 {
		b.timeout = StartTimeoutDefault
	}
	if b.logf == nil {
		b.logf = func(string, ...any) {}
	}
	var runAs *runAsUser
	if os.Geteuid() == 0 {
		if runAs, err = lookupRunAsUser(opts.OSUser); err != nil {
			return nil, err
		}
	}
	if b.tmpDir, err = os.MkdirTemp("", "skiplock-pgbouncer-*"); err != nil {
		return nil, fmt.Errorf("failed to create temporary directory: %w", err)
	}
	b.logPath = filepath.Join(b.tmpDir, "pgbouncer.log")
	if runAs != nil {
		if err := os.Chown(b.tmpDir, runAs.uid, runAs.gid); err != nil {
			_ = os.RemoveAll(b.tmpDir)
			return nil, fmt.Errorf("failed to hand %s to user %s: %w", b.tmpDir, runAs.name, err)
		}
	}
	for attempt := 1; ; attempt++ {
		err = b.start(ctx, opts, runAs)
		if err == nil {
			return b, nil
		}
		if attempt == 5 || !errors.Is(err, errPortTaken) {
			_ = os.RemoveAll(b.tmpDir)
			return nil, err
		}
		b.logf("pglocal: port %d was taken before pgbouncer bound it; picking another", b.port)
	}
}

// start writes the configuration for a new free port and runs pgbouncer; on failure it
// leaves no process behind.
func (b *PgBouncer) start(ctx context.Context, opts *PgBouncerOptions, runAs *runAsUser) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	b.port = port
	cfgPath, err := b.writeConfig(opts, runAs)
	if err != nil {
		return err
	}
	logFile, err := os.Create(b.logPath)
	if err != nil {
		return fmt.Errorf("failed to create %s: %w", b.logPath, err)
	}
	defer logFile.Close() // the child has its own copy
	began := time.Now()
	// Not CommandContext: pgbouncer must outlive the start's context.
	cmd := exec.Command(b.bin, cfgPath)
	cmd.Dir = b.tmpDir
	cmd.Env = pgEnv()
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr(runAs, true)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("failed to start %s: %w", b.bin, err)
	}
	b.cmd = cmd
	b.exited = make(chan struct{})
	go func() {
		b.waitErr = cmd.Wait()
		close(b.exited)
	}()
	// Best effort: without a watchdog, only a process that dies unclosed leaves pgbouncer.
	b.wd, _ = startPgBouncerWatchdog(cmd.Process.Pid, b.tmpDir, runAs)

	wctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port))
	for {
		var d net.Dialer
		conn, err := d.DialContext(wctx, "tcp", addr)
		if err == nil {
			_ = conn.Close()
			b.logf("pglocal: started %s on %s in %s", b.version, addr, time.Since(began).Round(time.Millisecond))
			return nil
		}
		select {
		case <-b.exited:
			b.stopWatchdog()
			log, _ := os.ReadFile(b.logPath)
			err := fmt.Errorf("failed to start pgbouncer on port %d: %v\n%s", b.port, b.waitErr, tail(log, 20))
			if strings.Contains(string(log), "Address already in use") {
				err = fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return err
		case <-wctx.Done():
			_ = b.terminate()
			log, _ := os.ReadFile(b.logPath)
			return fmt.Errorf("failed to wait for pgbouncer to accept connections on port %d: %w\n%s",
				b.port, wctx.Err(), tail(log, 20))
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// writeConfig writes pgbouncer.ini and the auth file, and returns the ini's path.
func (b *PgBouncer) writeConfig(opts *PgBouncerOptions, runAs *runAsUser) (string, error) {
	host := opts.Host
	if host == "" {
		host = "127.0.0.1"
	}
	poolMode := opts.PoolMode
	if poolMode == "" {
		poolMode = "transaction"
	}
	poolSize := opts.PoolSize
	if poolSize == 0 {
		poolSize = PgBouncerPoolSizeDefault
	}
	authPath := filepath.Join(b.tmpDir, "userlist.txt")
	settings := map[string]string{
		"listen_addr":     "127.0.0.1",
		"listen_port":     strconv.Itoa(b.port),
		"unix_socket_dir": "",
		"pidfile":         filepath.Join(b.tmpDir, "pgbouncer.pid"),
		"auth_type":       "trust",
		"auth_file":       authPath,
		"admin_users":     b.user,
		"pool_mode":       poolMode,
		"max_client_conn": "500",
		// pgx sends none of these by default, but other clients do; search_path is
		// deliberately not ignored, since dropping it would run queries in another schema.
		"ignore_startup_parameters": "extra_float_digits",
		"default_pool_size":         strconv.Itoa(poolSize),
		"min_pool_size":             "0",
		"reserve_pool_size":         "0",
	}
	for k, v := range opts.Settings {
		settings[k] = v
	}
	names := make([]string, 0, len(settings))
	for k := range settings {
		names = append(names, k)
	}
	sort.Strings(names)

	var ini strings.Builder
	ini.WriteString("; Written by skiplock's pglocal.\n[databases]\n")
	fmt.Fprintf(&ini, "* = host=%s port=%d user=%s", iniValue(host), opts.Port, iniValue(b.user))
	if opts.Password != "" {
		fmt.Fprintf(&ini, " password=%s", iniValue(opts.Password))
	}
	ini.WriteString("\n\n[pgbouncer]\n")
	for _, k := range names {
		fmt.Fprintf(&ini, "%s = %s\n", k, settings[k])
	}
	auth := fmt.Sprintf("%q \"\"\n", b.user)
	cfgPath := filepath.Join(b.tmpDir, "pgbouncer.ini")
	for path, content := range map[string]string{cfgPath: ini.String(), authPath: auth} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			return "", fmt.Errorf("failed to write %s: %w", path, err)
		}
		if runAs != nil {
			if err := os.Chown(path, runAs.uid, runAs.gid); err != nil {
				return "", fmt.Errorf("failed to hand %s to user %s: %w", path, runAs.name, err)
			}
		}
	}
	return cfgPath, nil
}

// iniValue quotes a libpq-style value of a [databases] entry.
func iniValue(s string) string {
	if s != "" && !strings.ContainsAny(s, " '\\") {
		return s
	}
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// URL is a connection URL for dbname through pgbouncer, as the upstream user, with the
// given extra query parameters (e.g. "default_query_exec_mode=exec").
func (b *PgBouncer) URL(dbname string, params ...string) string {
	q := "sslmode=disable"
	for _, p := range params {
		q += "&" + p
	}
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(b.user),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port)),
		Path:     "/" + dbname,
		RawQuery: q,
	}
	return u.String()
}

// Port is the TCP port pgbouncer listens on, on 127.0.0.1.
func (b *PgBouncer) Port() int { return b.port }

// Version is pgbouncer's version line, e.g. "PgBouncer 1.18.0".
func (b *PgBouncer) Version() string { return b.version }

// Log returns what pgbouncer has logged so far.
func (b *PgBouncer) Log() string {
	log, _ := os.ReadFile(b.logPath)
	return string(log)
}

// Close stops pgbouncer (immediate shutdown: client connections are closed) and removes
// its directory. It is safe to call more than once.
func (b *PgBouncer) Close() error {
	b.closeOnce.Do(func() {
		var errs []error
		if err := b.terminate(); err != nil {
			errs = append(errs, err)
		} else {
			b.logf("pglocal: stopped pgbouncer on port %d", b.port)
		}
		if err := os.RemoveAll(b.tmpDir); err != nil {
			errs = append(errs, fmt.Errorf("failed to remove %s: %w", b.tmpDir, err))
		}
		b.closeErr = errors.Join(errs...)
	})
	return b.closeErr
}

// terminate sends SIGTERM (pgbouncer's immediate shutdown), waits for the process, then
// stops the watchdog.
func (b *PgBouncer) terminate() error {
	if b.cmd == nil {
		return nil
	}
	select {
	case <-b.exited:
		b.stopWatchdog()
		return nil
	default:
	}
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		_ = b.cmd.Process.Kill()
	}
	select {
	case <-b.exited:
	case <-time.After(b.timeout):
		_ = b.cmd.Process.Kill()
		<-b.exited
	}
	b.stopWatchdog()
	return nil
}

func (b *PgBouncer) stopWatchdog() {
	if b.wd != nil {
		b.wd.stop()
		b.wd = nil
	}
}

// pgbouncerWatchdogScript waits for the process that started pgbouncer to exit, then
// stops pgbouncer and removes its directory. It gives up as soon as pgbouncer itself is
// gone, so that it never signals a process that reused pgbouncer's id. See watchdogScript.
const pgbouncerWatchdogScript = `
parent=$1 child=$2 dir=$3
if [ -d /proc/self ]; then
	alive() { [ -d "/proc/$1" ]; }
else
	alive() { kill -0 "$1" 2>/dev/null; }
fi
while alive "$parent"; do
	alive "$child" || exit 0
	sleep 1
done
kill -TERM "$child" 2>/dev/null
rm -rf "$dir"
`
