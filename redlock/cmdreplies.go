package redlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/quorumlab/redlock/quorum"
)

// Where some commands' replies go besides their round, and one reply
// read apart from cmd.go's interpret: a batched extension's answers, per
// key (extBatch, for cmdExtendBatch), a Holders or leader read's text,
// per master (semBits), and adopt.lua's PTTL and fence (adoptReply).

// errBatchDecided ends a batched extension's wait once every lock in it
// is decided.
var errBatchDecided = errors.New("redlock: every lock of the batch is decided")

// extBatch is one batched extension: its locks' keys, tokens and TTLs,
// shared read-only by the commands to every master, and per lock how many
// masters extended it.
type extBatch struct {
	keys, tokens []string
	ttls         []uint64
	need         int

	mu      sync.Mutex
	decide  context.CancelCauseFunc
	stopped bool     // the wait ended: later answers count for nothing
	flags   []string // per master, its answer ('1' extended, '0' not, per key) once read
	seen    []bool   // per master: answered (or skipped)
	open    int      // masters not answered
	ok      []uint8  // per lock: masters that extended it
}

func (b *extBatch) begin(n int, decide context.CancelCauseFunc) {
	b.flags, b.seen, b.open = make([]string, n), make([]bool, n), n
	b.ok = make([]uint8, len(b.keys))
	b.decide = decide
}

// record keeps master node's answer, before answered counts it.
func (b *extBatch) record(node int, text string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.stopped {
		b.flags[node] = text
	}
}

// answered counts master node's answer (ok: a well-formed one, recorded),
// and ends the wait once every lock is decided.
func (b *extBatch) answered(node int, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped || b.seen[node] {
		return
	}
	b.seen[node] = true
	b.open--
	if ok {
		for i := range len(b.flags[node]) {
			if b.flags[node][i] == '1' {
				b.ok[i]++
			}
		}
	}
	for _, c := range b.ok {
		if int(c) < b.need && int(c)+b.open >= b.need {
			return // still open
		}
	}
	b.decide(errBatchDecided)
}

// stop ends the counting: b.ok is final.
func (b *extBatch) stop() {
	b.mu.Lock()
	b.stopped = true
	b.mu.Unlock()
}

// semBits collects each master's answer to a Holders round (one
// character per slot), until the round's reader takes them: a reply
// after that is dropped.
type semBits struct {
	mu    sync.Mutex
	taken bool
	bits  []string
}

func (b *semBits) record(i int, s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.taken {
		b.bits[i] = s
	}
}

func (b *semBits) take() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.taken = true
	return b.bits
}

// adoptReply reads adopt.lua's answer: "<pttl>" or "<pttl> <fence>".
func adoptReply(text string) quorum.Reply {
	p, f, fenced := strings.Cut(text, " ")
	ms, err := strconv.ParseInt(p, 10, 64)
	if err != nil {
		return quorum.Reply{Outcome: quorum.Failed, Err: fmt.Errorf("%w: adopt: PTTL %q", errUnexpected, p)}
	}
	if ms < 0 {
		return quorum.Reply{Outcome: quorum.Failed, Err: fmt.Errorf("redlock: adopt: the key holds the token but has no expiry (PTTL %d): not a lock this library set", ms)}
	}
	rep := quorum.Reply{Outcome: quorum.OK, Value: uint64(ms)}
	if fenced {
		if rep.Aux, err = strconv.ParseUint(f, 10, 64); err != nil {
			return quorum.Reply{Outcome: quorum.Failed, Err: fmt.Errorf("redlock: adopt: corrupt fence counter %q: %w", f, err)}
		}
	}
	return rep
}
