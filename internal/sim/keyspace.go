package sim

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The type of a key's value.
const (
	typeString uint8 = iota + 1
	typeHash
	typeZSet
)

// entry is one key's value and its absolute expiry in the master's
// milliseconds (0: none). Exactly one of str, hash, z is in use, by typ.
type entry struct {
	typ  uint8
	str  string
	hash map[string]string
	z    *zset
	exp  int64
}

// lookup returns key's entry at now, deleting it first if it has expired:
// Redis expires a key once now is past its expire time (db.c keyIsExpired:
// now > when), so at now == when it is still there with a PTTL of 0.
func (m *Master) lookup(key string, now int64) (entry, bool) {
	e, ok := m.keys[key]
	if ok && e.exp != 0 && now > e.exp {
		delete(m.keys, key)
		return entry{}, false
	}
	return e, ok
}

// Error texts, as Redis 7.0 words them.
const (
	errWrongType = "WRONGTYPE Operation against a key holding the wrong kind of value"
	errSyntax    = "ERR syntax error"
	errNotInt    = "ERR value is not an integer or out of range"
	errNotFloat  = "ERR value is not a valid float"
	errRange     = "ERR min or max is not a float"
)

func errReply(text string) Reply { return Reply{Kind: Error, Text: text} }

func wrongArgs(name string) Reply {
	return errReply("ERR wrong number of arguments for '" + strings.ToLower(name) + "' command")
}

func okReply() Reply  { return Reply{Kind: Status, Text: "OK"} }
func nilReply() Reply { return Reply{Kind: Nil} }

func intReply(n int64) Reply   { return Reply{Kind: Int, Int: n} }
func bulkReply(s string) Reply { return Reply{Kind: Bulk, Text: s} }
func wrongType() Reply         { return errReply(errWrongType) }

// parseInt parses s as Redis's string2ll does: an optional '-', then
// digits with no leading zero (but "0"), no '+', no spaces, within int64.
func parseInt(s string) (int64, bool) {
	if s == "" || len(s) > 20 {
		return 0, false
	}
	if s == "0" {
		return 0, true
	}
	neg := s[0] == '-'
	d := s
	if neg {
		d = s[1:]
	}
	if d == "" || d[0] < '1' || d[0] > '9' {
		return 0, false
	}
	var u uint64
	for i := 0; i < len(d); i++ {
		c := d[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if u > (math.MaxUint64-9)/10 {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	if neg {
		if u > 1<<63 {
			return 0, false
		}
		return -int64(u), true
	}
	if u > math.MaxInt64 {
		return 0, false
	}
	return int64(u), true
}

// strtod parses s as C's strtod over the whole string does (leading
// spaces, a sign, decimal or hexadecimal, "inf", "infinity", "nan").
func strtod(s string) (float64, bool) {
	t := strings.TrimLeft(s, " \t\n\v\f\r")
	if t == "" {
		return 0, false
	}
	body := strings.TrimLeft(t, "+-")
	if len(t)-len(body) > 1 {
		return 0, false
	}
	switch strings.ToLower(body) {
	case "inf", "infinity":
		if t[0] == '-' {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	case "nan":
		return math.NaN(), true
	}
	if strings.ContainsAny(body, "_") || strings.HasPrefix(body, "0b") || strings.HasPrefix(body, "0o") {
		return 0, false
	}
	if lb := strings.ToLower(body); strings.HasPrefix(lb, "0x") && !strings.Contains(lb, "p") {
		t += "p0" // C reads a hexadecimal float without an exponent; Go wants one
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return f, true // strtod gives ±HUGE_VAL or 0 and sets ERANGE
		}
		return 0, false
	}
	return f, true
}

// parseScore parses a ZADD score as Redis's string2d: no leading space,
// no NaN, no overflow.
func parseScore(s string) (float64, bool) {
	if s == "" || len(s) >= 5120 || isSpace(s[0]) {
		return 0, false
	}
	f, ok := strtod(s)
	if !ok || math.IsNaN(f) {
		return 0, false
	}
	if _, err := strconv.ParseFloat(s, 64); err != nil && strings.Contains(err.Error(), "range") {
		return 0, false
	}
	return f, true
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// formatScore writes a score as Redis 7.0's RESP2 replies do
// (addReplyDouble): "inf", "-inf", else C's "%.17g".
func formatScore(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return cFormatG17(f)
}

// cFormatG17 is C's "%.17g".
func cFormatG17(f float64) string {
	s := strconv.FormatFloat(f, 'e', 16, 64) // d.dddddddddddddddde±XX
	mant, exp, _ := strings.Cut(s, "e")
	x, _ := strconv.Atoi(exp)
	if x < -4 || x >= 17 {
		mant = trimZeros(mant)
		sign := "+"
		if x < 0 {
			sign, x = "-", -x
		}
		e := strconv.Itoa(x)
		if len(e) < 2 {
			e = "0" + e
		}
		return mant + "e" + sign + e
	}
	return trimZeros(strconv.FormatFloat(f, 'f', 16-x, 64))
}

func trimZeros(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// Keys returns the keys alive at now, sorted.
func (m *Master) Keys(now time.Duration) []string { return m.liveKeys(toMs(now)) }

func (m *Master) liveKeys(ms int64) []string {
	var out []string
	for k, e := range m.keys {
		if e.exp == 0 || ms <= e.exp {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// KeyDump is one key as Dump shows it.
type KeyDump struct {
	Key  string
	Type string // "string", "hash", "zset"
	PTTL int64  // as PTTL answers: -1 without an expiry
	// Value: a string's value; a hash's fields and values, by field; a
	// sorted set's members and scores (formatted as ZSCORE does), in its
	// order.
	Value []string
}

// Dump returns every key alive at now with its value, sorted by key: for
// a check that nothing is left behind, and to compare with a real server.
func (m *Master) Dump(now time.Duration) []KeyDump {
	ms := toMs(now)
	var out []KeyDump
	for _, k := range m.Keys(now) {
		e := m.keys[k]
		d := KeyDump{Key: k, PTTL: -1}
		if e.exp != 0 {
			d.PTTL = e.exp - ms
		}
		switch e.typ {
		case typeString:
			d.Type, d.Value = "string", []string{e.str}
		case typeHash:
			d.Type = "hash"
			fields := make([]string, 0, len(e.hash))
			for f := range e.hash {
				fields = append(fields, f)
			}
			slices.Sort(fields)
			for _, f := range fields {
				d.Value = append(d.Value, f, e.hash[f])
			}
		case typeZSet:
			d.Type = "zset"
			for _, it := range e.z.items {
				d.Value = append(d.Value, it.member, formatScore(it.score))
			}
		}
		out = append(out, d)
	}
	return out
}

// Held returns the string value of key at now and the first instant of
// the master's clock at which the key is gone (Never for no expiry), or
// false if key holds no string at now. It changes nothing: a checker's
// look at the keyspace.
func (m *Master) Held(now time.Duration, key string) (value string, gone time.Duration, ok bool) {
	e, ok := m.keys[key]
	if !ok || e.typ != typeString || e.exp != 0 && toMs(now) > e.exp {
		return "", 0, false
	}
	if e.exp == 0 {
		return e.str, math.MaxInt64, true
	}
	return e.str, time.Duration(e.exp+1) * time.Millisecond, true
}
