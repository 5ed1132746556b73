package sim

import (
	"crypto/sha1"
	"encoding/hex"
	"strconv"
)

// The models of an election's scripts (leader_*.lua).

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
