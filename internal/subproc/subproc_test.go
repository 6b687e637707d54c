package subproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// childModeEnv makes the test binary act as a child (see TestMain).
const childModeEnv = "SUBPROC_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childModeEnv) {
	case "":
		os.Exit(m.Run())
	case "echo": // ready, a line on stderr, then stop at EOF on stdin
		fmt.Println("ready")
		fmt.Fprintln(os.Stderr, "hello")
		fmt.Fprintln(os.Stderr, "world")
		_, _ = io.Copy(io.Discard, os.Stdin)
		fmt.Println("bye")
		os.Exit(0)
	case "fail":
		fmt.Fprintln(os.Stderr, "failing")
		os.Exit(3)
	case "group": // a grandchild in our group, then hang
		sleep := exec.Command("sleep", "600")
		if err := sleep.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("pid", sleep.Process.Pid)
		fmt.Println("ready")
		time.Sleep(time.Hour) // not select {}: the runtime would call that a deadlock and exit
	case "hang":
		fmt.Println("ready")
		time.Sleep(time.Hour) // not select {}: the runtime would call that a deadlock and exit
	}
	os.Exit(2)
}

func startChild(t *testing.T, mode string, opts Options) *Process {
	t.Helper()
	opts.Env = append(opts.Env, childModeEnv+"="+mode)
	opts.Args = []string{"-test.run=^$"}
	p, err := Start(context.Background(), os.Args[0], &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return p
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestReadyStderrAndStdinStop(t *testing.T) {
	t.Parallel()
	var stderr lockedBuffer
	var lines []string
	var exitErr error
	exitCalled := false
	p := startChild(t, "echo", Options{
		Stdin:        true,
		ReadyLine:    "ready",
		StdoutLine:   func(l string) { lines = append(lines, l) },
		Stderr:       &stderr,
		StderrPrefix: "[c] ",
		OnExit:       func(err error) { exitErr, exitCalled = err, true },
	})
	if err := p.WaitReady(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if p.Exited() {
		t.Fatal("exited before its stdin closed")
	}
	if err := p.CloseStdin(); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(30 * time.Second); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	// StdoutLine and OnExit happen before Done closes, so no lock is needed to read them.
	if got := strings.Join(lines, ","); got != "ready,bye" {
		t.Errorf("stdout lines = %q", got)
	}
	if got := stderr.String(); got != "[c] hello\n[c] world\n" {
		t.Errorf("stderr = %q", got)
	}
	if !exitCalled || exitErr != nil {
		t.Errorf("OnExit called %v with %v", exitCalled, exitErr)
	}
}

func TestExitBeforeReady(t *testing.T) {
	t.Parallel()
	p := startChild(t, "fail", Options{ReadyLine: "ready"})
	err := p.WaitReady(30 * time.Second)
	if !errors.Is(err, ErrExited) {
		t.Fatalf("WaitReady = %v, want ErrExited", err)
	}
	var exitErr *exec.ExitError
	if !errors.As(p.Err(), &exitErr) || exitErr.ExitCode() != 3 {
		t.Errorf("Err = %v, want exit status 3", p.Err())
	}
}

func TestWaitKillsAfterTimeout(t *testing.T) {
	t.Parallel()
	p := startChild(t, "hang", Options{ReadyLine: "ready"})
	if err := p.WaitReady(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(50 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("Wait = %v, want a kill", err)
	}
	if !p.Exited() {
		t.Error("not exited after Wait")
	}
}

func TestContextKills(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	p, err := Start(ctx, os.Args[0], &Options{Args: []string{"-test.run=^$"}, Env: []string{childModeEnv + "=hang"}, ReadyLine: "ready"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	if err := p.WaitReady(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("still running 30s after its context was cancelled")
	}
}

// TestKillGroup checks that Kill of a NewGroup child also kills what the child started.
func TestKillGroup(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc to check the grandchild with")
	}
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("no sleep program")
	}
	pids := make(chan int, 1)
	p := startChild(t, "group", Options{
		NewGroup:  true,
		ReadyLine: "ready",
		StdoutLine: func(l string) {
			if s, ok := strings.CutPrefix(l, "pid "); ok {
				n, _ := strconv.Atoi(s)
				pids <- n
			}
		},
	})
	if err := p.WaitReady(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	grandchild := <-pids
	p.Kill()
	deadline := time.Now().Add(10 * time.Second)
	for alive(grandchild) {
		if time.Now().After(deadline) {
			if gc, err := os.FindProcess(grandchild); err == nil {
				_ = gc.Kill()
			}
			t.Fatalf("grandchild %d still alive 10s after Kill", grandchild)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether pid is a live process; a zombie, which waits for a slow reaper
// in some containers, is dead.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, state, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(state, "Z") && !strings.HasPrefix(state, "X")
}
