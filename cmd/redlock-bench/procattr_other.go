//go:build !linux

package main

import "syscall"

// childProcAttr: Pdeathsig exists only on Linux; elsewhere a killed bench
// can leave the processes it started behind.
func childProcAttr() *syscall.SysProcAttr { return nil }
