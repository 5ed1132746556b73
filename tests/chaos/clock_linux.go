package chaos

import (
	"syscall"
	"unsafe"
)

// monoNow returns CLOCK_MONOTONIC in nanoseconds. Histories merge records
// from the test process and from subprocess clients, so their instants must
// come from one clock that every process on the machine shares and that
// never jumps: Go's own monotonic reading is relative to each process's
// start and cannot be compared across processes.
func monoNow() int64 {
	var ts syscall.Timespec
	const clockMonotonic = 1 // CLOCK_MONOTONIC, <linux/time.h>
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		panic("chaos: clock_gettime(CLOCK_MONOTONIC): " + e.Error())
	}
	return ts.Nano()
}
