package world

import "github.com/quorumlab/redlock/internal/sim"

// FNV-64a's multiply, inline: hash/fnv's Write takes a []byte, and converting every
// string would allocate. Integers go in as whole 64-bit words (one
// multiply, then the high half folded down so that every bit of the word
// reaches the low bits), not byte by byte: they are most of what is
// hashed.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func (w *World) mixInt(v uint64) {
	h := (w.hash ^ v) * fnvPrime
	w.hash = h ^ h>>32
}

// mixString mixes s eight bytes at a time, as words, then its length
// (so that "ab","c" differs from "a","bc").
func (w *World) mixString(s string) {
	h := w.hash
	for ; len(s) >= 8; s = s[8:] {
		v := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		h = (h ^ v) * fnvPrime
		h ^= h >> 32
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		v |= uint64(s[i]) << (8 * i)
	}
	h = (h ^ v ^ uint64(len(s))<<56) * fnvPrime
	w.hash = h ^ h>>32
}

// mixEvent mixes an event's time, kind, subject and id.
func (w *World) mixEvent(k evKind, x int, id uint64) {
	w.mixInt(uint64(w.now))
	w.mixInt(uint64(k)<<32 | uint64(uint32(x)))
	w.mixInt(id)
}

func (w *World) mixReply(r sim.Reply) {
	w.mixInt(uint64(r.Kind))
	w.mixInt(uint64(r.Int))
	w.mixString(r.Text)
	for _, e := range r.Array {
		w.mixReply(e)
	}
}
