package pglocal

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// startServer starts a server for one test, skipping the test when there
// are no binaries to run one with.
func startServer(t *testing.T, opts *Options) *Server {
	t.Helper()
	if opts == nil {
		opts = &Options{}
	}
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	s, err := Start(t.Context(), opts)
	if errors.Is(err, ErrBinariesNotFound) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func queryString(t *testing.T, conn *pgx.Conn, sql string) string {
	t.Helper()
	var s string
	if err := conn.QueryRow(t.Context(), sql).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

func TestStartSettings(t *testing.T) {
	t.Parallel()
	s := startServer(t, &Options{Settings: map[string]string{
		"work_mem":         "8MB",
		"application_name": "it's quoted",
	}})
	conn := connect(t, s.URL())
	for sql, want := range map[string]string{
		"SHOW work_mem":         "8MB",
		"SHOW application_name": "it's quoted",
		"SHOW max_connections":  "300",
		"SHOW fsync":            "on",
		"SHOW listen_addresses": "127.0.0.1",
		"SELECT current_user":   "postgres",
		"SHOW server_encoding":  "UTF8",
		"SHOW lc_collate":       "C",
	} {
		if got := queryString(t, conn, sql); got != want {
			t.Errorf("%s = %q, want %q", sql, got, want)
		}
	}
	if !strings.HasPrefix(s.DataDir(), os.TempDir()) {
		t.Errorf("DataDir() = %q, want it under %q", s.DataDir(), os.TempDir())
	}
	if _, err := os.Stat(filepath.Join(s.DataDir(), "postgresql.log")); err != nil {
		t.Errorf("server log: %v", err)
	}
	want := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/other?sslmode=disable", s.Port())
	if got := s.URLFor("other"); got != want {
		t.Errorf("URLFor = %q, want %q", got, want)
	}
}

func TestStopStartKeepsData(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	ctx := t.Context()
	run := func(sql string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, s.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	count := func() int {
		t.Helper()
		conn := connect(t, s.URL())
		defer conn.Close(ctx)
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	run("CREATE TABLE t (i int)")
	run("INSERT INTO t VALUES (1)")
	pid1, err := s.PostmasterPID()
	if err != nil {
		t.Fatal(err)
	}

	// A clean stop: the server is gone, and comes back with the same port.
	port := s.Port()
	if err := s.Stop(ctx, StopFast); err != nil {
		t.Fatal(err)
	}
	if _, err := pgx.Connect(ctx, s.URL()); err == nil {
		t.Fatal("connected to a stopped server")
	}
	if _, err := s.PostmasterPID(); err == nil {
		t.Error("PostmasterPID succeeded on a stopped server")
	}
	if err := s.Stop(ctx, StopFast); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if s.Port() != port {
		t.Errorf("port changed from %d to %d", port, s.Port())
	}
	if got := count(); got != 1 {
		t.Errorf("after fast stop: %d rows, want 1", got)
	}

	// An immediate stop skips the shutdown checkpoint; committed rows
	// survive crash recovery.
	run("INSERT INTO t VALUES (2)")
	if err := s.Restart(ctx, StopImmediate); err != nil {
		t.Fatal(err)
	}
	if got := count(); got != 2 {
		t.Errorf("after immediate restart: %d rows, want 2", got)
	}
	pid2, err := s.PostmasterPID()
	if err != nil {
		t.Fatal(err)
	}
	if pid2 == pid1 {
		t.Errorf("postmaster pid %d did not change across restarts", pid1)
	}

	// A killed postmaster, as crash tests do it: Start must wait for its
	// orphaned backends instead of failing.
	conn := connect(t, s.URL())
	run("INSERT INTO t VALUES (3)")
	if err := s.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if pidAlive(pid2) {
		t.Fatalf("postmaster %d alive after Kill", pid2)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got := count(); got != 3 {
		t.Errorf("after SIGKILL: %d rows, want 3", got)
	}
	_ = conn.Close(ctx)

	if err := s.Stop(ctx, StopSmart); err != nil {
		t.Fatal(err)
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	dir := filepath.Dir(s.DataDir())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still exists after Close: %v", dir, err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := s.Start(t.Context()); err == nil {
		t.Error("Start after Close succeeded")
	}
}

func TestFixedPort(t *testing.T) {
	t.Parallel()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, &Options{Port: port})
	if s.Port() != port {
		t.Errorf("Port() = %d, want %d", s.Port(), port)
	}
	connect(t, s.URL())
}

func TestInvalidOptions(t *testing.T) {
	t.Parallel()
	for _, opts := range []*Options{
		{Port: -1},
		{Settings: map[string]string{"bad name": "1"}},
		{StartTimeout: -time.Second},
	} {
		if s, err := Start(t.Context(), opts); err == nil {
			_ = s.Close()
			t.Errorf("Start(%+v) succeeded", opts)
		}
	}
	var s Server
	if err := s.Stop(t.Context(), "sudden"); err == nil {
		t.Error("Stop with an unknown mode succeeded")
	}
}

func TestVersionedBinDirs(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, v := range []string{"9.6", "12", "13", "15", "100", "devel"} {
		bin := filepath.Join(root, v, "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bin, "initdb"), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A version directory without initdb is not a candidate.
	if err := os.MkdirAll(filepath.Join(root, "200", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	got := versionedBinDirs(root, "initdb")
	want := []string{
		filepath.Join(root, "100", "bin"),
		filepath.Join(root, "15", "bin"),
		filepath.Join(root, "13", "bin"),
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("versionedBinDirs = %v, want %v", got, want)
	}
}

func TestFindBinariesPGBIN(t *testing.T) {
	dir, err := FindBinaries(t.Context())
	if errors.Is(err, ErrBinariesNotFound) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}

	t.Setenv("PGBIN", dir)
	if got, err := FindBinaries(t.Context()); err != nil || got != dir {
		t.Errorf("FindBinaries with PGBIN=%s = %q, %v", dir, got, err)
	}

	// A wrong PGBIN is reported, not silently replaced by another find.
	t.Setenv("PGBIN", t.TempDir())
	if _, err := FindBinaries(t.Context()); err == nil || errors.Is(err, ErrBinariesNotFound) {
		t.Errorf("FindBinaries with an empty PGBIN: %v, want a PGBIN error", err)
	}
}

// TestWatchdog kills a process that started a server without closing it and
// checks that the watchdog stops the server and removes its directory.
func TestWatchdog(t *testing.T) {
	t.Parallel()
	if _, err := FindBinaries(t.Context()); err != nil {
		t.Skip(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestWatchdogHelper$")
	cmd.Env = append(os.Environ(), "PGLOCAL_WATCHDOG_HELPER=1")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})

	var dataDir string
	var pid int
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if n, _ := fmt.Sscanf(sc.Text(), "helper: %s %d", &dataDir, &pid); n == 2 {
			break
		}
	}
	if pid == 0 {
		t.Fatal("helper did not report its server")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	dir := filepath.Dir(dataDir)
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, statErr := os.Stat(dir)
		postmasterGone := !pidAlive(pid)
		if errors.Is(statErr, os.ErrNotExist) && postmasterGone {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("30s after its starter died: dir exists=%v, postmaster %d alive=%v",
				statErr == nil, pid, !postmasterGone)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestWatchdogHelper is the process TestWatchdog kills; it does nothing in a
// normal run.
func TestWatchdogHelper(t *testing.T) {
	if os.Getenv("PGLOCAL_WATCHDOG_HELPER") != "1" {
		t.Skip("helper process for TestWatchdog")
	}
	s, err := Start(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := s.PostmasterPID()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("helper: %s %d\n", s.DataDir(), pid)
	time.Sleep(time.Minute)
}
