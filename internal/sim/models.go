package sim

import (
	"crypto/sha1"
	"encoding/hex"
	"math"
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
