//go:build unix && !linux

package lab

import "syscall"

// sysProcAttr puts each master in its own process group. Pdeathsig exists
// only on Linux: elsewhere a killed test binary can leave masters behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// waitStopped cannot observe the stop without /proc; SIGSTOP is delivered
// promptly to a process group, so this trusts it.
func waitStopped(int) error { return nil }
