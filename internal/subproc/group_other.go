//go:build !unix

package subproc

import (
	"os"
	"os/exec"
)

// setNewGroup does nothing: there are no process groups to use here.
func setNewGroup(*exec.Cmd) {}

// killGroup kills p alone.
func killGroup(p *os.Process) error { return p.Kill() }
