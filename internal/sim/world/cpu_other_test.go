//go:build !unix

package world_test

import "time"

// cpuTime is not measured here: the benchmark reports no CPU metric.
func cpuTime() time.Duration { return 0 }
