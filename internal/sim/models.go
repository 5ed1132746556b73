package sim

import (
	"crypto/sha1"
	"encoding/hex"
	"math"
	"strconv"
)

// The models of the library's scripts (redlock/scripts/*.lua), one per
// script, each following its script statement by statement: the same
// commands in the same order, so that what a script leaves behind when it
// fails half way (Redis does not roll a script back) is left here too.
// redis.call raises a command's error (the model returns it); redis.pcall
// swallows it. Lua's nil and false are told apart where the script's
// comparisons do: GET's false is never equal to a missing ARGV's nil.

// holds is the scripts' opening compare, `redis.call('GET', KEYS[1]) ==
// ARGV[1]`: KEYS[1], and whether it holds the caller's token; an error
// reply (Kind Error) when KEYS[1] is missing or GET fails.
func holds(m *Master, c clock, keys, argv []string) (key string, mine bool, r Reply) {
	k, ok := at(keys, 1)
	if !ok {
		return "", false, errReply(errArgType)
	}
	v, has, err := m.get(c.ms, k)
	if err != "" {
		return "", false, errReply(err)
	}
	tok, hasTok := at(argv, 1)
	return k, has && hasTok && v == tok, nilReply()
}

// errCompareNil is Lua's error for a TTL the extension scripts cannot read
// (tonumber's nil, compared with the key's PTTL).
const errCompareNil = "attempt to compare number with nil"

// extendKey is the extension scripts' step for one key that holds the
// token: nothing where its PTTL is at least ms as tonumber reads it (1),
// PEXPIRE otherwise (which wants an integer). An ms tonumber cannot read
// is the Lua error of comparing with nil.
func (m *Master) extendKey(now int64, key, ms string) (int64, string) {
	d, ok := tonumber(ms)
	if !ok {
		return 0, "ERR user_script: " + errCompareNil
	}
	if float64(m.pttl(now, key)) >= d {
		return 1, ""
	}
	return m.pexpire(now, key, ms)
}

// extend.lua: compare-and-PEXPIRE, never shortening the key.
func extendModel(m *Master, c clock, keys, argv []string) Reply {
	k, mine, r := holds(m, c, keys, argv)
	if r.Kind == Error {
		return r
	}
	if mine {
		ttl, ok := at(argv, 2)
		if !ok {
			return luaError(errCompareNil)
		}
		n, err := m.extendKey(c.ms, k, ttl)
		if err != "" {
			return errReply(err)
		}
		return intReply(n)
	}
	return intReply(0)
}

// release.lua: compare-and-DEL, the queue's pop, and the hand-off.
func releaseModel(m *Master, c clock, keys, argv []string) Reply {
	k1, ok := at(keys, 1)
	if !ok {
		return errReply(errArgType)
	}
	v, has, err := m.get(c.ms, k1)
	if err != "" {
		return errReply(err)
	}
	k2, hasQueue := at(keys, 2)
	if own, ok := at(argv, 2); hasQueue && ok && own != "" {
		m.zrem(c.ms, k2, own) // pcall
	}
	tok, hasTok := at(argv, 1)
	h, _ := at(argv, 3)
	hand := h == "h"
	same := has && hasTok && v == tok
	if !same && (has || !hand || !hasQueue) {
		if has {
			return intReply(-1)
		}
		return intReply(0)
	}
	// ARGV[1] is there: hand needs ARGV[3], and without it v == ARGV[1].
	// The message, redis.sha1hex(ARGV[1]) and perhaps a name after it,
	// is made only where it is published.
	named, ch, r := "", k1, int64(1)
	if hasQueue {
		for range 4 {
			head, ok, err := m.zpopmin(c.ms, k2) // pcall
			if err != "" || !ok {
				break
			}
			id, ttl, htok, matched := matchMember(head.member)
			who := id
			if !matched {
				who = head.member
			}
			if !hand || !matched {
				// Did not ask: name it, or where the key is absent put
				// it back.
				if !has {
					m.zaddNumber(c.ms, k2, head.score, head.member, zaddFlags{}) // pcall
					if life, ok := at(argv, 4); ok {
						m.pexpire(c.ms, k2, life) // pcall
					}
					return intReply(0)
				}
				named, r, ch = who, 2, k1+":w:"+prefixToDot(who)
				break
			}
			var buf [128]byte
			lch := append(append(append(buf[:0], k1...), ":w:"...), prefixToDot(who)...)
			if m.Subscribers(string(lch)) > 0 { // no allocation: a map index
				if m.setPX(c.ms, k1, htok, ttl) == "" {
					m.publish(string(lch), grant(htok, id))
					if has {
						return intReply(3)
					}
					return intReply(0)
				}
			}
		}
	}
	if !has {
		return intReply(0)
	}
	m.del(c.ms, k1)
	if named == "" {
		m.publish(ch, sha1hex(tok))
	} else {
		m.publish(ch, sha1hex(tok)+" "+named)
	}
	return intReply(r)
}

// join.lua: ZADD NX of the member, scored by the instant its waiter
// began on its own clock where that lies within the slack of this
// master's reckoning (TIME in µs less the waiter's age), else by the
// reckoning; then PEXPIRE of the queue to its life.
func joinModel(m *Master, c clock, keys, argv []string) Reply {
	var n [3]float64
	for i, arg := range []int{1, 5, 4} { // the script's order of reading
		a, _ := at(argv, arg)
		v, ok := tonumber(a)
		if !ok {
			return luaError("attempt to perform arithmetic on a nil value")
		}
		n[i] = v
	}
	reckoned, slack, wall := float64(c.us)-n[0], n[1], n[2]
	score := reckoned
	if math.Abs(wall-reckoned) <= slack {
		score = wall
	}
	q, okQ := at(keys, 1)
	member, okM := at(argv, 2)
	if !okQ || !okM {
		return errReply(errArgType)
	}
	added, err := m.zaddNumber(c.ms, q, score, member, zaddFlags{nx: true})
	if err != "" {
		return errReply(err)
	}
	life, ok := at(argv, 3)
	if !ok {
		return errReply(errArgType)
	}
	if _, err := m.pexpire(c.ms, q, life); err != "" {
		return errReply(err)
	}
	return intReply(added)
}

// grant is release.lua's message to a waiter handed the key:
// "<SHA-1 of its token> <id> +", in one allocation.
func grant(tok, id string) string {
	var buf [2*sha1.Size + 64]byte
	sum := sha1.Sum([]byte(tok))
	b := hex.AppendEncode(buf[:0], sum[:])
	b = append(append(append(b, ' '), id...), " +"...)
	return string(b)
}

// probe_mine.lua: -3 when the key holds the waiter's grant token, else
// its PTTL.
func probeMineModel(m *Master, c clock, keys, argv []string) Reply {
	k, ok := at(keys, 1)
	if !ok {
		return errReply(errArgType)
	}
	v, has, err := m.get(c.ms, k)
	if err != "" {
		return errReply(err)
	}
	if tok, ok := at(argv, 1); has && ok && v == tok {
		return intReply(-3)
	}
	return intReply(m.pttl(c.ms, k))
}

// acquire_fenced.lua: SET NX PX, then the fence counter.
func acquireFencedModel(m *Master, c clock, keys, argv []string) Reply {
	k, ok1 := at(keys, 1)
	tok, ok2 := at(argv, 1)
	ttl, ok3 := at(argv, 2)
	if !ok1 || !ok2 || !ok3 {
		return errReply(errArgType)
	}
	set, err := m.setNXPX(c.ms, k, tok, ttl)
	if err != "" {
		return errReply(err)
	}
	if !set {
		return nilReply()
	}
	return hgetOr0(m, c, keys, 2, "fence")
}

// hgetOr0 is `redis.call('HGET', KEYS[i], field) or '0'` as a reply.
func hgetOr0(m *Master, c clock, keys []string, i int, field string) Reply {
	fk, ok := at(keys, i)
	if !ok {
		return errReply(errArgType)
	}
	f, has, err := m.hget(c.ms, fk, field)
	switch {
	case err != "":
		return errReply(err)
	case !has:
		return bulkReply("0")
	}
	return bulkReply(f)
}

// writeback.lua: raise the fence counter to t under our token.
func writebackModel(m *Master, c clock, keys, argv []string) Reply {
	_, mine, r := holds(m, c, keys, argv)
	if r.Kind == Error {
		return r
	}
	if !mine {
		return intReply(0)
	}
	tok, _ := at(argv, 1)
	fk, ok := at(keys, 2)
	if !ok {
		return errReply(errArgType)
	}
	targ, _ := at(argv, 2)
	cur, t, r := fences(m, c, fk, argv, 2, "write-back")
	if r.Kind == Error {
		return r
	}
	order := cmpDec(cur, t)
	if order < 0 {
		if _, err := m.hset(c.ms, fk, "fence", targ, "owner", tok); err != "" {
			return errReply(err)
		}
		return intReply(1)
	}
	if order == 0 {
		owner, has, err := m.hget(c.ms, fk, "owner")
		if err != "" {
			return errReply(err)
		}
		if has && owner == tok {
			return intReply(1)
		}
	}
	return intReply(0)
}

// storedFence is a fence counter's fence as the scripts read it: HGET
// key fence, "0" when absent, as a decimal (ok false when it is not one);
// an error reply (Kind Error) when HGET fails.
func storedFence(m *Master, c clock, key string) (d string, ok bool, r Reply) {
	s, has, err := m.hget(c.ms, key, "fence")
	if err != "" {
		return "", false, errReply(err)
	}
	if !has {
		s = "0"
	}
	d, ok = dec(s)
	return d, ok, nilReply()
}

// fences is writeback.lua's and fenced_write.lua's reading of the fences
// they compare: the one stored in key's hash ("0" when none) and the
// caller's, argv[i]; an error reply (Kind Error) when either is not a
// decimal number, as the scripts' dec() raises (what names the script).
func fences(m *Master, c clock, key string, argv []string, i int, what string) (stored, given string, r Reply) {
	cur, okC, r := storedFence(m, c, key)
	if r.Kind == Error {
		return "", "", r
	}
	a, hasA := at(argv, i)
	g, okG, lerr := decNil(a, hasA)
	if lerr.Kind == Error {
		return "", "", lerr
	}
	if !okC || !okG {
		return "", "", errReply("ERR redlock " + what + ": a fence is not a decimal number")
	}
	return cur, g, nilReply()
}

// fenced_write.lua: a write to a resource, accepted only past the last
// fence, or at it from the same owner.
func fencedWriteModel(m *Master, c clock, keys, argv []string) Reply {
	k, ok := at(keys, 1)
	if !ok {
		return errReply(errArgType)
	}
	fa, _ := at(argv, 1)
	last, fence, r := fences(m, c, k, argv, 1, "fenced write")
	if r.Kind == Error {
		return r
	}
	order := cmpDec(fence, last)
	if order < 0 {
		return intReply(0)
	}
	owner, hasOwner := at(argv, 2)
	if order == 0 {
		cur, has, err := m.hget(c.ms, k, "owner")
		if err != "" {
			return errReply(err)
		}
		if !has || !hasOwner || cur != owner {
			return intReply(0)
		}
	}
	value, hasValue := at(argv, 3)
	if !hasOwner || !hasValue {
		return errReply(errArgType)
	}
	if _, err := m.hset(c.ms, k, "fence", fa, "owner", owner, "value", value); err != "" {
		return errReply(err)
	}
	return intReply(1)
}

// forLimit is the limit of `for i = 1, n` with n = tonumber(s): a Lua
// error when it is nil.
func forLimit(s string, ok bool) (float64, Reply) {
	if ok {
		if n, ok := tonumber(s); ok {
			return n, Reply{}
		}
	}
	return 0, luaError("'for' limit must be a number")
}

// acquire_multi.lua: SET NX PX every key when none exists, and the
// largest fence counter.
func acquireMultiModel(m *Master, c clock, keys, argv []string) Reply {
	na, hasN := at(argv, 3)
	n, lerr := forLimit(na, hasN)
	if lerr.Kind == Error {
		return lerr
	}
	for i := 1.0; i <= n; i++ {
		k, ok := atNum(keys, i)
		if !ok {
			return errReply(errArgType)
		}
		if m.exists(c.ms, k) == 1 {
			return nilReply()
		}
	}
	top := "0"
	if f, _ := at(argv, 4); f == "1" {
		for i := 1.0; i <= n; i++ {
			fk, ok := atNum(keys, n+i)
			if !ok {
				return errReply(errArgType)
			}
			d, ok, r := storedFence(m, c, fk)
			switch {
			case r.Kind == Error:
				return r
			case !ok:
				return errReply("ERR redlock acquire: a fence counter is not a decimal number")
			}
			if cmpDec(d, top) > 0 {
				top = d
			}
		}
	}
	for i := 1.0; i <= n; i++ {
		k, _ := atNum(keys, i)
		tok, ok1 := at(argv, 1)
		ttl, ok2 := at(argv, 2)
		if !ok1 || !ok2 {
			return errReply(errArgType)
		}
		if err := m.setPX(c.ms, k, tok, ttl); err != "" {
			return errReply(err)
		}
	}
	return bulkReply(top)
}

// writeback_multi.lua: raise every fence counter to t, all or nothing.
func writebackMultiModel(m *Master, c clock, keys, argv []string) Reply {
	na, hasN := at(argv, 3)
	targ, hasT := at(argv, 2)
	t, okT, lerr := decNil(targ, hasT)
	if lerr.Kind == Error {
		return lerr
	}
	if !okT {
		return errReply("ERR redlock write-back: a fence is not a decimal number")
	}
	n, lerr := forLimit(na, hasN)
	if lerr.Kind == Error {
		return lerr
	}
	tok, hasTok := at(argv, 1)
	var raise [64]bool
	var raiseMore []bool
	for i := 1.0; i <= n; i++ {
		k, ok := atNum(keys, i)
		if !ok {
			return errReply(errArgType)
		}
		v, has, err := m.get(c.ms, k)
		if err != "" {
			return errReply(err)
		}
		if !has || !hasTok || v != tok {
			return intReply(0)
		}
		fk, ok := atNum(keys, n+i)
		if !ok {
			return errReply(errArgType)
		}
		cur, ok, r := storedFence(m, c, fk)
		switch {
		case r.Kind == Error:
			return r
		case !ok:
			return errReply("ERR redlock write-back: a fence counter is not a decimal number")
		}
		order := cmpDec(cur, t)
		if order == 0 {
			owner, has, err := m.hget(c.ms, fk, "owner")
			if err != "" {
				return errReply(err)
			}
			if !has || owner != tok {
				return intReply(0)
			}
		}
		if order > 0 {
			return intReply(0)
		}
		if int(i) <= len(raise) {
			raise[int(i)-1] = order < 0
		} else {
			raiseMore = append(raiseMore, order < 0)
		}
	}
	for i := 1.0; i <= n; i++ {
		up := false
		if int(i) <= len(raise) {
			up = raise[int(i)-1]
		} else {
			up = raiseMore[int(i)-len(raise)-1]
		}
		if up {
			fk, _ := atNum(keys, n+i)
			if _, err := m.hset(c.ms, fk, "fence", targ, "owner", tok); err != "" {
				return errReply(err)
			}
		}
	}
	return intReply(1)
}

// extend_multi.lua: PEXPIRE every key with less than the TTL to live, only
// if every key holds the token.
func extendMultiModel(m *Master, c clock, keys, argv []string) Reply {
	tok, hasTok := at(argv, 1)
	for _, k := range keys {
		v, has, err := m.get(c.ms, k)
		if err != "" {
			return errReply(err)
		}
		if !has || !hasTok || v != tok {
			return intReply(0)
		}
	}
	for _, k := range keys {
		ttl, ok := at(argv, 2)
		if !ok {
			return luaError(errCompareNil)
		}
		if _, err := m.extendKey(c.ms, k, ttl); err != "" {
			return errReply(err)
		}
	}
	return intReply(1)
}

// extend_batch.lua: extend.lua per key; a '1' or '0' per key.
func extendBatchModel(m *Master, c clock, keys, argv []string) Reply {
	var buf [64]byte
	r := buf[:0]
	for i, k := range keys {
		v, has, err := m.get(c.ms, k)
		if err != "" {
			return errReply(err)
		}
		res := byte('0')
		if tok, ok := at(argv, 2*(i+1)-1); has && ok && v == tok {
			ttl, ok := at(argv, 2*(i+1))
			if !ok {
				return luaError(errCompareNil)
			}
			n, err := m.extendKey(c.ms, k, ttl)
			if err != "" {
				return errReply(err)
			}
			if n == 1 {
				res = '1'
			}
		}
		r = append(r, res)
	}
	return bulkReply(string(r))
}

// release_multi.lua: compare-and-DEL every key that holds the token.
func releaseMultiModel(m *Master, c clock, keys, argv []string) Reply {
	tok, hasTok := at(argv, 1)
	other, deleted := false, int64(0)
	for _, k := range keys {
		v, has, err := m.get(c.ms, k)
		if err != "" {
			return errReply(err)
		}
		switch {
		case has && hasTok && v == tok:
			m.del(c.ms, k)
			m.publish(k, sha1hex(tok))
			deleted++
		case has:
			other = true
		}
	}
	if other {
		return intReply(-1)
	}
	return intReply(deleted)
}

// adopt.lua: the key's PTTL while it holds the token, and the fence when
// the counter's owner is the token.
func adoptModel(m *Master, c clock, keys, argv []string) Reply {
	k, mine, r := holds(m, c, keys, argv)
	if r.Kind == Error {
		return r
	}
	if !mine {
		return nilReply()
	}
	tok, _ := at(argv, 1)
	pttl := luaString(float64(m.pttl(c.ms, k)))
	if fk, ok := at(keys, 2); ok {
		owner, has, err := m.hget(c.ms, fk, "owner")
		if err != "" {
			return errReply(err)
		}
		if has && owner == tok {
			f := hgetOr0(m, c, keys, 2, "fence")
			if f.Kind == Error {
				return f
			}
			return bulkReply(pttl + " " + f.Text)
		}
	}
	return bulkReply(pttl)
}

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

// leader_write.lua: an election's leader publishes its term and value,
// only while the lock key holds its token and no later term is recorded.
func leaderWriteModel(m *Master, c clock, keys, argv []string) Reply {
	lk, ok := at(keys, 1)
	if !ok {
		return errReply(errArgType)
	}
	cur, has, err := m.get(c.ms, lk)
	if err != "" {
		return errReply(err)
	}
	tok, hasTok := at(argv, 1)
	if !has || !hasTok || cur != tok {
		return intReply(0)
	}
	rec, ok := at(keys, 2)
	if !ok {
		return errReply(errArgType)
	}
	s, hasLast, err := m.hget(c.ms, rec, "term")
	if err != "" {
		return errReply(err)
	}
	if !hasLast {
		s = "0"
	}
	last, okLast := dec(s)
	ta, hasTerm := at(argv, 2)
	term, okTerm, lerr := decNil(ta, hasTerm)
	if lerr.Kind == Error {
		return lerr
	}
	if !okLast || !okTerm {
		return errReply("ERR redlock leader: a term is not a decimal number")
	}
	if cmpDec(term, last) < 0 {
		return intReply(-1)
	}
	value, hasValue := at(argv, 3)
	if !hasValue {
		return errReply(errArgType)
	}
	if _, err := m.hset(c.ms, rec, "term", ta, "token", tok, "value", value); err != "" {
		return errReply(err)
	}
	m.publish(rec, ta)
	return intReply(1)
}

// leader_read.lua: the election's holder on this master and whether the
// record is its: "0", "1 <pttl>", or "2 <pttl> <term> <sha1> <value>".
func leaderReadModel(m *Master, c clock, keys, argv []string) Reply {
	lk, ok := at(keys, 1)
	if !ok {
		return errReply(errArgType)
	}
	tok, has, err := m.get(c.ms, lk)
	if err != "" {
		return errReply(err)
	}
	if !has {
		return bulkReply("0")
	}
	pttl := strconv.FormatInt(m.pttl(c.ms, lk), 10)
	rec, ok := at(keys, 2)
	if !ok {
		return errReply(errArgType)
	}
	var f [3]string
	var hasF [3]bool
	for i, name := range []string{"term", "token", "value"} {
		if f[i], hasF[i], err = m.hget(c.ms, rec, name); err != "" {
			return errReply(err)
		}
	}
	if !hasF[1] || f[1] != tok {
		return bulkReply("1 " + pttl)
	}
	sum := sha1.Sum([]byte(tok))
	return bulkReply("2 " + pttl + " " + f[0] + " " + hex.EncodeToString(sum[:]) + " " + f[2])
}
