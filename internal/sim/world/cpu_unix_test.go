//go:build unix

package world_test

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time the process has used, user and system: what a
// benchmark on a shared machine should divide by, not the wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
