package sim

import (
	"crypto/sha1"
	"encoding/hex"
	"math"
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

// get is GET: the value, whether the key exists, or an error text.
func (m *Master) get(now int64, key string) (string, bool, string) {
	e, ok := m.lookup(key, now)
	if !ok {
		return "", false, ""
	}
	if e.typ != typeString {
		return "", false, errWrongType
	}
	return e.str, true, ""
}

func (m *Master) del(now int64, key string) bool {
	if _, ok := m.lookup(key, now); !ok {
		return false
	}
	delete(m.keys, key)
	return true
}

func (m *Master) exists(now int64, keys ...string) int64 {
	var n int64
	for _, k := range keys {
		if _, ok := m.lookup(k, now); ok {
			n++
		}
	}
	return n
}

func (m *Master) pttl(now int64, key string) int64 {
	e, ok := m.lookup(key, now)
	switch {
	case !ok:
		return -2
	case e.exp == 0:
		return -1
	}
	return max(e.exp-now, 0)
}

// pexpire is PEXPIRE key ms: the integer is parsed first, then a key
// missing answers 0; an expiry not in the future deletes the key
// (checkAlreadyExpired: when <= now).
func (m *Master) pexpire(now int64, key, ms string) (int64, string) {
	d, ok := parseInt(ms)
	if !ok {
		return 0, errNotInt
	}
	if d > math.MaxInt64-now {
		return 0, "ERR invalid expire time in 'pexpire' command"
	}
	when := d + now
	e, ok := m.lookup(key, now)
	if !ok {
		return 0, ""
	}
	if when <= now {
		delete(m.keys, key)
		return 1, ""
	}
	e.exp = when
	m.keys[key] = e
	return 1, ""
}

func (m *Master) incr(now int64, key string) Reply {
	e, ok := m.lookup(key, now)
	var v int64
	if ok {
		if e.typ != typeString {
			return wrongType()
		}
		n, ok := parseInt(e.str)
		if !ok {
			return errReply(errNotInt)
		}
		if n == math.MaxInt64 {
			return errReply("ERR increment or decrement would overflow")
		}
		v = n + 1
	} else {
		v = 1
	}
	m.keys[key] = entry{typ: typeString, str: strconv.FormatInt(v, 10), exp: e.exp}
	return intReply(v)
}

// setFlags are SET's options.
type setFlags struct {
	nx, xx, get, keepTTL bool
	expire               string // the PX/EX argument, "" for none
	seconds, at          bool   // EX/EXAT rather than PX/PXAT; EXAT/PXAT
	hasExpire            bool
}

// cmdSet parses SET's options as Redis 7.0 does
// (parseExtendedStringArgumentsOrReply), then runs setCore.
func (m *Master) cmdSet(now int64, args []string) Reply {
	if len(args) < 3 {
		return wrongArgs(args[0])
	}
	var f setFlags
	// The library's own form first: SET key value NX PX ms.
	if len(args) == 6 && args[3] == "NX" && args[4] == "PX" {
		f.nx, f.hasExpire, f.expire = true, true, args[5]
	} else {
		for j := 3; j < len(args); j++ {
			opt := strings.ToUpper(args[j])
			next := j+1 < len(args)
			expiring := f.hasExpire
			switch {
			case opt == "NX" && !f.xx:
				f.nx = true
			case opt == "XX" && !f.nx:
				f.xx = true
			case opt == "GET":
				f.get = true
			case opt == "KEEPTTL" && !expiring:
				f.keepTTL = true
			case (opt == "EX" || opt == "PX" || opt == "EXAT" || opt == "PXAT") && !f.keepTTL && next &&
				(!expiring || f.hasExpire && sameUnit(f, opt)):
				f.hasExpire, f.expire = true, args[j+1]
				f.seconds = opt == "EX" || opt == "EXAT"
				f.at = opt == "EXAT" || opt == "PXAT"
				j++
			default:
				return errReply(errSyntax)
			}
		}
	}
	old, had, set, err := m.setCore(now, args[1], args[2], f)
	switch {
	case err != "":
		return errReply(err)
	case f.get && had:
		return bulkReply(old)
	case f.get, !set:
		return nilReply()
	}
	return okReply()
}

// sameUnit reports whether opt repeats the expiry option already given
// (Redis lets "PX 1 PX 2" through, the last winning, but not "PX 1 EX 2").
func sameUnit(f setFlags, opt string) bool {
	switch opt {
	case "EX":
		return f.seconds && !f.at
	case "PX":
		return !f.seconds && !f.at
	case "EXAT":
		return f.seconds && f.at
	}
	return !f.seconds && f.at
}

// setCore is setGenericCommand: the expiry is checked, then with GET the
// old value read (a key of another type is WRONGTYPE), then NX or XX
// decides. It returns the old value and whether there was one (for GET),
// whether it set the key, or an error text.
func (m *Master) setCore(now int64, key, val string, f setFlags) (old string, had, set bool, err string) {
	var when int64
	if f.hasExpire {
		d, ok := parseInt(f.expire)
		if !ok {
			return "", false, false, errNotInt
		}
		if d <= 0 || f.seconds && d > math.MaxInt64/1000 {
			return "", false, false, errSetExpire
		}
		if f.seconds {
			d *= 1000
		}
		if !f.at {
			if d > math.MaxInt64-now {
				return "", false, false, errSetExpire
			}
			d += now
		}
		when = d
	}
	e, found := m.lookup(key, now)
	if f.get && found {
		if e.typ != typeString {
			return "", false, false, errWrongType
		}
		old = e.str
	}
	if f.nx && found || f.xx && !found {
		return old, found, false, ""
	}
	ne := entry{typ: typeString, str: val, exp: when}
	if f.keepTTL && found {
		ne.exp = e.exp
	}
	m.keys[key] = ne
	return old, found, true, ""
}

const errSetExpire = "ERR invalid expire time in 'set' command"

// setNXPX is SET key val NX PX ms, as a script calls it: whether it set
// the key, or an error text.
func (m *Master) setNXPX(now int64, key, val, ms string) (bool, string) {
	_, _, set, err := m.setCore(now, key, val, setFlags{nx: true, hasExpire: true, expire: ms})
	return set, err
}

// setPX is SET key val PX ms.
func (m *Master) setPX(now int64, key, val, ms string) string {
	_, _, _, err := m.setCore(now, key, val, setFlags{hasExpire: true, expire: ms})
	return err
}

// setPlain is SET key val.
func (m *Master) setPlain(now int64, key, val string) string {
	_, _, _, err := m.setCore(now, key, val, setFlags{})
	return err
}

func (m *Master) hget(now int64, key, field string) (string, bool, string) {
	e, ok := m.lookup(key, now)
	if !ok {
		return "", false, ""
	}
	if e.typ != typeHash {
		return "", false, errWrongType
	}
	v, ok := e.hash[field]
	return v, ok, ""
}

// hset sets field-value pairs; it returns how many fields are new.
func (m *Master) hset(now int64, key string, fv ...string) (int64, string) {
	e, ok := m.lookup(key, now)
	if ok && e.typ != typeHash {
		return 0, errWrongType
	}
	if !ok {
		e = entry{typ: typeHash, hash: make(map[string]string, len(fv)/2)}
		m.keys[key] = e
	}
	var n int64
	for i := 0; i+1 < len(fv); i += 2 {
		if _, had := e.hash[fv[i]]; !had {
			n++
		}
		e.hash[fv[i]] = fv[i+1]
	}
	return n, ""
}

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
