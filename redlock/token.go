package redlock

import (
	"encoding/base64"
	"encoding/binary"
	"strings"
)

// A lock's token: newToken makes a fresh one per acquisition, shortToken
// shows it in logs.

// tokenBytes is the token's entropy: 128 bits, as the Redlock spec asks of
// a value that must be unique across all clients and all locks.
const tokenBytes = 16

// newToken returns a fresh token, one per acquisition: 128 random bits in
// base64url, after "<label>/" when the Locker has an owner label.
func (l *Locker) newToken() string {
	var b [tokenBytes]byte
	for i := 0; i < tokenBytes; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], l.env.random())
	}
	// One allocation: the label and the encoding are laid out on the
	// stack, then copied into the string.
	var buf [maxOwnerLabelLen + 1 + (tokenBytes*4+2)/3]byte
	t := buf[:0]
	if label := l.opts.OwnerLabel; label != "" {
		t = append(append(t, label...), '/')
	}
	return string(base64.RawURLEncoding.AppendEncode(t, b[:]))
}

// shortToken is what logs show: enough to correlate, too little to forge.
// An owner label is shown whole, the random part shortened.
func shortToken(t string) string {
	label, t, ok := strings.Cut(t, "/")
	if !ok {
		t, label = label, ""
	} else {
		label += "/"
	}
	if len(t) > 6 {
		return label + t[:6] + "…"
	}
	return label + t
}
