package world

import "github.com/quorumlab/redlock/internal/sim"

// FNV-64a, inline: hash/fnv's Write takes a []byte, and converting every
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

func (w *World) mixString(s string) {
	h := w.hash
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	h ^= 0xff // end of string: "ab","c" differs from "a","bc"
	h *= fnvPrime
	w.hash = h
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
