package main

import "syscall"

// childProcAttr puts a process the bench starts (an etcd member, a failover
// round's leader) in its own process group, so a Ctrl-C at the terminal
// reaches the bench alone, which then stops it; and has the kernel SIGKILL
// it if the thread that started it dies, so a killed bench leaves none
// behind (Go retires no OS thread unless a goroutine exits locked to one,
// which the bench never does).
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
