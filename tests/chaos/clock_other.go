//go:build !linux

package chaos

import "time"

// monoNow falls back to the wall clock off Linux, where the lab's process
// backend and SIGSTOP-able subprocess clients are not the target anyway.
// Wall time can jump; histories recorded here are best effort.
func monoNow() int64 { return time.Now().UnixNano() }
