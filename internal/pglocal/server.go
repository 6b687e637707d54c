package pglocal

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	"time"
)

// StartTimeoutDefault is how long pg_ctl waits for the server to accept
// connections, or to shut down, before giving up.
const StartTimeoutDefault = 60 * time.Second

// StopMode is a pg_ctl shutdown mode.
type StopMode string

const (
	// StopSmart waits for every client to disconnect, then shuts down cleanly.
	StopSmart StopMode = "smart"
	// StopFast disconnects clients, rolls back their transactions and shuts
	// down cleanly.
	StopFast StopMode = "fast"
	// StopImmediate kills every server process without a shutdown
	// checkpoint, as a crash would; the next start runs crash recovery.
	StopImmediate StopMode = "immediate"
)

// Options configures Start. A nil *Options is the same as a zero Options.
type Options struct {
	// BinDir is the directory holding initdb, pg_ctl and postgres. Empty
	// means the one FindBinaries returns.
	BinDir string

	// Port is the TCP port the server listens on, on 127.0.0.1 only. Zero
	// picks a free port; if another process takes it before the server binds
	// it, Start picks again.
	Port int

	// Settings are extra postgresql.conf settings, written after the
	// defaults and so able to replace them, e.g. {"fsync": "off"}. Values are
	// quoted for postgresql.conf by Start. The defaults are
	// listen_addresses = '127.0.0.1', max_connections = 300, a Unix socket
	// in the server's temporary directory, and PostgreSQL's own defaults for
	// the rest, so fsync stays on: a benchmark must not measure a server that
	// is faster than any real one.
	Settings map[string]string

	// Logf receives one line per step (initdb, start, stop). Nil discards
	// them.
	Logf func(format string, args ...any)

	// User is the operating system user that runs initdb and the server
	// when the process is root. Empty means "postgres" if that user exists,
	// else "nobody". It is ignored when the process is not root.
	User string

	// StartTimeout bounds each pg_ctl start and stop. Zero means
	// StartTimeoutDefault.
	StartTimeout time.Duration
}

// Server is a PostgreSQL cluster started by Start. Its methods are safe for
// concurrent use, though starting and stopping it from two goroutines at once
// is rarely what a test means.
type Server struct {
	binDir  string
	tmpDir  string // removed by Close; holds dataDir and the Unix socket
	dataDir string
	logPath string
	timeout time.Duration
	logf    func(format string, args ...any)
	runAs   *runAsUser // nil when not root

	mu       sync.Mutex
	port     int
	watchdog *watchdog
	closed   bool
}

// Start creates a new cluster in a fresh temporary directory and starts it.
// The caller must Close the server.
func Start(ctx context.Context, opts *Options) (*Server, error) {
	if opts == nil {
		opts = &Options{}
	}
	for name := range opts.Settings {
		if !settingNameRE.MatchString(name) {
			return nil, fmt.Errorf("invalid Settings name %q", name)
		}
	}
	if opts.Port < 0 || opts.Port > 65535 {
		return nil, fmt.Errorf("invalid Port %d: must be 0 to 65535", opts.Port)
	}
	if opts.StartTimeout < 0 {
		return nil, fmt.Errorf("invalid StartTimeout %s: cannot be negative", opts.StartTimeout)
	}

	binDir := opts.BinDir
	if binDir == "" {
		var err error
		if binDir, err = FindBinaries(ctx); err != nil {
			return nil, err
		}
	}

	s := &Server{
		binDir:  binDir,
		timeout: opts.StartTimeout,
		logf:    opts.Logf,
		port:    opts.Port,
	}
	if s.timeout == 0 {
		s.timeout = StartTimeoutDefault
	}
	if s.logf == nil {
		s.logf = func(string, ...any) {}
	}
	if os.Geteuid() == 0 {
		u, err := lookupRunAsUser(opts.User)
		if err != nil {
			return nil, err
		}
		s.runAs = u
	}

	if err := s.create(ctx, opts); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// create does Start's work after the options are settled; Start closes the
// server if it fails, so it need not clean up after itself.
func (s *Server) create(ctx context.Context, opts *Options) error {
	tmpDir, err := os.MkdirTemp("", "skiplock-pg-*")
	if err != nil {
		return fmt.Errorf("failed to create temporary directory: %w", err)
	}
	s.tmpDir = tmpDir
	s.dataDir = filepath.Join(tmpDir, "data")
	s.logPath = filepath.Join(s.dataDir, "postgresql.log")
	if s.runAs != nil {
		if err := os.Chown(tmpDir, s.runAs.uid, s.runAs.gid); err != nil {
			return fmt.Errorf("failed to hand %s to user %s: %w", tmpDir, s.runAs.name, err)
		}
	}

	// Arm the watchdog before anything that could leave a server behind.
	wd, err := startWatchdog(s.pgCtl(), s.dataDir, s.tmpDir, s.runAs)
	if err != nil {
		return err
	}
	s.watchdog = wd

	began := time.Now()
	initdb := s.command(ctx, "initdb", "-D", s.dataDir, "-A", "trust", "-U", "postgres",
		"--no-sync", "-E", "UTF8", "--locale=C")
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("failed to run initdb: %w\n%s", err, tail(out, 20))
	}
	s.logf("pglocal: initdb %s took %s", s.dataDir, time.Since(began).Round(time.Millisecond))

	// Our settings live in their own file so that a port change on retry
	// rewrites it whole instead of editing postgresql.conf.
	conf, err := os.OpenFile(filepath.Join(s.dataDir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("failed to open postgresql.conf: %w", err)
	}
	_, err = io.WriteString(conf, "\n# Added by skiplock's pglocal.\ninclude 'pglocal.conf'\n")
	if cerr := conf.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("failed to write postgresql.conf: %w", err)
	}

	pickPort := s.port == 0
	for attempt := 1; ; attempt++ {
		if pickPort {
			if s.port, err = freePort(); err != nil {
				return err
			}
		}
		if err := s.writeConf(opts.Settings); err != nil {
			return err
		}
		err = s.Start(ctx)
		if err == nil || !pickPort || attempt == 5 || !errors.Is(err, errPortTaken) {
			return err
		}
		s.logf("pglocal: port %d was taken before the server bound it; picking another", s.port)
	}
}

// settingNameRE matches PostgreSQL parameter names, including custom ones
// such as "auto_explain.log_min_duration".
var settingNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`)

// writeConf writes pglocal.conf: the defaults, then the caller's settings.
func (s *Server) writeConf(settings map[string]string) error {
	// A Unix socket path longer than about 107 bytes cannot be bound; with a
	// long TMPDIR, fall back to TCP only rather than fail to start.
	socketDir := s.tmpDir
	if len(filepath.Join(socketDir, ".s.PGSQL.65535")) > 100 {
		socketDir = ""
	}
	all := map[string]string{
		"listen_addresses":        "127.0.0.1",
		"port":                    strconv.Itoa(s.port),
		"unix_socket_directories": socketDir,
		"max_connections":         "300",
	}
	for k, v := range settings {
		all[k] = v
	}
	names := make([]string, 0, len(all))
	for k := range all {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		fmt.Fprintf(&b, "%s = '%s'\n", k, strings.ReplaceAll(all[k], "'", "''"))
	}
	path := filepath.Join(s.dataDir, "pglocal.conf")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("failed to write %s: %w", path, err)
	}
	if s.runAs != nil {
		if err := os.Chown(path, s.runAs.uid, s.runAs.gid); err != nil {
			return fmt.Errorf("failed to hand %s to user %s: %w", path, s.runAs.name, err)
		}
	}
	return nil
}

// freePort asks the kernel for a free loopback port. The port is free only
// at the moment of asking, hence the retry in create.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("failed to find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// errPortTaken marks a start that failed because the port was in use.
var errPortTaken = errors.New("port already in use")

// errShmemInUse marks a start that failed because processes of a killed
// postmaster still hold its shared memory; they exit within moments.
var errShmemInUse = errors.New("shared memory of a previous server still in use")

// Start starts the server after Stop, on the same port and data directory.
// After an immediate stop or a killed postmaster the server runs crash
// recovery first. Start waits until the server accepts connections.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("failed to start server: server is closed")
	}
	// A postmaster killed with SIGKILL leaves its backends running for a
	// moment, and a new postmaster refuses to start beside them.
	deadline := time.Now().Add(s.timeout)
	for {
		err := s.start(ctx)
		if err == nil || !errors.Is(err, errShmemInUse) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("failed to start server: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (s *Server) start(ctx context.Context) error {
	running, err := s.running(ctx)
	if err != nil {
		return err
	}
	if running {
		return errors.New("failed to start server: it is already running")
	}
	if err := s.clearStaleLocks(); err != nil {
		return err
	}
	began := time.Now()
	logSize := fileSize(s.logPath)
	cmd := s.command(ctx, "pg_ctl", "start", "-D", s.dataDir, "-l", s.logPath,
		"-w", "-t", timeoutSeconds(s.timeout), "-s")
	out, err := cmd.CombinedOutput()
	if err != nil {
		// Only this attempt's lines: earlier attempts failed for their own
		// reasons.
		log := readFrom(s.logPath, logSize)
		err = fmt.Errorf("failed to start server on port %d: %w\n%s%s",
			s.port, err, tail(out, 10), tail(log, 30))
		switch {
		case strings.Contains(string(log), "could not bind") || strings.Contains(string(log), "Address already in use"):
			err = fmt.Errorf("%w: %w", errPortTaken, err)
		case strings.Contains(string(log), "pre-existing shared memory block"):
			err = fmt.Errorf("%w: %w", errShmemInUse, err)
		}
		return err
	}
	s.logf("pglocal: started PostgreSQL on 127.0.0.1:%d in %s", s.port, time.Since(began).Round(time.Millisecond))
	return nil
}

// Stop shuts the server down in the given mode and waits until it has
// exited. Stopping a server that is not running does nothing.
func (s *Server) Stop(ctx context.Context, mode StopMode) error {
	switch mode {
	case StopSmart, StopFast, StopImmediate:
	default:
		return fmt.Errorf("invalid stop mode %q: must be smart, fast or immediate", mode)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	return s.stop(ctx, mode)
}

func (s *Server) stop(ctx context.Context, mode StopMode) error {
	running, err := s.running(ctx)
	if err != nil || !running {
		return err
	}
	began := time.Now()
	cmd := s.command(ctx, "pg_ctl", "stop", "-D", s.dataDir, "-m", string(mode),
		"-w", "-t", timeoutSeconds(s.timeout), "-s")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("failed to stop server (%s): %w\n%s", mode, err, tail(out, 10))
	}
	s.logf("pglocal: stopped PostgreSQL (%s) in %s", mode, time.Since(began).Round(time.Millisecond))
	return nil
}

// running reports whether a postmaster is alive for the data directory.
func (s *Server) running(context.Context) (bool, error) {
	pid, err := s.PostmasterPID()
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return pidAlive(pid), nil
}

// clearStaleLocks removes the lock files of a postmaster that died without
// removing them. PostgreSQL does this itself unless the dead postmaster is a
// zombie that init has not reaped yet, which it takes for a live one.
func (s *Server) clearStaleLocks() error {
	pid, err := s.PostmasterPID()
	if err != nil || pidAlive(pid) {
		return nil
	}
	locks, _ := filepath.Glob(filepath.Join(s.tmpDir, ".s.PGSQL.*.lock"))
	for _, path := range append(locks, filepath.Join(s.dataDir, "postmaster.pid")) {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("failed to remove stale lock file: %w", err)
		}
	}
	s.logf("pglocal: removed lock files of dead postmaster %d", pid)
	return nil
}

// Kill kills the postmaster with SIGKILL, as a crash or the OOM killer
// would, and waits until it has exited. Its backends notice within moments
// and exit too; Start waits for them. Killing a server that is not running
// does nothing.
func (s *Server) Kill(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	return s.kill(ctx)
}

func (s *Server) kill(ctx context.Context) error {
	pid, err := s.PostmasterPID()
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !pidAlive(pid) {
		return nil
	}
	if err := killPID(pid); err != nil {
		return fmt.Errorf("failed to kill postmaster %d: %w", pid, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	for pidAlive(pid) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("failed to wait for killed postmaster %d: %w", pid, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	s.logf("pglocal: killed postmaster %d", pid)
	return nil
}

// Restart stops the server in the given mode, if it is running, and starts
// it again on the same port and data directory.
func (s *Server) Restart(ctx context.Context, mode StopMode) error {
	if err := s.Stop(ctx, mode); err != nil {
		return err
	}
	return s.Start(ctx)
}

// Close stops the server in immediate mode and removes its directory. It is
// safe to call more than once; calls after the first do nothing.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true

	// Close is reached from cleanups whose context is already cancelled.
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout+5*time.Second)
	defer cancel()

	var errs []error
	if s.dataDir != "" {
		if err := s.stop(ctx, StopImmediate); err != nil {
			// Whatever went wrong, a dead postmaster cannot use the files.
			if kerr := s.kill(ctx); kerr != nil {
				errs = append(errs, err, kerr)
			}
		}
	}
	// The watchdog goes only once the server is down, so that a stop which
	// failed above still has a second chance if this process dies.
	if s.watchdog != nil && len(errs) == 0 {
		s.watchdog.stop()
	}
	if s.tmpDir != "" && len(errs) == 0 {
		if err := os.RemoveAll(s.tmpDir); err != nil {
			errs = append(errs, fmt.Errorf("failed to remove %s: %w", s.tmpDir, err))
		}
	}
	return errors.Join(errs...)
}

// URL is a connection URL for the postgres database as the postgres
// superuser.
func (s *Server) URL() string { return s.URLFor("postgres") }

// URLFor is a connection URL for the named database as the postgres
// superuser.
func (s *Server) URLFor(dbname string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port())),
		Path:     "/" + dbname,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Port is the TCP port the server listens on.
func (s *Server) Port() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.port
}

// DataDir is the cluster's data directory. Its postgresql.log holds the
// server log.
func (s *Server) DataDir() string { return s.dataDir }

// PostmasterPID returns the process id recorded in postmaster.pid. It fails
// if the server was stopped cleanly; after a crash the id may be stale.
func (s *Server) PostmasterPID() (int, error) {
	b, err := os.ReadFile(filepath.Join(s.dataDir, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("failed to read postmaster.pid: %w", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return 0, fmt.Errorf("failed to parse postmaster.pid: %w", err)
	}
	return pid, nil
}

// command builds a command for one of the PostgreSQL binaries, run as the
// unprivileged user when the process is root.
func (s *Server) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(s.binDir, name), args...)
	// The user's working directory may be closed to the postgres user.
	cmd.Dir = s.tmpDir
	cmd.Env = pgEnv()
	cmd.SysProcAttr = sysProcAttr(s.runAs, false)
	return cmd
}

func (s *Server) pgCtl() string { return filepath.Join(s.binDir, "pg_ctl") }

// pgEnv is the environment for PostgreSQL programs: the process's own, less
// the PG* variables that could point them at another cluster, with messages
// in English so that log matching works.
func pgEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") || strings.HasPrefix(kv, "LC_") || strings.HasPrefix(kv, "LANG=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_ALL=C")
}

func timeoutSeconds(d time.Duration) string {
	return strconv.Itoa(int((d + time.Second - 1) / time.Second))
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// readFrom returns a file's contents from offset on, or nothing if it cannot
// be read: it only decorates errors.
func readFrom(path string, offset int64) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(f, 1<<20))
	return b
}

// tail returns the last n lines of b, each ending in a newline.
func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	out := strings.Join(lines, "\n")
	if out == "" {
		return ""
	}
	return out + "\n"
}
