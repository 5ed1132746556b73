package redlock

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quorumlab/redlock/quorum"
)

// Sentinel errors; callers branch on them with errors.Is.
var (
	// ErrNotAcquired: no majority of masters granted the lock, or the
	// majority arrived too late to leave any validity.
	ErrNotAcquired = errors.New("redlock: not acquired")
	// ErrLost: the lock is no longer ours (its deadline passed, another
	// owner holds it, it was released), or an extension did not reach a
	// majority before the deadline.
	ErrLost = errors.New("redlock: lock lost")
	// ErrInvalid: bad options or a bad resource name. The message names
	// the rule.
	ErrInvalid = errors.New("redlock: invalid argument")
	// ErrClosed: the Locker was closed.
	ErrClosed = errors.New("redlock: locker closed")
	// ErrUnlocked: Unlock of a lock already unlocked. Nothing is sent; it
	// says nothing about whether the lock had been lost.
	ErrUnlocked = errors.New("redlock: already unlocked")
	// ErrHeld: an acquisition failed because another owner holds the
	// lock: more masters refused (another token there) than N − majority,
	// whatever the others did. Such errors wrap ErrNotAcquired too.
	ErrHeld = errors.New("redlock: held by another owner")
	// ErrNoLeader: Election.Leader found no leader reported by a majority
	// of masters.
	ErrNoLeader = errors.New("redlock: no leader")
)

type invalidError struct{ rule string }

func (e *invalidError) Error() string { return "redlock: invalid argument: " + e.rule }
func (e *invalidError) Unwrap() error { return ErrInvalid }

func invalid(rule string) error { return &invalidError{rule} }

// nilContext is the error of an operation called with a nil context.
func nilContext(op string) error {
	return invalid(op + ": nil context (pass context.Background() or a request's context)")
}

// MasterResult is one master's part in a round.
type MasterResult struct {
	// Addr is the master's address as its client reports it (may be empty
	// for client types that do not expose one).
	Addr string
	// Outcome is what became of the call to this master; its String is
	// e.g. "timed out".
	Outcome quorum.Outcome
	// Latency is from the start of the round to this master's reply.
	Latency time.Duration
	// Err is the master's error, if any (nil for OK and Pending).
	Err error
}

// Error is the error of an operation that did not succeed. It unwraps to its
// sentinel (ErrNotAcquired, with ErrHeld when the refusals alone made a
// majority impossible; ErrLost; ErrClosed; ErrUnlocked; ErrNoLeader), to the
// caller's context error when the context ended first, and to ErrInvalid
// naming the command when a master's ACL refused it. Its message counts the
// masters by outcome, e.g. "0 of 5 ok, need 3 (5 failed: dial tcp
// 127.0.0.1:7001: connect: connection refused)".
type Error struct {
	// Op names the operation: "acquire", "extend", "unlock", ...
	Op string
	// Resource is the resource name.
	Resource string
	// Need is the majority size; Masters has one entry per master.
	Need    int
	Masters []MasterResult
	// Reason says why in words, e.g. "majority arrived after the validity window".
	Reason string

	kind  error // ErrNotAcquired, ErrLost, ErrClosed, or ErrInvalid (a refused unlock)
	cause error // context error, a master's refusal (ErrInvalid), or nil
}

// Count returns how many masters had outcome o.
func (e *Error) Count(o quorum.Outcome) int {
	n := 0
	for _, r := range e.Masters {
		if r.Outcome == o {
			n++
		}
	}
	return n
}

func (e *Error) Error() string {
	var b strings.Builder
	if len(e.Masters) == 0 {
		fmt.Fprintf(&b, "%v: %s %q", e.kind, e.Op, e.Resource)
		if e.Reason != "" {
			b.WriteString(": " + e.Reason)
		}
		return b.String()
	}
	fmt.Fprintf(&b, "%v: %s %q: %d of %d ok, need %d", e.kind, e.Op, e.Resource, e.Count(quorum.OK), len(e.Masters), e.Need)
	counts := make([]int, quorum.Canceled+1)
	for _, r := range e.Masters {
		if int(r.Outcome) < len(counts) {
			counts[r.Outcome]++
		}
	}
	var parts []string
	for o, c := range counts {
		if c > 0 && quorum.Outcome(o) != quorum.OK {
			parts = append(parts, fmt.Sprintf("%d %v", c, quorum.Outcome(o))+e.causeOf(quorum.Outcome(o)))
		}
	}
	if len(parts) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(parts, "; "))
	}
	if e.Reason != "" {
		b.WriteString(": " + e.Reason)
	}
	if e.cause != nil {
		fmt.Fprintf(&b, ": %v", e.cause)
	}
	return b.String()
}

// causeOf returns ": <the first master's error>" for outcome o, a kind
// of failure, and how many other distinct errors masters of that outcome
// had (an address is not a difference: "connection refused" from five
// masters is one cause); "" when there is none to show. A refusal is
// another owner's key, not a failure, and a cause already named after
// the counts (e.cause) is not repeated.
func (e *Error) causeOf(o quorum.Outcome) string {
	if o == quorum.Refused || o == quorum.Pending {
		return ""
	}
	var first string
	var seen []string
	for _, r := range e.Masters {
		if r.Outcome != o || r.Err == nil {
			continue
		}
		msg := r.Err.Error()
		if e.cause != nil && strings.Contains(e.cause.Error(), msg) {
			continue
		}
		generic := msg
		if r.Addr != "" {
			generic = strings.ReplaceAll(msg, r.Addr, "")
		}
		if slices.Contains(seen, generic) {
			continue
		}
		if first == "" {
			first = msg
		}
		seen = append(seen, generic)
	}
	switch len(seen) {
	case 0:
		return ""
	case 1:
		return ": " + first
	case 2:
		return ": " + first + ", and 1 other cause"
	}
	return fmt.Sprintf(": %s, and %d other causes", first, len(seen)-1)
}

// Unwrap returns the sentinel (ErrNotAcquired, ErrLost, ErrClosed,
// ErrUnlocked or ErrNoLeader),
// ErrHeld for an acquisition refused by too many masters, and the context
// error, if any.
func (e *Error) Unwrap() []error {
	errs := []error{e.kind}
	if e.held() {
		errs = append(errs, ErrHeld)
	}
	if e.cause != nil {
		errs = append(errs, e.cause)
	}
	return errs
}

// held reports whether an acquisition's refusals alone (another owner's
// token) made a majority impossible: refused > N − Need. With an even N a
// round is decided then, before every master answered.
func (e *Error) held() bool {
	return e.kind == ErrNotAcquired && e.Op == "acquire" && e.Need > 0 && e.Count(quorum.Refused) > len(e.Masters)-e.Need
}
