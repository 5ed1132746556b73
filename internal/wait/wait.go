// Package wait is the waiting side of a lock acquisition (docs/design.md
// §14, §14.3) as a state machine with no I/O and no clock.
//
// A Machine is one Lock call's wait. Each event (a round's result, a join
// or poll that came back, the timer, a wake, the caller's context ending,
// the Locker closing) is a method that takes the time and returns the one
// Action to take next: a round, a join of the masters' queue, a poll, a
// rank, a completion or give-back of the grants, a sleep until the next
// event, or the end of the wait. The driver (redlock's lock) performs the
// action and reports its outcome as the next event; a simulator can do the
// same with simulated masters and time.
//
// What the wait reads of its Locker's own memory (the waker: which
// releases named it, which masters handed it the key) it asks of Local,
// synchronously; Local does no I/O either.
package wait

import (
	"fmt"
	"time"
)

// Kind is what an Action asks the driver to do.
type Kind uint8

const (
	_        Kind = iota
	Round         // one acquisition round; then RoundDone
	Join          // join the masters' queue (ZADD NX); then JoinDone
	Probe         // poll whether the key is free, and when it expires; then ProbeDone
	Rank          // read the waiter's place in the queue; then RankDone
	Complete      // take the key with the grant token where it is free; then CompleteDone
	GiveBack      // give the grant token back and wait on, named by releases; then GiveBackDone
	Sleep         // wait for the timer (after Delay), a wake, the context or Close
	Done          // the wait is over: End says how
)

var kindNames = [...]string{"", "Round", "Join", "Probe", "Rank", "Complete", "GiveBack", "Sleep", "Done"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// End is how a wait ended.
type End uint8

const (
	_           End = iota
	EndRound        // the last round's outcome stands: its lock, or its error (not one to retry)
	EndRoundCtx     // the last round failed and the context had ended
	EndGaveUp       // Config.MaxAttempts rounds failed
	EndHanded       // the masters handed the waiter the key: Local.TakeGrants took the lock
	EndCtx          // the context ended while waiting
	EndClosed       // the Locker began closing while waiting
	EndInvalid      // an event that does not fit the state: a driver's bug
)

// Action is the next thing to do.
type Action struct {
	Kind Kind
	// InQueue (Round): the round carries the writer's queue entry
	// (rw_write.lua), and Ask: it asks the writer's place too.
	InQueue, Ask bool
	// Again (GiveBack): the waiter waits on, no longer one a release
	// may hand the key to: releases name it, and it acquires by rounds of
	// its own (§14.3 item 5).
	Again bool
	// Delay (Sleep): when the timer fires.
	Delay time.Duration
	// End (Done): how the wait ended.
	End End
}

// Target is what the wait is for.
type Target struct {
	// Queued: waiters for it join the masters' queue (one resource, not a
	// reader).
	Queued bool
	// Reader: a read lock (it polls no expiry: nothing names a reader);
	// Writer: a writer of a read-write lock that records its intent.
	Reader, Writer bool
	// Multi: several resources (no poll of an expiry).
	Multi bool
}

// Config is a wait's fixed inputs.
type Config struct {
	Target
	// Need is the majority; MaxAttempts bounds the rounds (0: no bound).
	Need, MaxAttempts int
	MasterTimeout     time.Duration
}

// QueuedSteps is how many doublings later the backoff of a waiter in the
// masters' queue starts: it is woken by name, and a poll only makes up for
// a lost wake (docs/design.md §14.1 item 5).
const QueuedSteps = 4

// Local is what the wait asks of its Locker's memory. Each call is
// synchronous and does no I/O; the ones marked so change that memory.
type Local interface {
	// Register makes the waiter one that the Locker's releases and its
	// masters' announcements wake (changes); with mayHand, also one a
	// release may hand the key to (§14.3), which it reports.
	Register(mayHand bool) (grant bool)
	// Grants is how many masters have handed the waiter the key.
	Grants() int
	// TakeGrants takes the lock a majority of masters handed the waiter,
	// if they did and validity is left (changes: the lock is handed out).
	TakeGrants() bool
	// FirstInLine: no waiter of this Locker for the same keys is ahead.
	FirstInLine() bool
	// Popped: a release named the waiter (and took it off the queue)
	// since it was last asked (changes: clears that).
	Popped() bool
	// WakeOnMajority, after a round made on a wake by name failed: now, a
	// majority has announced that release; later, not yet, and the
	// majority's announcement will wake the waiter again (changes).
	WakeOnMajority() (now, later bool)
	// FreedSince: a master announced, since t, a release of the key that
	// woke nobody here.
	FreedSince(t time.Time) bool
	// Backoff is the jittered wait after attempt n (the Locker's retry
	// policy).
	Backoff(n int) time.Duration
}

// RoundResult is what the driver tells of a round.
type RoundResult struct {
	// Final: acquired, or an error that retrying cannot change (not
	// "not acquired", or a refused permission); Acquired: the former.
	Final, Acquired bool
	// CtxEnded: the caller's context had ended by the round's end.
	CtxEnded bool
	// Place: for a round that asked the writer's place, its place + 1 as
	// the majority answered (0 otherwise).
	Place uint64
	// GrantedSomewhere: a master granted the failed round; HeldByMajority:
	// a majority refused it for another owner's key; WriterHeld: for a
	// writer, a majority refused it for another writer's; HeldElsewhere:
	// some master refused it for another owner's key.
	GrantedSomewhere, HeldByMajority, WriterHeld, HeldElsewhere bool
}

// state is where the machine is: which outcome it waits for, and for an
// I/O action, what it does with its outcome.
type state uint8

const (
	stNew          state = iota // Start not yet called
	stRound                     // a round is out: RoundDone
	stRoundJoin                 // a join after a failed round: JoinDone, then FreedSince, maybe a poll
	stRoundProbe                // a poll after a failed round: ProbeDone
	stPlaceJoin                 // a join back at its place (a writer's round refused by its place): JoinDone
	stStartJoin                 // a join behind the masters' queue at the start: JoinDone
	stSleeping                  // waiting: TimerFired, Woken, CtxEnded, Closed
	stPollProbe                 // a queued waiter's poll: ProbeDone
	stPollJoin                  // its every-fourth join: JoinDone
	stPollRank                  // its rank, the key found free: RankDone
	stWokenRank                 // its rank on a wake that named nobody: RankDone
	stGrantProbe                // a poll on a minority of grants: ProbeDone
	stComplete                  // completing a minority of grants: CompleteDone
	stGiveBack                  // giving them back: GiveBackDone
	stGiveBackJoin              // joining again after the give-back: JoinDone
	stDone                      // over
)

var stateNames = [...]string{"New", "Round", "RoundJoin", "RoundProbe", "PlaceJoin", "StartJoin", "Sleeping",
	"PollProbe", "PollJoin", "PollRank", "WokenRank", "GrantProbe", "Complete", "GiveBack", "GiveBackJoin", "Done"}

func (s state) String() string { return stateNames[s] }

// Machine is one wait. The zero value is not usable: New makes one.
type Machine struct {
	cfg   Config
	local Local
	st    state

	end        End
	attempt    int       // rounds made
	began      time.Time // the last round's start
	registered bool      // Local.Register was called
	grant      bool      // a waiter a release may hand the key to
	acquired   bool      // the last round acquired the lock (EndRound)

	// round: the next step is a round. joined: the waiter has (as far as
	// it knows) an entry in the masters' queue; woke: this round follows a
	// wake; retried: once per wake.
	round, joined, woke, retried bool
	// ask: the next round is a waiting writer's on a wake, and asks its
	// place in the queue itself (rw_write.lua) instead of a rank first.
	// everJoined: the waiter has joined the queue at some time; a release
	// that named it took it off only the masters that agreed on the head.
	ask, everJoined bool
	probes          int    // polls of a queued waiter that found the key held
	suspect         bool   // its last poll found the key free, with itself at the head
	behind          uint64 // its place + 1 when its last poll found the key free, with waiters ahead
	held            bool   // the last round found the lock held on a majority
	// expires: when the holder's keys will have expired on a majority, as
	// the last poll told (zero: not known); expiring: the timer is set for
	// that instant.
	expires  time.Time
	expiring bool
	// giving: handed the key by a minority; at giveAt, if no majority has
	// come, the waiter reads every master (a Probe counts a key holding
	// its token), completes, and gives back.
	giving bool
	giveAt time.Time
}

// New returns a wait; Start begins it.
func New(cfg Config, local Local) Machine {
	return Machine{cfg: cfg, local: local}
}

// Attempts is how many rounds the wait made.
func (m *Machine) Attempts() int { return m.attempt }

// Waited reports whether the lock, if acquired, was waited for: others may
// be waiting too, so its release hands the key on.
func (m *Machine) Waited() bool { return m.registered || m.attempt > 1 }

// EverJoined reports whether the waiter joined the masters' queue at some
// time: a join may reach a master after the release that named it there,
// so the lock it acquires takes its member off the queue on release.
func (m *Machine) EverJoined() bool { return m.everJoined }

// Leave is what the waiter takes back from the masters once the wait is
// over.
type Leave uint8

const (
	LeaveNothing  Leave = iota
	LeaveGiveBack       // give the grant token back (handing on what was handed), and leave, in one round
	LeaveWhere          // a writer that acquired: leave where its round did not grant
	LeaveQueue          // leave the queue
	LeaveUnnamed        // taken off by a release that named it: leave where a join may have landed since
)

// Leave says what to take back once Done: a waiter still in the queue
// leaves it (one taken off by the release that woke it has left). A
// writer's grant took it off the masters that granted: the others are
// told; also when a release named it, since that release may have popped
// another waiter on some masters.
func (m *Machine) Leave() Leave {
	switch {
	case m.end == EndHanded:
		return LeaveNothing // its Unlock takes it off the queue where it still is
	case m.grant && m.everJoined:
		return LeaveGiveBack // a master may have handed it the key
	case m.everJoined && m.acquired && m.cfg.Writer:
		return LeaveWhere
	case m.joined || m.everJoined && m.cfg.Writer:
		return LeaveQueue
	case m.everJoined:
		// Masters that disagreed on the head popped another waiter, and a
		// join may land after the release that named it.
		return LeaveUnnamed
	}
	return LeaveNothing
}

// invalid ends the wait on an event that does not fit the state.
func (m *Machine) invalid() Action {
	m.st, m.end = stDone, EndInvalid
	return Action{Kind: Done, End: EndInvalid}
}

func (m *Machine) done(e End) Action {
	m.st, m.end = stDone, e
	return Action{Kind: Done, End: e}
}
