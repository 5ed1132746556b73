package sim

import (
	"crypto/sha1"
	"encoding/hex"
	"math"
	"strconv"
	"strings"
)

// What the models need of Lua 5.1 and of Redis's scripting API, so that
// each model can follow its script line by line.

// clock is the time a script runs at: the master's milliseconds (expiry)
// and microseconds (TIME).
type clock struct{ ms, us int64 }

// at is Lua's KEYS[i] or ARGV[i] (1-based): ok false for nil.
func at(a []string, i int) (string, bool) {
	if i < 1 || i > len(a) {
		return "", false
	}
	return a[i-1], true
}

// atNum is KEYS[x] for a Lua number x: nil unless x is an integer in
// range.
func atNum(a []string, x float64) (string, bool) {
	if x != math.Trunc(x) || x < 1 || x > float64(len(a)) {
		return "", false
	}
	return a[int(x)-1], true
}

// Errors a script raises, as they read once the server's " script: <sha>,
// on @user_script:<line>." suffix is cut (tests compare them so).
const errArgType = "ERR Lua redis lib command arguments must be strings or integers"

// luaError is a Lua runtime error (arithmetic on nil, a bad 'for' limit):
// Redis words it "ERR user_script:<line>: <message>"; the models name the
// message without the line.
func luaError(msg string) Reply { return errReply("ERR user_script: " + msg) }

// tonumber is Lua 5.1's tonumber on a string (luaO_str2d): strtod over
// the string, hexadecimal integers, surrounding spaces allowed.
func tonumber(s string) (float64, bool) {
	t := strings.TrimRight(strings.TrimLeft(s, " \t\n\v\f\r"), " \t\n\v\f\r")
	if t == "" {
		return 0, false
	}
	body := strings.TrimLeft(t, "+-")
	if len(t)-len(body) <= 1 && (strings.HasPrefix(body, "0x") || strings.HasPrefix(body, "0X")) {
		u, err := strconv.ParseUint(body[2:], 16, 64)
		if err != nil {
			return 0, false
		}
		if t[0] == '-' {
			return -float64(u), true // glibc's strtod reads hexadecimal too
		}
		return float64(u), true
	}
	return strtod(t)
}

// luaString is tostring of a Lua number ("%.14g").
func luaString(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e14 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', 14, 64)
}

// luaInt is the integer reply a script's Lua number becomes (a C cast
// of the double: toward zero).
func luaInt(f float64) Reply { return intReply(int64(f)) }

// sha1hex is redis.sha1hex, in one allocation (the string).
func sha1hex(s string) string {
	sum := sha1.Sum([]byte(s))
	var buf [2 * sha1.Size]byte
	hex.Encode(buf[:], sum[:])
	return string(buf[:])
}

// dec is decimal.lua's dec: a fence string without leading zeros, "0" for
// zero, or ok false when s is not all ASCII digits (empty is zero).
func dec(s string) (string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return "", false
		}
	}
	s = strings.TrimLeft(s, "0")
	if s == "" {
		return "0", true
	}
	return s, true
}

// cmpDec is decimal.lua's cmp: the longer is larger, then bytewise.
func cmpDec(a, b string) int {
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

// decNil is dec on a value that may be nil (dec(nil) fails in
// string.match).
func decNil(s string, ok bool) (string, bool, Reply) {
	if !ok {
		return "", false, luaError("bad argument #1 to 'match' (string expected, got nil)")
	}
	d, good := dec(s)
	return d, good, Reply{}
}

// matchMember is string.match(member, '^(%S+) (%d+) (.+)$'): the queue
// member of a waiter that asked to be handed the key.
func matchMember(s string) (id, ttl, tok string, ok bool) {
	i := 0
	for i < len(s) && !isSpace(s[i]) {
		i++
	}
	if i == 0 || i == len(s) || s[i] != ' ' {
		return "", "", "", false
	}
	j := i + 1
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	if j == i+1 || j == len(s) || s[j] != ' ' || j+1 == len(s) {
		return "", "", "", false
	}
	return s[:i], s[i+1 : j], s[j+1:], true
}

// prefixToDot is string.match(s, '^[^.]*').
func prefixToDot(s string) string {
	if i := strings.IndexByte(s, '.'); i >= 0 {
		return s[:i]
	}
	return s
}
