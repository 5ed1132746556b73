package sim

import "math"

// zset is a sorted set: members ordered by score, ties by member
// bytewise, as Redis orders them. The library's sets are small (a queue
// of waiters, the live readers), so a sorted slice serves.
type zset struct {
	items []zitem
}

type zitem struct {
	score  float64
	member string
}

func zless(a, b zitem) bool {
	return a.score < b.score || a.score == b.score && a.member < b.member
}

// find returns member's index, or -1.
func (z *zset) find(member string) int {
	for i := range z.items {
		if z.items[i].member == member {
			return i
		}
	}
	return -1
}

// insert adds a member known not to be there.
func (z *zset) insert(it zitem) {
	lo, hi := 0, len(z.items)
	for lo < hi {
		mid := (lo + hi) / 2
		if zless(z.items[mid], it) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	z.items = append(z.items, zitem{})
	copy(z.items[lo+1:], z.items[lo:])
	z.items[lo] = it
}

func (z *zset) removeAt(i int) {
	copy(z.items[i:], z.items[i+1:])
	z.items[len(z.items)-1] = zitem{}
	z.items = z.items[:len(z.items)-1]
}

// zrange is a ZRANGEBYSCORE-style interval.
type zrange struct {
	min, max     float64
	minex, maxex bool
}

func (r zrange) contains(s float64) bool {
	return (s > r.min || !r.minex && s == r.min) && (s < r.max || !r.maxex && s == r.max)
}

// empty reports an interval that holds nothing (zslIsInRange's first test).
func (r zrange) empty() bool {
	return r.min > r.max || r.min == r.max && (r.minex || r.maxex)
}

// parseRange parses ZCOUNT's and ZREMRANGEBYSCORE's min and max
// (zslParseRange): an optional '(' for exclusive, then strtod over the
// rest, where "" is 0; NaN is refused.
func parseRange(min, max string) (zrange, bool) {
	var r zrange
	var ok bool
	if r.min, r.minex, ok = parseBound(min); !ok {
		return r, false
	}
	if r.max, r.maxex, ok = parseBound(max); !ok {
		return r, false
	}
	return r, true
}

func parseBound(s string) (float64, bool, bool) {
	ex := false
	if s != "" && s[0] == '(' {
		ex, s = true, s[1:]
	}
	if s == "" {
		return 0, ex, true
	}
	f, ok := strtod(s)
	if !ok || math.IsNaN(f) {
		return 0, ex, false
	}
	return f, ex, true
}
