package sim

import (
	"math"
	"strconv"
)

// The models of the semaphore's scripts (sem_*.lua) and the read-write
// lock's (rw_*.lua).

// sem_acquire.lua: the first free slot, in the caller's order; a slot
// taken pushes the permits record's expiry to the slot's.
func semAcquireModel(m *Master, c clock, keys, argv []string) Reply {
	k := luaString(float64(len(keys) - 1))
	meta, ok := at(keys, 1)
	if !ok {
		return errReply(errArgType)
	}
	rec, has, err := m.get(c.ms, meta)
	if err != "" {
		return errReply(err)
	}
	if has && rec != k {
		return errReply("ERR redlock semaphore: permits mismatch: " + rec + " recorded, " + k + " asked")
	}
	for j := 2; j <= len(keys); j++ {
		tok, ok1 := at(argv, 1)
		ttl, ok2 := at(argv, 2)
		if !ok1 || !ok2 {
			return errReply(errArgType)
		}
		set, err := m.setNXPX(c.ms, keys[j-1], tok, ttl)
		if err != "" {
			return errReply(err)
		}
		if set {
			if r := keepRecord(m, c, meta, k, ttl); r.Kind == Error {
				return r
			}
			return intReply(int64(j - 1))
		}
	}
	return nilReply()
}

// keepRecord is sem_acquire.lua's and sem_extend.lua's
// "if PTTL(record) < ttl then SET record value PX ttl": ttl is a TTL that
// SET or PEXPIRE has accepted already, so a number.
func keepRecord(m *Master, c clock, record, value, ttl string) Reply {
	n, _ := strconv.ParseFloat(ttl, 64)
	if float64(m.pttl(c.ms, record)) < n {
		if err := m.setPX(c.ms, record, value, ttl); err != "" {
			return errReply(err)
		}
	}
	return nilReply()
}

// sem_extend.lua: compare-and-PEXPIRE of a permit's slot, never shortening
// it, keeping the permits record alive at least as long.
func semExtendModel(m *Master, c clock, keys, argv []string) Reply {
	slot, mine, r := holds(m, c, keys, argv)
	if r.Kind == Error {
		return r
	}
	if !mine {
		return intReply(0)
	}
	ttl, ok := at(argv, 2)
	if !ok {
		return luaError(errCompareNil)
	}
	if _, err := m.extendKey(c.ms, slot, ttl); err != "" {
		return errReply(err)
	}
	record, ok := at(keys, 2)
	if !ok {
		return errReply(errArgType)
	}
	n, _ := tonumber(ttl)
	if float64(m.pttl(c.ms, record)) < n {
		value, has, err := m.get(c.ms, record)
		if err != "" {
			return errReply(err)
		}
		if !has {
			if value, ok = at(argv, 3); !ok {
				return errReply(errArgType)
			}
		}
		if err := m.setPX(c.ms, record, value, ttl); err != "" {
			return errReply(err)
		}
	}
	return intReply(1)
}

// sem_holders.lua: one character per slot, '1' where it exists.
func semHoldersModel(m *Master, c clock, keys, argv []string) Reply {
	b := make([]byte, len(keys))
	for j, k := range keys {
		b[j] = byte('0' + m.exists(c.ms, k))
	}
	return bulkReply(string(b))
}

// timeMs is rw_*.lua's `now` from TIME: seconds * 1000 + floor(µs / 1000).
func (c clock) timeMs() float64 {
	sec := floorDiv(c.us, 1e6)
	return float64(sec)*1000 + math.Floor(float64(c.us-sec*1e6)/1000)
}

// rw_write.lua: one round of a write-lock acquisition.
func rwWriteModel(m *Master, c clock, keys, argv []string) Reply {
	if a5, _ := at(argv, 5); a5 == "1" {
		q, okQ := at(keys, 6)
		id, okID := at(argv, 4)
		if okQ && okID { // a nil argument fails the pcall
			if r, ok, err := m.zrank(c.ms, q, id); err == "" && ok && r > 0 {
				return intReply(-2 - r)
			}
		}
	}
	tok, okTok := at(argv, 1)
	ttl, okTTL := at(argv, 2)
	if a3, _ := at(argv, 3); a3 == "1" {
		intent, ok := at(keys, 3)
		if !ok || !okTok || !okTTL {
			return errReply(errArgType)
		}
		if err := m.setPX(c.ms, intent, tok, ttl); err != "" {
			return errReply(err)
		}
	}
	w, ok := at(keys, 1)
	if !ok {
		return errReply(errArgType)
	}
	if m.exists(c.ms, w) == 1 {
		return intReply(-1)
	}
	now := c.timeMs()
	readers, ok := at(keys, 4)
	if !ok {
		return errReply(errArgType)
	}
	z, err := m.zsetOf(c.ms, readers)
	if err != "" {
		return errReply(err)
	}
	if z != nil {
		m.zcountRange(readers, z, zrange{min: math.Inf(-1), max: now}, true)
		if n, _ := m.zcard(c.ms, readers); n > 0 {
			return intReply(-2)
		}
	}
	if !okTok || !okTTL {
		return errReply(errArgType)
	}
	if err := m.setPX(c.ms, w, tok, ttl); err != "" {
		return errReply(err)
	}
	if q, ok := at(keys, 6); ok {
		if id, ok := at(argv, 4); ok {
			m.zrem(c.ms, q, id) // pcall
		}
	}
	intent, ok := at(keys, 3)
	if !ok {
		return errReply(errArgType)
	}
	m.del(c.ms, intent)
	gk, ok := at(keys, 5)
	if !ok {
		return errReply(errArgType)
	}
	gs, has, err := m.get(c.ms, gk)
	if err != "" {
		return errReply(err)
	}
	if !has {
		gs = "0"
	}
	g, ok := tonumber(gs)
	if !ok {
		return luaError("attempt to perform arithmetic on a nil value")
	}
	if err := m.setPX(c.ms, gk, cFormatG17(g+1), ttl); err != "" {
		return errReply(err)
	}
	return hgetOr0(m, c, keys, 2, "fence")
}

// rw_read.lua: register a reader ("a") or extend one ("e").
func rwReadModel(m *Master, c clock, keys, argv []string) Reply {
	ta, hasTTL := at(argv, 2)
	ttl, okTTL := 0.0, false
	if hasTTL {
		ttl, okTTL = tonumber(ta)
	}
	mode, _ := at(argv, 3)
	if mode != "e" {
		w, ok1 := at(keys, 1)
		intent, ok2 := at(keys, 2)
		if !ok1 || !ok2 {
			return errReply(errArgType)
		}
		if m.exists(c.ms, w, intent) > 0 {
			gk, ok := at(keys, 4)
			if !ok {
				return errReply(errArgType)
			}
			gs, has, err := m.get(c.ms, gk)
			if err != "" {
				return errReply(err)
			}
			if !has {
				gs = "0"
			}
			g, okG := tonumber(gs)
			if m.exists(c.ms, w) == 1 {
				if !okG {
					return luaError("attempt to perform arithmetic on a nil value")
				}
				return luaInt(-1 - g)
			}
			pa, hasP := at(argv, 4)
			p, okP := 0.0, false
			if hasP {
				p, okP = tonumber(pa)
			}
			if okP && p == 0 {
				if !okG {
					return luaError("attempt to perform arithmetic on a nil value")
				}
				return luaInt(-2 - g)
			}
			if !okG || !okP {
				return luaError("attempt to compare nil with number")
			}
			if g < p {
				return luaInt(-2 - g)
			}
		}
	}
	now := c.timeMs()
	readers, okR := at(keys, 3)
	tok, okTok := at(argv, 1)
	if mode == "e" {
		if !okR || !okTok {
			return errReply(errArgType)
		}
		s, has, err := m.zscore(c.ms, readers, tok)
		if err != "" {
			return errReply(err)
		}
		if !has || s <= now {
			return intReply(0)
		}
	}
	if !okR {
		return errReply(errArgType)
	}
	z, err := m.zsetOf(c.ms, readers)
	if err != "" {
		return errReply(err)
	}
	if z != nil {
		m.zcountRange(readers, z, zrange{min: math.Inf(-1), max: now}, true)
	}
	if !okTTL {
		return luaError("attempt to perform arithmetic on a nil value")
	}
	if !okTok {
		return errReply(errArgType)
	}
	if _, err := m.zaddNumber(c.ms, readers, now+ttl, tok, zaddFlags{}); err != "" {
		return errReply(err)
	}
	if float64(m.pttl(c.ms, readers)) < ttl {
		if _, err := m.pexpire(c.ms, readers, cFormatG17(ttl)); err != "" {
			return errReply(err)
		}
	}
	return intReply(1)
}

// rw_unread.lua: remove a reader; when it was the last live one and a
// writer waits, tell the writers' waiters.
func rwUnreadModel(m *Master, c clock, keys, argv []string) Reply {
	readers, ok1 := at(keys, 1)
	tok, ok2 := at(argv, 1)
	if !ok1 || !ok2 {
		return errReply(errArgType)
	}
	r, err := m.zrem(c.ms, readers, tok)
	if err != "" {
		return errReply(err)
	}
	if r != 1 {
		return intReply(r)
	}
	ik, ok := at(keys, 3)
	if !ok {
		return errReply(errArgType)
	}
	intent, has, err := m.get(c.ms, ik)
	if err != "" {
		return errReply(err)
	}
	if has {
		// '(' .. now: Lua writes the number with "%.14g".
		bound, _ := strtod(luaString(c.timeMs()))
		n := int64(0)
		if z, _ := m.zsetOf(c.ms, readers); z != nil {
			n = m.zcountRange(readers, z, zrange{min: bound, minex: true, max: math.Inf(1)}, false)
		}
		if wk, ok := at(keys, 2); n == 0 && ok {
			m.publish(wk, "readers:"+sha1hex(intent)) // pcall
		}
	}
	return intReply(r)
}
