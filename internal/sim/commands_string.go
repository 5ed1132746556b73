package sim

import (
	"math"
	"strconv"
	"strings"
)

// The string and hash commands (GET, SET, DEL, EXISTS, PTTL, PEXPIRE,
// INCR, HGET, HSET) as the scripts' models and exec call them.

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
