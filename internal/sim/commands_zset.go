package sim

import (
	"math"
	"strings"
)

// The sorted-set commands (ZADD, ZREM, ZRANK, ZSCORE, ZCARD, ZCOUNT,
// ZPOPMIN, ZRANGE) that the masters' queue of waiters runs on.

// zsetOf returns key's sorted set (nil when absent) or WRONGTYPE.
func (m *Master) zsetOf(now int64, key string) (*zset, string) {
	e, ok := m.lookup(key, now)
	if !ok {
		return nil, ""
	}
	if e.typ != typeZSet {
		return nil, errWrongType
	}
	return e.z, ""
}

// zaddFlags are ZADD's options.
type zaddFlags struct{ nx, xx, gt, lt, ch bool }

func (m *Master) cmdZAdd(now int64, args []string) Reply {
	if len(args) < 4 {
		return wrongArgs(args[0])
	}
	var f zaddFlags
	j := 2
	for ; j < len(args); j++ {
		switch strings.ToUpper(args[j]) {
		case "NX":
			f.nx = true
			continue
		case "XX":
			f.xx = true
			continue
		case "GT":
			f.gt = true
			continue
		case "LT":
			f.lt = true
			continue
		case "CH":
			f.ch = true
			continue
		case "INCR":
			return errReply("ERR sim: ZADD INCR is not modelled")
		}
		break
	}
	rest := args[j:]
	if len(rest)%2 != 0 || len(rest) == 0 {
		return errReply(errSyntax)
	}
	if f.nx && f.xx {
		return errReply("ERR XX and NX options at the same time are not compatible")
	}
	if f.gt && f.nx || f.lt && f.nx || f.gt && f.lt {
		return errReply("ERR GT, LT, and/or NX options at the same time are not compatible")
	}
	for i := 0; i < len(rest); i += 2 {
		if _, ok := parseScore(rest[i]); !ok {
			return errReply(errNotFloat)
		}
	}
	z, err := m.zsetOf(now, args[1])
	if err != "" {
		return errReply(err)
	}
	var added, changed int64
	for i := 0; i < len(rest); i += 2 {
		s, _ := parseScore(rest[i])
		a, c := m.zadd(now, args[1], &z, s, rest[i+1], f)
		added += a
		changed += c
	}
	if f.ch {
		return intReply(added + changed)
	}
	return intReply(added)
}

// zadd adds or updates one member of key's set *z (made when nil and
// the member is added); it returns whether it was added, and updated.
func (m *Master) zadd(now int64, key string, z **zset, score float64, member string, f zaddFlags) (int64, int64) {
	if *z == nil {
		if f.xx {
			return 0, 0
		}
		*z = m.newZSet()
		m.keys[key] = entry{typ: typeZSet, z: *z}
	}
	i := (*z).find(member)
	if i < 0 {
		if f.xx {
			return 0, 0
		}
		(*z).insert(zitem{score: score, member: member})
		return 1, 0
	}
	cur := (*z).items[i].score
	if f.nx || f.gt && score <= cur || f.lt && score >= cur || score == cur {
		return 0, 0
	}
	(*z).removeAt(i)
	(*z).insert(zitem{score: score, member: member})
	return 0, 1
}

// newZSet returns an empty sorted set: the one last emptied, if any
// (a queue is emptied and made again at every hand-off).
func (m *Master) newZSet() *zset {
	if z := m.spare; z != nil {
		m.spare = nil
		return z
	}
	return &zset{}
}

// dropZSet deletes key, whose sorted set z is now empty (Redis deletes
// an emptied key), keeping z for the next set made.
func (m *Master) dropZSet(key string, z *zset) {
	delete(m.keys, key)
	m.spare = z
}

// zaddNumber is ZADD key score member called from a script with a Lua
// number for the score.
func (m *Master) zaddNumber(now int64, key string, score float64, member string, f zaddFlags) (int64, string) {
	if math.IsNaN(score) {
		return 0, errNotFloat
	}
	z, err := m.zsetOf(now, key)
	if err != "" {
		return 0, err
	}
	a, _ := m.zadd(now, key, &z, score, member, f)
	return a, ""
}

func (m *Master) zrem(now int64, key, member string) (int64, string) {
	z, err := m.zsetOf(now, key)
	if err != "" || z == nil {
		return 0, err
	}
	i := z.find(member)
	if i < 0 {
		return 0, ""
	}
	z.removeAt(i)
	if len(z.items) == 0 {
		m.dropZSet(key, z)
	}
	return 1, ""
}

func (m *Master) zrank(now int64, key, member string) (int64, bool, string) {
	z, err := m.zsetOf(now, key)
	if err != "" || z == nil {
		return 0, false, err
	}
	i := z.find(member)
	return int64(i), i >= 0, ""
}

func (m *Master) zscore(now int64, key, member string) (float64, bool, string) {
	z, err := m.zsetOf(now, key)
	if err != "" || z == nil {
		return 0, false, err
	}
	i := z.find(member)
	if i < 0 {
		return 0, false, ""
	}
	return z.items[i].score, true, ""
}

func (m *Master) zcard(now int64, key string) (int64, string) {
	z, err := m.zsetOf(now, key)
	if err != "" || z == nil {
		return 0, err
	}
	return int64(len(z.items)), ""
}

// zcount is ZCOUNT, or with remove ZREMRANGEBYSCORE.
func (m *Master) zcount(now int64, key, min, max string, remove bool) (int64, string) {
	r, ok := parseRange(min, max)
	if !ok {
		return 0, errRange
	}
	z, err := m.zsetOf(now, key)
	if err != "" || z == nil {
		return 0, err
	}
	return m.zcountRange(key, z, r, remove), ""
}

func (m *Master) zcountRange(key string, z *zset, r zrange, remove bool) int64 {
	if r.empty() {
		return 0
	}
	var n int64
	kept := z.items[:0]
	for _, it := range z.items {
		if r.contains(it.score) {
			n++
			if remove {
				continue
			}
		}
		kept = append(kept, it)
	}
	if remove {
		clear(z.items[len(kept):])
		z.items = kept
		if len(kept) == 0 {
			m.dropZSet(key, z)
		}
	}
	return n
}

// zpopmin pops the lowest member; ok false when the set is empty or
// absent.
func (m *Master) zpopmin(now int64, key string) (zitem, bool, string) {
	z, err := m.zsetOf(now, key)
	if err != "" || z == nil {
		return zitem{}, false, err
	}
	it := z.items[0]
	z.removeAt(0)
	if len(z.items) == 0 {
		m.dropZSet(key, z)
	}
	return it, true, ""
}

func (m *Master) cmdZPopMin(now int64, args []string) Reply {
	count := int64(1)
	switch len(args) {
	case 2:
	case 3:
		c, ok := parseInt(args[2])
		if !ok || c < 0 {
			return errReply("ERR value is out of range, must be positive")
		}
		count = c
	default:
		if len(args) < 2 {
			return wrongArgs(args[0])
		}
		return errReply(errSyntax)
	}
	out := []Reply{}
	for range count {
		it, ok, err := m.zpopmin(now, args[1])
		if err != "" {
			return errReply(err)
		}
		if !ok {
			break
		}
		out = append(out, bulkReply(it.member), bulkReply(formatScore(it.score)))
	}
	return Reply{Kind: Array, Array: out}
}

// cmdZRange is ZRANGE key start stop [WITHSCORES], by index only.
func (m *Master) cmdZRange(now int64, args []string) Reply {
	if len(args) < 4 {
		return wrongArgs(args[0])
	}
	scores := false
	for _, a := range args[4:] {
		if !strings.EqualFold(a, "WITHSCORES") {
			return errReply("ERR sim: ZRANGE " + a + " is not modelled")
		}
		scores = true
	}
	start, ok1 := parseInt(args[2])
	stop, ok2 := parseInt(args[3])
	if !ok1 || !ok2 {
		return errReply(errNotInt)
	}
	z, err := m.zsetOf(now, args[1])
	if err != "" {
		return errReply(err)
	}
	out := []Reply{}
	if z == nil {
		return Reply{Kind: Array, Array: out}
	}
	n := int64(len(z.items))
	if start < 0 {
		start = max(n+start, 0)
	}
	if stop < 0 {
		stop = n + stop
	}
	stop = min(stop, n-1)
	for i := start; i <= stop; i++ {
		out = append(out, bulkReply(z.items[i].member))
		if scores {
			out = append(out, bulkReply(formatScore(z.items[i].score)))
		}
	}
	return Reply{Kind: Array, Array: out}
}
