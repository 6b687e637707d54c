package pgtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// containerImage is the server image used when a Docker engine is present;
// the oldest major version skiplock supports in CI.
const containerImage = "postgres:15"

// dockerPingTimeout bounds the check for a Docker engine. A docker CLI
// without a daemon, or a dead socket, must not delay every test run.
const dockerPingTimeout = 2 * time.Second

// dockerReachable reports whether a Docker engine answers at DOCKER_HOST or
// the default socket. Any HTTP answer counts: a TLS-only engine answers a
// plain request with an error, and testcontainers knows how to speak TLS.
func dockerReachable() bool {
	network, addr := "unix", "/var/run/docker.sock"
	if host := os.Getenv("DOCKER_HOST"); host != "" {
		scheme, rest, ok := strings.Cut(host, "://")
		if !ok || (scheme != "unix" && scheme != "tcp") {
			return false // ssh:// and npipe:// are left to DATABASE_URL users
		}
		network, addr = scheme, rest
	}
	if network == "unix" {
		if _, err := os.Stat(addr); err != nil {
			return false
		}
	}
	client := &http.Client{
		Timeout: dockerPingTimeout,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			},
		},
	}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://docker/_ping")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}

// startContainer runs the dockerpg program (its own module, so that testcontainers-go
// stays out of skiplock's module graph) with `go run`, and returns the superuser URL it
// prints and a function that makes it remove the container. The program removes the
// container when its stdin closes, so a test binary that dies without cleaning up leaves
// nothing behind either.
func startContainer(ctx context.Context) (string, func() error, error) {
	dir, err := dockerpgDir()
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command("go", "run", ".", "-image", containerImage)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off") // its own go.mod, whatever workspace is around
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, fmt.Errorf("failed to run dockerpg: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, fmt.Errorf("failed to run dockerpg: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("failed to run go run in %s: %w", dir, err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- strings.TrimSpace(line)
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	stop := func() error {
		_ = stdin.Close()
		select {
		case err := <-exited:
			if err != nil {
				return fmt.Errorf("dockerpg: %w\n%s", err, stderr.String())
			}
			return nil
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			return fmt.Errorf("dockerpg did not remove its container within a minute:\n%s", stderr.String())
		}
	}
	select {
	case url := <-lines:
		if url == "" {
			_ = stop()
			return "", nil, fmt.Errorf("dockerpg printed no URL:\n%s", stderr.String())
		}
		return url, stop, nil
	case <-ctx.Done():
		_ = stop()
		return "", nil, fmt.Errorf("failed to start container: %w\n%s", ctx.Err(), stderr.String())
	}
}

// dockerpgDir is the directory of the dockerpg module, next to this file. Tests run from
// a source tree, so the path compiled into the test binary exists.
func dockerpgDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("failed to find the source directory of tests/pgtest")
	}
	dir := filepath.Join(filepath.Dir(file), "dockerpg")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("failed to find the dockerpg module: %w", err)
	}
	return dir, nil
}

// lockedBuffer collects a child's stderr for error messages.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
