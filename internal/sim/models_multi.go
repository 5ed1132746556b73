package sim

// The models of the scripts over several keys at once: LockAll's
// acquisition, write-back, extension and release, and the keeper's batch
// of extensions.

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
