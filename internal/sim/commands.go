package sim

import (
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"strings"
)

// exec runs one command at now (ms) and us (µs, for TIME).
func (m *Master) exec(now, us int64, args []string) Reply {
	if len(args) == 0 {
		return errReply("ERR empty command")
	}
	name := args[0]
	// The hot commands first, without folding case.
	switch name {
	case "SET":
		return m.cmdSet(now, args)
	case "EVALSHA":
		return m.cmdEvalSHA(now, us, args)
	}
	upper := strings.ToUpper(name)
	if r, ok := m.execKeys(now, us, upper, name, args); ok {
		return r
	}
	if r, ok := m.execHash(now, upper, name, args); ok {
		return r
	}
	if r, ok := m.execServer(now, us, upper, name, args); ok {
		return r
	}
	return errReply("ERR unknown command '" + name + "'")
}

// execKeys runs the scripts and the string and hash commands (upper is the
// command's name in upper case, name as sent); false for another command.
func (m *Master) execKeys(now, us int64, upper, name string, args []string) (Reply, bool) {
	switch upper {
	case "SET":
		return m.cmdSet(now, args), true
	case "EVALSHA":
		return m.cmdEvalSHA(now, us, args), true
	case "EVAL":
		return m.cmdEval(now, us, args), true
	case "GET":
		if len(args) != 2 {
			return wrongArgs(name), true
		}
		v, ok, err := m.get(now, args[1])
		switch {
		case err != "":
			return errReply(err), true
		case !ok:
			return nilReply(), true
		}
		return bulkReply(v), true
	case "DEL":
		if len(args) < 2 {
			return wrongArgs(name), true
		}
		var n int64
		for _, k := range args[1:] {
			if m.del(now, k) {
				n++
			}
		}
		return intReply(n), true
	case "EXISTS":
		if len(args) < 2 {
			return wrongArgs(name), true
		}
		return intReply(m.exists(now, args[1:]...)), true
	case "TYPE":
		if len(args) != 2 {
			return wrongArgs(name), true
		}
		e, ok := m.lookup(args[1], now)
		if !ok {
			return Reply{Kind: Status, Text: "none"}, true
		}
		return Reply{Kind: Status, Text: [...]string{"", "string", "hash", "zset"}[e.typ]}, true
	case "PTTL":
		if len(args) != 2 {
			return wrongArgs(name), true
		}
		return intReply(m.pttl(now, args[1])), true
	case "PEXPIRE":
		if len(args) != 3 {
			return wrongArgs(name), true
		}
		n, err := m.pexpire(now, args[1], args[2])
		if err != "" {
			return errReply(err), true
		}
		return intReply(n), true
	case "INCR":
		if len(args) != 2 {
			return wrongArgs(name), true
		}
		return m.incr(now, args[1]), true
	}
	return Reply{}, false
}

// execHash runs the hash commands (ReadFenced's HMGET, the fence record's
// HGET and HSET); false for another command.
func (m *Master) execHash(now int64, upper, name string, args []string) (Reply, bool) {
	switch upper {
	case "HGET":
		if len(args) != 3 {
			return wrongArgs(name), true
		}
		v, ok, err := m.hget(now, args[1], args[2])
		switch {
		case err != "":
			return errReply(err), true
		case !ok:
			return nilReply(), true
		}
		return bulkReply(v), true
	case "HMGET":
		if len(args) < 3 {
			return wrongArgs(name), true
		}
		out := make([]Reply, 0, len(args)-2)
		for _, f := range args[2:] {
			v, ok, err := m.hget(now, args[1], f)
			switch {
			case err != "":
				return errReply(err), true
			case !ok:
				out = append(out, nilReply())
			default:
				out = append(out, bulkReply(v))
			}
		}
		return Reply{Kind: Array, Array: out}, true
	case "HSET":
		if len(args) < 4 || len(args)%2 != 0 {
			return wrongArgs(name), true
		}
		n, err := m.hset(now, args[1], args[2:]...)
		if err != "" {
			return errReply(err), true
		}
		return intReply(n), true
	}
	return Reply{}, false
}

// execServer runs the sorted-set, pub/sub, script-cache and server
// commands; false for another command.
func (m *Master) execServer(now, us int64, upper, name string, args []string) (Reply, bool) {
	switch upper {
	case "ZADD":
		return m.cmdZAdd(now, args), true
	case "ZREM":
		if len(args) < 3 {
			return wrongArgs(name), true
		}
		var n int64
		for _, mem := range args[2:] {
			r, err := m.zrem(now, args[1], mem)
			if err != "" {
				return errReply(err), true
			}
			n += r
		}
		return intReply(n), true
	case "ZRANK":
		if len(args) != 3 {
			return wrongArgs(name), true
		}
		r, ok, err := m.zrank(now, args[1], args[2])
		switch {
		case err != "":
			return errReply(err), true
		case !ok:
			return nilReply(), true
		}
		return intReply(r), true
	case "ZSCORE":
		if len(args) != 3 {
			return wrongArgs(name), true
		}
		s, ok, err := m.zscore(now, args[1], args[2])
		switch {
		case err != "":
			return errReply(err), true
		case !ok:
			return nilReply(), true
		}
		return bulkReply(formatScore(s)), true
	case "ZCARD":
		if len(args) != 2 {
			return wrongArgs(name), true
		}
		n, err := m.zcard(now, args[1])
		if err != "" {
			return errReply(err), true
		}
		return intReply(n), true
	case "ZCOUNT", "ZREMRANGEBYSCORE":
		if len(args) != 4 {
			return wrongArgs(name), true
		}
		n, err := m.zcount(now, args[1], args[2], args[3], strings.EqualFold(name, "ZREMRANGEBYSCORE"))
		if err != "" {
			return errReply(err), true
		}
		return intReply(n), true
	case "ZPOPMIN":
		return m.cmdZPopMin(now, args), true
	case "ZRANGE":
		return m.cmdZRange(now, args), true
	case "PUBLISH":
		if len(args) != 3 {
			return wrongArgs(name), true
		}
		return intReply(m.publish(args[1], args[2])), true
	case "PUBSUB":
		return m.cmdPubSub(args), true
	case "SCRIPT":
		return m.cmdScript(args), true
	case "PING":
		switch len(args) {
		case 1:
			return Reply{Kind: Status, Text: "PONG"}, true
		case 2:
			return bulkReply(args[1]), true
		}
		return wrongArgs(name), true
	case "TIME":
		if len(args) != 1 {
			return wrongArgs(name), true
		}
		return timeReply(us), true
	case "INFO":
		return bulkReply("# Server\r\nredis_version:7.0.15\r\nrun_id:" + m.runID + "\r\n"), true
	case "DBSIZE":
		return intReply(int64(len(m.liveKeys(now)))), true
	case "FLUSHALL", "FLUSHDB":
		clear(m.keys)
		return okReply(), true
	}
	return Reply{}, false
}

func timeReply(us int64) Reply {
	return Reply{Kind: Array, Array: []Reply{
		bulkReply(strconv.FormatInt(floorDiv(us, 1e6), 10)),
		bulkReply(strconv.FormatInt(us-floorDiv(us, 1e6)*1e6, 10)),
	}}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func (m *Master) cmdPubSub(args []string) Reply {
	if len(args) < 2 {
		return wrongArgs(args[0])
	}
	if !strings.EqualFold(args[1], "NUMSUB") {
		return errReply("ERR sim: PUBSUB " + args[1] + " is not modelled")
	}
	out := make([]Reply, 0, 2*(len(args)-2))
	for _, ch := range args[2:] {
		out = append(out, bulkReply(ch), intReply(int64(len(m.subs[ch]))))
	}
	return Reply{Kind: Array, Array: out}
}

func (m *Master) cmdScript(args []string) Reply {
	if len(args) < 2 {
		return wrongArgs(args[0])
	}
	switch strings.ToUpper(args[1]) {
	case "LOAD":
		if len(args) != 3 {
			return errReply("ERR wrong number of arguments for 'script|load' command")
		}
		return bulkReply(m.load(args[2]))
	case "EXISTS":
		if len(args) < 3 {
			return errReply("ERR wrong number of arguments for 'script|exists' command")
		}
		out := make([]Reply, len(args)-2)
		for i, sha := range args[2:] {
			_, ok := m.loaded[strings.ToLower(sha)]
			out[i] = intReply(int64(b2i(ok)))
		}
		return Reply{Kind: Array, Array: out}
	case "FLUSH":
		clear(m.loaded)
		return okReply()
	}
	return errReply("ERR sim: SCRIPT " + args[1] + " is not modelled")
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// load puts src in the script cache, bound to its model, and returns its
// SHA1.
func (m *Master) load(src string) string {
	sha, ok := "", false
	if m.scripts != nil {
		sha, ok = m.scripts.bySrc[src]
	}
	if !ok {
		sum := sha1.Sum([]byte(src))
		sha = hex.EncodeToString(sum[:])
	}
	if _, ok := m.loaded[sha]; !ok {
		m.loaded[sha] = m.scripts.model(sha)
	}
	return sha
}

func (m *Master) cmdEvalSHA(now, us int64, args []string) Reply {
	if len(args) < 3 {
		return wrongArgs(args[0])
	}
	sha := args[1]
	fn, ok := m.loaded[sha]
	if !ok {
		if fn, ok = m.loaded[strings.ToLower(sha)]; !ok {
			return errReply("NOSCRIPT No matching script. Please use EVAL.")
		}
		sha = strings.ToLower(sha)
	}
	return m.run(now, us, sha, fn, args[2:])
}

func (m *Master) cmdEval(now, us int64, args []string) Reply {
	if len(args) < 3 {
		return wrongArgs(args[0])
	}
	sha := m.load(args[1])
	return m.run(now, us, sha, m.loaded[sha], args[2:])
}

// run checks the key count and runs the script's model.
func (m *Master) run(now, us int64, sha string, fn model, rest []string) Reply {
	nk, ok := parseInt(rest[0])
	switch {
	case !ok:
		return errReply(errNotInt)
	case nk < 0:
		return errReply("ERR Number of keys can't be negative")
	case nk > int64(len(rest)-1):
		return errReply("ERR Number of keys can't be greater than number of args")
	}
	if fn == nil {
		return errReply("ERR sim: no model for script " + sha)
	}
	return fn(m, clock{ms: now, us: us}, rest[1:1+nk], rest[1+nk:])
}
