package pgtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
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

// startContainer runs containerImage and returns its superuser URL and a
// function that removes the container.
func startContainer(ctx context.Context) (string, func() error, error) {
	ctr, err := testcontainers.Run(ctx, containerImage,
		testcontainers.WithEnv(map[string]string{"POSTGRES_HOST_AUTH_METHOD": "trust"}),
		testcontainers.WithExposedPorts("5432/tcp"),
		testcontainers.WithCmd("postgres", "-c", "max_connections=300", "-c", "fsync=off"),
		// The entrypoint starts a temporary server for its init scripts and
		// stops it; only the second "ready" is the real one.
		testcontainers.WithWaitStrategyAndDeadline(3*time.Minute,
			wait.ForLog("database system is ready to accept connections").WithOccurrence(2),
			wait.ForListeningPort("5432/tcp"),
		),
	)
	stop := func() error {
		if ctr == nil {
			return nil
		}
		return testcontainers.TerminateContainer(ctr)
	}
	if err != nil {
		_ = stop()
		return "", nil, fmt.Errorf("failed to start container: %w", err)
	}
	endpoint, err := ctr.PortEndpoint(ctx, "5432/tcp", "")
	if err != nil {
		_ = stop()
		return "", nil, fmt.Errorf("failed to find container's port: %w", err)
	}
	return "postgres://postgres@" + endpoint + "/postgres?sslmode=disable", stop, nil
}
