package world

import (
	"math/bits"
	"time"
)

// clock is one process's clock: its reading at global time t is offset +
// t × (1 + ppm/10⁶). Integer arithmetic (not float64) so that a seed gives
// the same readings on every platform: Go may fuse a float multiply-add
// on some architectures and not on others.
type clock struct {
	offset time.Duration
	ppm    int64 // rate − 1, in parts per million; > −10⁶
}

// read is the clock's reading at global time t ≥ 0.
func (c clock) read(t time.Duration) time.Duration {
	return c.offset + t + c.scale(t)
}

// scale is t × ppm / 10⁶, without overflow for any t a run reaches.
func (c clock) scale(t time.Duration) time.Duration {
	return t/1e6*time.Duration(c.ppm) + t%1e6*time.Duration(c.ppm)/1e6
}

// span is the global time that d of this clock's time takes, rounded up
// (so a timer never fires before its delay has passed on its clock).
func (c clock) span(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	den := uint64(1e6 + c.ppm)
	hi, lo := bits.Mul64(uint64(d), 1e6)
	if hi >= den { // beyond any run: saturate
		return 1<<63 - 1
	}
	q, r := bits.Div64(hi, lo, den)
	if r != 0 {
		q++
	}
	return time.Duration(q)
}

// global is the first global instant t ≥ 0 at which the clock reads at
// least local: the moment the process sees local come. Used to put a
// holder's deadline, read on its own clock, on the global clock: until t
// the holder may still act on the lock.
func (c clock) global(local time.Duration) time.Duration {
	if local <= c.offset {
		return 0
	}
	t := c.span(local - c.offset)
	for t > 0 && c.read(t-1) >= local {
		t--
	}
	for c.read(t) < local {
		t++
	}
	return t
}
