package sim

// The models of the fencing scripts (docs/design.md §5): the fenced
// acquisition, the write-back of a fence, the fenced write.

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
