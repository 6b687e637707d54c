//go:build !unix

package pglocal

import (
	"errors"
	"syscall"
)

// On systems without Unix credentials the server runs as the current user
// and has no watchdog.

type runAsUser struct {
	name     string
	uid, gid int
}

func lookupRunAsUser(string) (*runAsUser, error) {
	return nil, errors.New("failed to find a user to run PostgreSQL as: not supported on this system")
}

func sysProcAttr(*runAsUser, bool) *syscall.SysProcAttr { return nil }

// pidAlive assumes the process lives; the postmaster's own check decides.
func pidAlive(int) bool { return true }

func killPID(int) error { return errors.New("not supported on this system") }

type watchdog struct{}

func startWatchdog(string, string, string, *runAsUser) (*watchdog, error) { return nil, nil }

func startPgBouncerWatchdog(int, string, *runAsUser) (*watchdog, error) { return nil, nil }

func (*watchdog) stop() {}
