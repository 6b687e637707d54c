// Command dockerpg starts a PostgreSQL container with testcontainers-go for tests/pgtest,
// prints its superuser URL as one line on stdout, and removes the container when its stdin
// closes or it receives SIGTERM or SIGINT.
//
// It is a module of its own so that testcontainers-go, the Docker client and OpenTelemetry,
// which only the tests' Docker path needs, stay out of the module graph of every program
// that imports skiplock. tests/pgtest runs it with `go run .` in this directory when a
// Docker engine answers. If this process is killed outright, testcontainers' reaper
// container (Ryuk) removes the PostgreSQL container once the connection to it drops.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// imageDefault is the server image: the oldest major version skiplock supports in CI.
const imageDefault = "postgres:15"

func main() {
	image := flag.String("image", imageDefault, "PostgreSQL server image to run")
	flag.Parse()
	if err := run(*image, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "dockerpg: %v\n", err)
		os.Exit(1)
	}
}

// run starts the container, writes its URL to out, and waits for in to close or for a
// signal before removing the container.
func run(image string, in io.Reader, out io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	url, terminate, err := startContainer(startCtx, image)
	if err != nil {
		return err
	}
	defer func() {
		if err := terminate(); err != nil {
			fmt.Fprintf(os.Stderr, "dockerpg: failed to remove container: %v\n", err)
		}
	}()
	if _, err := fmt.Fprintln(out, url); err != nil {
		return fmt.Errorf("failed to print the URL: %w", err)
	}

	// The parent holds our stdin open for as long as it uses the server.
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, in)
		close(closed)
	}()
	select {
	case <-closed:
	case <-ctx.Done():
	}
	return nil
}

// startContainer runs image and returns its superuser URL and a function that removes the
// container.
func startContainer(ctx context.Context, image string) (string, func() error, error) {
	ctr, err := testcontainers.Run(ctx, image,
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
	terminate := func() error {
		if ctr == nil {
			return nil
		}
		return testcontainers.TerminateContainer(ctr)
	}
	if err != nil {
		_ = terminate()
		return "", nil, fmt.Errorf("failed to start container: %w", err)
	}
	endpoint, err := ctr.PortEndpoint(ctx, "5432/tcp", "")
	if err != nil {
		_ = terminate()
		return "", nil, fmt.Errorf("failed to find container's port: %w", err)
	}
	return "postgres://postgres@" + endpoint + "/postgres?sslmode=disable", terminate, nil
}
