//go:build unix

package subproc

import (
	"os"
	"os/exec"
	"syscall"
)

// setNewGroup makes cmd's process the leader of a new process group, whose id is its pid.
func setNewGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup sends SIGKILL to every process in p's group.
func killGroup(p *os.Process) error {
	return syscall.Kill(-p.Pid, syscall.SIGKILL)
}
