package world

import (
	"testing"
	"time"
)

// A clock's reading, a span on it and the global instant of a reading
// agree: global(read(t)) is t (or earlier, where the clock reads the same
// nanosecond twice), and span(d) is at least d of the clock's time.
func TestClock(t *testing.T) {
	for _, c := range []clock{{0, 0}, {time.Hour, 500}, {-time.Hour, -500}, {5 * time.Second, 200_000}, {0, -200_000}} {
		for _, g := range []time.Duration{0, 1, 999, time.Millisecond + 7, 3 * time.Second, 2 * time.Hour} {
			l := c.read(g)
			if back := c.global(l); back > g || c.read(back) != l {
				t.Errorf("%+v: read(%v) = %v, global of it %v", c, g, l, back)
			}
			if c.read(g+1) < l {
				t.Errorf("%+v: not monotone at %v", c, g)
			}
			d := g + 1
			if s := c.span(d); c.read(s)-c.read(0) < d {
				t.Errorf("%+v: span(%v) = %v covers only %v of the clock", c, d, s, c.read(s)-c.read(0))
			}
		}
		// The rate is 1 + ppm/10⁶.
		if got, want := c.read(time.Second)-c.read(0), time.Second+time.Duration(c.ppm)*time.Microsecond; got != want {
			t.Errorf("%+v: a second reads %v, want %v", c, got, want)
		}
	}
}
