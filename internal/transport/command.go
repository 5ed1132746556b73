package transport

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlab/redlock/quorum"
)

// The wire half of the command model: a command's arguments as the links
// write them, and a reply as they read it. What each kind of command
// sends, and what its reply means, is package redlock's (cmd.go).

// A Command is one command to one master, and where its reply goes.
// Package redlock's commands implement it, as pointers into one slice per
// round: a batch of them costs no allocation of its own.
type Command interface {
	// Args appends the command, its name first, to dst: the links only
	// serialize the list.
	Args(dst []Arg) []Arg
	// Key is the key the command acts on: a Redis Cluster master sends
	// it to the shard that owns the key's slot.
	Key() string
	// Parks reports whether the command is parked for a master that is
	// not answering, and sent when it answers (a release, a waiter's
	// leave of the queue): its outcome no longer matters to its caller,
	// but it must reach the master whenever it answers again.
	Parks() bool
	// Park tells a parked command that its caller no longer waits for it.
	Park()
	// Answer hands the command's reply, which came at now, to its caller.
	Answer(r Raw, now time.Time)
	// Done hands the command's outcome without a reply (it failed, or
	// was never sent), at now, to its caller.
	Done(rep quorum.Reply, now time.Time)
	// Resend reports whether the command, answered NOSCRIPT (it did not
	// run), is sent again after the scripts are loaded, and if so marks
	// it sent again; ahead reports whether a command matching is queued,
	// in flight or parked on its stream.
	Resend(ahead func(matching func(Command) bool) bool) bool
}

// Arg is one argument of a command, laid out without allocating: the
// string s followed by suffix (a key's fence counter: key + ":fence"), or,
// when num is set, the number n in decimal.
type Arg struct {
	s, suffix string
	n         uint64
	num       bool
}

// Str is the argument s.
func Str(s string) Arg { return Arg{s: s} }

// Num is the argument n, in decimal.
func Num(n uint64) Arg { return Arg{n: n, num: true} }

// Suffixed is the argument s + suffix, written without building it.
func Suffixed(s, suffix string) Arg { return Arg{s: s, suffix: suffix} }

// String is the argument as it goes on the wire.
func (a Arg) String() string {
	if a.num {
		return strconv.FormatUint(a.n, 10)
	}
	return a.s + a.suffix
}

// Raw is one RESP reply, as every link reads it.
type Raw struct {
	Type byte // '+', '-', ':', '$' (bulk), '_' (null)
	N    int64
	Text string // error text, bulk or simple string (when kept)
}

// noScript reports a NOSCRIPT reply: the command did not run.
func (r Raw) noScript() bool { return r.Type == '-' && strings.HasPrefix(r.Text, "NOSCRIPT") }

// redirect reports a MOVED or ASK reply: the slot is (being) served by
// another node.
func (r Raw) redirect() bool {
	return r.Type == '-' && (strings.HasPrefix(r.Text, "MOVED ") || strings.HasPrefix(r.Text, "ASK "))
}

// ServerError is an error reply from a master, e.g. NOSCRIPT or NOPERM.
type ServerError string

func (e ServerError) Error() string { return "redlock: master replied: " + string(e) }

// ErrUnexpected is a reply a command cannot have.
var ErrUnexpected = errors.New("redlock: unexpected reply from master")
