package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/skiplock/skiplock/tests/pgtest"
)

func TestUIRefusesUnsafeSetups(t *testing.T) {
	for _, tc := range []struct {
		name, user, password string
		args                 []string
		want                 string
	}{
		{"AllInterfacesWithoutAuth", "", "", []string{"--addr", ":0"}, "not a loopback address: set SKIPLOCK_UI_USER and SKIPLOCK_UI_PASSWORD"},
		{"PublicIPWithoutAuth", "", "", []string{"--addr", "0.0.0.0:8080"}, "not a loopback address"},
		{"UserWithoutPassword", "ops", "", nil, "set both SKIPLOCK_UI_USER and SKIPLOCK_UI_PASSWORD, or neither"},
		{"BadAddr", "", "", []string{"--addr", "nowhere"}, `--addr "nowhere"`},
		{"StrayArgument", "", "", []string{"extra"}, `unexpected argument "extra"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(name string) string {
				switch name {
				case uiUserEnv:
					return tc.user
				case uiPasswordEnv:
					return tc.password
				}
				return ""
			}}
			err := run(t.Context(), e, append([]string{"ui"}, tc.args...))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("skiplock ui %q = %v, want an error containing %q", tc.args, err, tc.want)
			}
			if code := exitCode(err); code != exitUsage {
				t.Fatalf("skiplock ui %q exits %d, want %d (usage)", tc.args, code, exitUsage)
			}
			if stdout.Len() > 0 {
				t.Fatalf("a refused ui wrote to stdout: %s", stdout.String())
			}
		})
	}
}

// TestUIServes runs `skiplock ui` against a database: Basic auth guards the dashboard and
// /metrics but not /healthz, /metrics exposes jobs_metrics, and the server stops with its
// context.
func TestUIServes(t *testing.T) {
	db := pgtest.NewTestDB(t)
	pgtest.MustExec(t, db.Conn, `SELECT jobs_enqueue('send', '{}', 'mail')`)
	pgtest.MustExec(t, db.Conn, `SELECT jobs_pause('reports')`)
	t.Setenv(uiUserEnv, "ops")
	t.Setenv(uiPasswordEnv, "s3cret")

	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	var stdout, stderr bytes.Buffer
	go func() {
		done <- runUI(ctx, []string{"--addr", "127.0.0.1:0", "--database-url", db.URL, "--read-only"}, os.Getenv, &stdout, &stderr, ready)
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("skiplock ui stopped: %v\n%s", err, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("skiplock ui did not start listening within 30s")
	}

	get := func(path string, auth bool) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth {
			req.SetBasicAuth("ops", "s3cret")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := get("/", false); code != http.StatusUnauthorized {
		t.Errorf("GET / without credentials: %d, want 401", code)
	}
	if code, body := get("/", true); code != http.StatusOK || !strings.Contains(body, "read-only") || !strings.Contains(body, "mail") {
		t.Errorf("GET / with credentials: %d, want the read-only overview with queue mail", code)
	}
	if code, _ := get("/metrics", false); code != http.StatusUnauthorized {
		t.Errorf("GET /metrics without credentials: %d, want 401", code)
	}
	code, metrics := get("/metrics", true)
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	for _, want := range []string{
		"# TYPE skiplock_queue_ready_jobs gauge\n",
		"skiplock_queue_ready_jobs{queue=\"mail\"} 1\n",
		"skiplock_queue_paused{queue=\"reports\"} 1\n",
		"skiplock_jobs_created_total 1\n",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, metrics)
		}
	}
	checkWithPromtool(t, metrics)
	if code, body := get("/healthz", false); code != http.StatusOK || body != "ok\n" {
		t.Errorf("GET /healthz: %d %q, want 200 ok", code, body)
	}
	if !strings.Contains(stdout.String(), "serving http://"+addr+"/ (read-only)") {
		t.Errorf("stdout %q does not say where it serves", stdout.String())
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("skiplock ui after its context ended: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("skiplock ui did not stop within 10s of its context ending")
	}
}

// checkWithPromtool runs `promtool check metrics` (Debian's prometheus package) on the
// exposition; without promtool it says so and returns.
func checkWithPromtool(t *testing.T, exposition string) {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("promtool not found (Debian's prometheus package): /metrics not linted")
		return
	}
	cmd := exec.CommandContext(t.Context(), promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(exposition)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
