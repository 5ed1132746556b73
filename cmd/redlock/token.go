package main

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// randomLen is the length of a token's random part: 16 bytes in unpadded
// base64url (redlock/keys.go).
const randomLen = 22

// splitToken splits a lock value written by a Locker with an owner label,
// "<label>/<22 base64url chars>", into the label and the random part. Any
// other value (no label, or written by another client such as redsync,
// whose tokens are padded standard base64 and may contain '/') has no
// label.
func splitToken(t string) (label, random string) {
	i := strings.LastIndexByte(t, '/')
	if i <= 0 || len(t)-i-1 != randomLen || !isLabel(t[:i]) {
		return "", t
	}
	for _, c := range t[i+1:] {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return "", t
		}
	}
	return t[:i], t[i+1:]
}

// isLabel is redlock's rule for Options.OwnerLabel.
func isLabel(s string) bool {
	return len(s) <= 64 && utf8.ValidString(s) && !strings.ContainsRune(s, '/') &&
		strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) < 0
}

// shortToken is how a token is shown: the label whole, the random part's
// first 6 characters and "…". Enough to tell holders apart, not enough to
// release or extend someone else's lock with. Characters that could upset
// a terminal are replaced.
func shortToken(t string) string {
	label, random := splitToken(t)
	if label != "" {
		label += "/"
	}
	n := 0
	for i := range random {
		if n == 6 {
			random = random[:i] + "…"
			break
		}
		n++
	}
	return printable(label + random)
}

// printable replaces control and invalid characters with '?'.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
}

// matchToken reports whether the user's -token names t: the whole token,
// or its shortened form as shown (with or without the "…"), as long as it
// shows at least 6 characters of the random part.
func matchToken(given, t string) bool {
	if given == t {
		return true
	}
	given = strings.TrimSuffix(given, "…")
	label, random := splitToken(t)
	if label != "" {
		g, ok := strings.CutPrefix(given, label+"/")
		if !ok {
			return false
		}
		given = g
	}
	return len(given) >= 6 && strings.HasPrefix(random, given)
}
