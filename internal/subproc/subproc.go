// Package subproc runs a worker process, usually the running binary re-executed in a
// worker mode, for the tests and tools that need a second process to kill: the chaos suite
// (internal/chaos), the driver's memory test and cmd/bench's scale scenario.
//
// A [Process] reads the child's stdout line by line (a protocol such as "ready"),
// copies its stderr line by line, with a prefix, to a log, and can be stopped gently
// (close its stdin, or send a signal) or killed with SIGKILL, optionally together with
// every process in its process group. Every method is safe for concurrent use.
package subproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"
)

// maxLineBytes is the longest stdout or stderr line passed on whole; the rest of a longer
// line is dropped, so that one runaway line cannot stall the child on a full pipe.
const maxLineBytes = 1024 * 1024

// Options configures Start. The zero value runs the program with this process's
// environment, no stdin, and stdout and stderr discarded.
type Options struct {
	// Args are the program's arguments, without the program itself.
	Args []string

	// Env is added to this process's environment (os.Environ), later entries winning.
	Env []string

	// Stdin gives the child a pipe as stdin, for [Process.Stdin] and [Process.CloseStdin]:
	// a child that reads to EOF then learns that it should stop, and also when this
	// process dies. Without it the child's stdin is the null device.
	Stdin bool

	// StdoutLine, if set, is called with each line the child writes to stdout, without
	// its newline, from one goroutine and in order. Every call returns before Exited
	// closes. Nil discards stdout.
	StdoutLine func(line string)

	// ReadyLine, if set, is the stdout line that makes Ready close (and WaitReady return).
	ReadyLine string

	// Stderr receives each line the child writes to stderr as StderrPrefix + line + "\n",
	// one Write per line. Nil discards stderr.
	Stderr       io.Writer
	StderrPrefix string

	// NewGroup starts the child in a process group of its own, so that Kill reaches the
	// processes it started as well, and a terminal's Ctrl-C reaches it only through this
	// process. Ignored where process groups do not exist.
	NewGroup bool

	// OnExit, if set, is called once the child has exited and been waited for, with
	// its exit error, before Exited closes.
	OnExit func(err error)
}

// Process is a child started by Start.
type Process struct {
	cmd      *exec.Cmd
	newGroup bool
	stdin    io.WriteCloser // nil without Options.Stdin

	ready     chan struct{}
	readyOnce sync.Once
	exited    chan struct{} // closed once the child has been waited for
	err       error         // cmd.Wait's result; set before exited is closed
}

// Start starts program. When ctx is done the child is killed as by Kill; pass
// context.Background() for a child that lives until it is stopped or killed.
func Start(ctx context.Context, program string, opts *Options) (*Process, error) {
	if opts == nil {
		opts = &Options{}
	}
	cmd := exec.Command(program, opts.Args...)
	cmd.Env = append(os.Environ(), opts.Env...)
	p := &Process{cmd: cmd, newGroup: opts.NewGroup, ready: make(chan struct{}), exited: make(chan struct{})}
	if opts.NewGroup {
		setNewGroup(cmd)
	}
	var err error
	if opts.Stdin {
		if p.stdin, err = cmd.StdinPipe(); err != nil {
			return nil, fmt.Errorf("failed to make stdin pipe for %s: %w", program, err)
		}
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("failed to make stdout pipe for %s: %w", program, err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("failed to make stderr pipe for %s: %w", program, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("failed to start %s: %w", program, err)
	}

	var readers sync.WaitGroup
	readers.Go(func() {
		eachLine(stdout, func(line string) {
			if opts.StdoutLine != nil {
				opts.StdoutLine(line)
			}
			if opts.ReadyLine != "" && line == opts.ReadyLine {
				p.readyOnce.Do(func() { close(p.ready) })
			}
		})
	})
	readers.Go(func() {
		eachLine(stderr, func(line string) {
			if opts.Stderr != nil {
				_, _ = io.WriteString(opts.Stderr, opts.StderrPrefix+line+"\n")
			}
		})
	})
	go func() {
		// Wait closes the pipes, so it must follow the last read.
		readers.Wait()
		p.err = cmd.Wait()
		if opts.OnExit != nil {
			opts.OnExit(p.err)
		}
		close(p.exited)
	}()
	if ctx.Done() != nil {
		go func() {
			select {
			case <-ctx.Done():
				p.Kill()
			case <-p.exited:
			}
		}()
	}
	return p, nil
}

// eachLine calls fn with each line of r, then reads r to its end.
func eachLine(r io.Reader, fn func(string)) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), maxLineBytes)
	for sc.Scan() {
		fn(sc.Text())
	}
	_, _ = io.Copy(io.Discard, r) // after a line too long for the scanner
}

// Pid is the child's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stdin is the write end of the child's stdin; nil without Options.Stdin.
func (p *Process) Stdin() io.Writer {
	if p.stdin == nil {
		return nil
	}
	return p.stdin
}

// CloseStdin closes the child's stdin, the usual request to stop. It does nothing without
// Options.Stdin.
func (p *Process) CloseStdin() error {
	if p.stdin == nil {
		return nil
	}
	return p.stdin.Close()
}

// Signal sends sig to the child (not to its group).
func (p *Process) Signal(sig os.Signal) error {
	if p.Exited() {
		return nil
	}
	return p.cmd.Process.Signal(sig)
}

// Kill sends SIGKILL to the child, or to its whole group with Options.NewGroup, and waits
// until it has exited. Killing an exited child does nothing.
func (p *Process) Kill() {
	if !p.Exited() {
		if p.newGroup {
			_ = killGroup(p.cmd.Process)
		} else {
			_ = p.cmd.Process.Kill()
		}
	}
	<-p.exited
}

// Done is closed once the child has exited and been waited for.
func (p *Process) Done() <-chan struct{} { return p.exited }

// Exited reports whether the child has exited and been waited for.
func (p *Process) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// Err is the child's exit error (nil for exit status 0); valid once Done is closed.
func (p *Process) Err() error {
	<-p.exited
	return p.err
}

// Ready is closed when the child has printed Options.ReadyLine.
func (p *Process) Ready() <-chan struct{} { return p.ready }

// ErrExited is returned by WaitReady when the child exits before it is ready.
var ErrExited = errors.New("process exited")

// WaitReady waits up to timeout for the child's Options.ReadyLine. It returns an error
// wrapping ErrExited when the child exits first.
func (p *Process) WaitReady(timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.ready:
		return nil
	case <-p.exited:
		return fmt.Errorf("%w before it was ready: %v", ErrExited, p.err)
	case <-t.C:
		return fmt.Errorf("not ready after %s", timeout)
	}
}

// Wait waits up to timeout for the child to exit and returns its exit error. A child still
// running after timeout is killed, and the error says so.
func (p *Process) Wait(timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.exited:
		return p.err
	case <-t.C:
		p.Kill()
		return fmt.Errorf("did not exit within %s; killed", timeout)
	}
}
