//go:build unix

package pglocal

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"
)

// runAsUser is the unprivileged user that runs PostgreSQL when we are root.
type runAsUser struct {
	name     string
	uid, gid int
}

// lookupRunAsUser resolves Options.User, defaulting to postgres, then nobody.
func lookupRunAsUser(name string) (*runAsUser, error) {
	candidates := []string{name}
	if name == "" {
		candidates = []string{"postgres", "nobody"}
	}
	var errs []error
	for _, n := range candidates {
		u, err := user.Lookup(n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		uid, err := strconv.Atoi(u.Uid)
		if err != nil {
			return nil, fmt.Errorf("failed to parse uid of user %s: %w", n, err)
		}
		gid, err := strconv.Atoi(u.Gid)
		if err != nil {
			return nil, fmt.Errorf("failed to parse gid of user %s: %w", n, err)
		}
		return &runAsUser{name: n, uid: uid, gid: gid}, nil
	}
	return nil, fmt.Errorf("failed to find a user to run PostgreSQL as (it refuses to run as root): %w", errors.Join(errs...))
}

// sysProcAttr drops to u, if any, and optionally starts a new session so
// that terminal signals meant for the test binary do not reach the process.
func sysProcAttr(u *runAsUser, setsid bool) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setsid: setsid}
	if u != nil {
		attr.Credential = &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid)}
	}
	return attr
}

// pidAlive reports whether pid is a live process. A zombie is dead: in
// containers whose init reaps slowly, a killed postmaster can stay a zombie
// for a while, and kill(pid, 0), which pg_ctl and the postmaster's lock file
// check rely on, still reports it alive.
func pidAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err == nil {
		// The state follows the parenthesised command name.
		_, state, _ := strings.Cut(string(b), ") ")
		return !strings.HasPrefix(state, "Z") && !strings.HasPrefix(state, "X")
	}
	if _, err := os.Stat("/proc/self"); err == nil {
		return false
	}
	err = syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// killPID sends SIGKILL to pid.
func killPID(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// watchdogScript waits for the process that started the server to exit,
// then stops the server and removes its directory. /proc is preferred to
// kill -0 because the watchdog runs as the postgres user and may not signal
// a root parent.
const watchdogScript = `
parent=$1 pgctl=$2 data=$3 dir=$4
if [ -d /proc/self ]; then
	alive() { [ -d "/proc/$parent" ]; }
else
	alive() { kill -0 "$parent" 2>/dev/null; }
fi
while alive; do sleep 1; done
if [ -f "$data/postmaster.pid" ]; then
	"$pgctl" stop -D "$data" -m immediate -w -t 30 >/dev/null 2>&1
fi
rm -rf "$dir"
`

// watchdog runs watchdogScript or pgbouncerWatchdogScript in a session of its own.
type watchdog struct {
	cmd *exec.Cmd
}

func startWatchdog(pgCtl, dataDir, dir string, u *runAsUser) (*watchdog, error) {
	return startScript(watchdogScript, "pglocal-watchdog", u, pgCtl, dataDir, dir)
}

// startPgBouncerWatchdog starts pgbouncerWatchdogScript for child, as the user running
// pgbouncer so that it may signal it.
func startPgBouncerWatchdog(child int, dir string, u *runAsUser) (*watchdog, error) {
	return startScript(pgbouncerWatchdogScript, "pgbouncer-watchdog", u, strconv.Itoa(child), dir)
}

// startScript runs a watchdog script in a session of its own, with this process's id as
// $1 and args after it.
func startScript(script, name string, u *runAsUser, args ...string) (*watchdog, error) {
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, name, strconv.Itoa(os.Getpid())}, args...)...)
	cmd.Dir = "/"
	cmd.Env = pgEnv()
	cmd.SysProcAttr = sysProcAttr(u, true)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("failed to start watchdog: %w", err)
	}
	return &watchdog{cmd: cmd}, nil
}

// stop kills the watchdog's process group (the shell and its sleep): it has
// its own session, so the group id is its pid.
func (w *watchdog) stop() {
	_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
	_ = w.cmd.Wait()
}
