// Command skiplock is the operator's tool for a skiplock queue: it installs the schema, adds
// and inspects jobs, waits for them, shows and cancels workflows, retries, cancels and
// deletes jobs one by one or by filter, pauses, resumes and limits queues, manages schedules,
// shows statistics and works a queue with any program (work --exec). Every command is a thin
// call of skiplock's SQL functions (docs/sql-api.md); no queue logic lives here.
//
//	skiplock help                  the commands
//	skiplock help COMMAND          one command's flags, output and exit codes
//
// docs/cli.md holds the same text (a test keeps it in step with `skiplock help`).
//
// Exit codes: 0 ok, 1 failed, 2 usage (a bad flag, argument or value), 3 not found, 4 timed
// out (wait).
//
// The commands live in a table (commands.go), one file per family: install.go (migrate,
// sql), enqueue.go, jobs.go (list, show), wait.go, actions.go (retry, cancel, delete),
// workflow.go (workflow show, workflow cancel), queues.go (queues, pause, resume, limit),
// schedule.go, maintain.go, work.go (work --exec), stats.go; output.go and db.go hold what
// they share.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runMain(ctx, &env{
		stdin:           os.Stdin,
		stdout:          os.Stdout,
		stderr:          os.Stderr,
		getenv:          os.Getenv,
		stdinIsTerminal: isTerminal(os.Stdin),
	}, os.Args[1:])
	stop()
	os.Exit(code)
}

// env is what a command may touch of the process: its streams and environment. Tests give
// their own.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// stdinIsTerminal: a person may answer a confirmation prompt on stdin.
	stdinIsTerminal bool
}

// runMain runs one command line and returns the process's exit code, having printed any
// error to stderr.
func runMain(ctx context.Context, e *env, args []string) int {
	err := run(ctx, e, args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		// ErrHelp: a command parsing its own flags (runRaw) printed its help for -h.
		return exitOK
	}
	fmt.Fprintln(e.stderr, "skiplock:", err)
	return exitCode(err)
}

// errNotConfirmed: the operator answered no to a confirmation prompt.
var errNotConfirmed = errors.New("not confirmed; nothing changed")
