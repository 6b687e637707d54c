package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
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
		{"BadAllowedHost", "", "", []string{"--allowed-hosts", "jobs.example.com,http://x/"}, `--allowed-hosts: ui: AllowedHosts: "http://x/" is not a host name`},
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

// startUI runs `skiplock ui` with args (and --database-url) until the test ends; it returns
// the bound address and the command's stderr.
func startUI(t *testing.T, dbURL string, args ...string) (string, *bytes.Buffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	var stdout, stderr bytes.Buffer
	go func() {
		done <- runUI(ctx, append(args, "--database-url", dbURL), os.Getenv, &stdout, &stderr, ready)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("skiplock ui did not stop within 10s of its context ending")
		}
	})
	select {
	case addr := <-ready:
		return addr, &stderr
	case err := <-done:
		t.Fatalf("skiplock ui stopped: %v\n%s", err, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("skiplock ui did not start listening within 30s")
	}
	return "", nil
}

// getWithHost requests path of the server at addr with the Host header host.
func getWithHost(t *testing.T, addr, host, path string, auth bool) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
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

// TestUIAllowedHosts: `skiplock ui` answers the dashboard and /metrics only for IP
// addresses, localhost, --addr's name and --allowed-hosts (421 before Basic auth asks for
// credentials, so a rebound page cannot make the browser prompt), and /healthz for any Host.
func TestUIAllowedHosts(t *testing.T) {
	db := pgtest.NewTestDB(t)
	pgtest.MustExec(t, db.Conn, `SELECT jobs_enqueue('send', '{}', 'mail')`)

	t.Run("Loopback", func(t *testing.T) {
		addr, _ := startUI(t, db.URL, "--addr", "127.0.0.1:0", "--allowed-hosts", "jobs.example.com, ops.example.com:443")
		_, port, _ := net.SplitHostPort(addr)
		for _, path := range []string{"/", "/metrics", "/dead", "/nosuch"} {
			code, body := getWithHost(t, addr, "rebind.attacker.example:"+port, path, false)
			if code != http.StatusMisdirectedRequest || !strings.Contains(body, "--allowed-hosts") {
				t.Errorf("GET %s with Host rebind.attacker.example: %d %q, want 421 saying how to allow a name", path, code, body)
			}
		}
		if code, body := getWithHost(t, addr, "rebind.attacker.example", "/healthz", false); code != http.StatusOK || body != "ok\n" {
			t.Errorf("GET /healthz with any Host: %d %q, want 200 ok", code, body)
		}
		for _, host := range []string{addr, "localhost:" + port, "[::1]:" + port, "jobs.example.com:" + port, "OPS.example.com"} {
			for _, path := range []string{"/", "/metrics"} {
				if code, _ := getWithHost(t, addr, host, path, false); code != http.StatusOK {
					t.Errorf("GET %s with Host %s: %d, want 200", path, host, code)
				}
			}
		}
	})

	// On every interface (with Basic auth, which that needs) there is no name in --addr:
	// names are answered only when listed; addresses always.
	t.Run("EveryInterface", func(t *testing.T) {
		t.Setenv(uiUserEnv, "ops")
		t.Setenv(uiPasswordEnv, "s3cret")
		addr, stderr := startUI(t, db.URL, "--addr", "0.0.0.0:0")
		_, port, _ := net.SplitHostPort(addr)
		if !strings.Contains(stderr.String(), "requests by name get 421 unless the name is listed in --allowed-hosts") {
			t.Errorf("stderr does not warn that names must be listed: %q", stderr.String())
		}
		for _, auth := range []bool{false, true} {
			if code, _ := getWithHost(t, "127.0.0.1:"+port, "jobs.example.com:"+port, "/", auth); code != http.StatusMisdirectedRequest {
				t.Errorf("GET / with an unlisted name (credentials %v): %d, want 421 (before Basic auth)", auth, code)
			}
		}
		if code, _ := getWithHost(t, "127.0.0.1:"+port, "127.0.0.1:"+port, "/", true); code != http.StatusOK {
			t.Errorf("GET / by address: %d, want 200", code)
		}
		addr2, stderr2 := startUI(t, db.URL, "--addr", "0.0.0.0:0", "--allowed-hosts", "jobs.example.com")
		_, port2, _ := net.SplitHostPort(addr2)
		if strings.Contains(stderr2.String(), "421") {
			t.Errorf("stderr warns although --allowed-hosts is set: %q", stderr2.String())
		}
		if code, _ := getWithHost(t, "127.0.0.1:"+port2, "jobs.example.com:"+port2, "/metrics", true); code != http.StatusOK {
			t.Errorf("GET /metrics with a listed name: %d, want 200", code)
		}
	})
}

func TestUIAllowedHostsList(t *testing.T) {
	for _, tc := range []struct {
		addr, list string
		want       []string
	}{
		{"127.0.0.1:8080", "", nil},
		{"localhost:8080", "", []string{"localhost"}},
		{"dash.internal:8080", " a, b:1 ,", []string{"dash.internal", "a", "b:1"}},
		{":8080", "a", []string{"a"}},
		{"0.0.0.0:8080", "", nil},
		{"[::]:8080", "", nil},
	} {
		if got := uiAllowedHosts(tc.addr, tc.list); !slices.Equal(got, tc.want) {
			t.Errorf("uiAllowedHosts(%q, %q) = %q, want %q", tc.addr, tc.list, got, tc.want)
		}
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
