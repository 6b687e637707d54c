package main

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// The exit codes, documented in `skiplock help` and docs/cli.md.
const (
	exitOK       = 0
	exitFailed   = 1
	exitUsage    = 2
	exitNotFound = 3
	exitTimeout  = 4
)

// exitError carries the exit code of an error that is not a plain failure.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErrorf is a bad command line: an unknown flag or command, a missing or malformed
// argument (exit code 2).
func usageErrorf(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// notFoundErrorf is a job, schedule or command that does not exist (exit code 3).
func notFoundErrorf(format string, args ...any) error {
	return &exitError{code: exitNotFound, err: fmt.Errorf(format, args...)}
}

// exitCode maps an error to the process's exit code. The SQL functions refuse a bad
// argument with SQLSTATE 22023 naming the parameter, and PostgreSQL refuses a value of the
// wrong type (an unknown state, malformed JSON or timestamp) with class 22: both are the
// operator's input, so they exit 2 like a bad flag.
func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && len(pgErr.Code) == 5 && pgErr.Code[:2] == "22" {
		return exitUsage
	}
	return exitFailed
}
