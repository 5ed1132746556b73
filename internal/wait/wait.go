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

// Start begins the wait at now. busy: this Locker has callers waiting for
// the same keys (they go first: a new caller queues behind them instead of
// racing the one the next release wakes); handingOn: a release of the key
// recently named a queued caller (a round now would race it).
func (m *Machine) Start(now time.Time, busy, handingOn bool) Action {
	if m.st != stNew {
		return m.invalid()
	}
	m.round, m.held = true, true
	switch {
	case !m.cfg.Reader && busy:
		// Behind this Locker's waiters, which its release wakes in turn
		// when it names nobody. (Not readers: they can all hold at once,
		// and nothing they wait for names one.)
		m.register(false)
		m.round = false
	case m.cfg.Queued && handingOn:
		// Behind the masters' queue.
		m.register(true)
		m.round = false
		m.joined, m.everJoined = true, true
		return m.io(stStartJoin, Action{Kind: Join})
	}
	return m.loop(now)
}

func (m *Machine) register(mayHand bool) {
	m.registered = true
	m.grant = m.local.Register(mayHand)
}

func (m *Machine) io(st state, a Action) Action {
	m.st = st
	return a
}

// loop decides what is next: a round when one is due, else a sleep.
func (m *Machine) loop(now time.Time) Action {
	if !m.round {
		return m.sleep(now)
	}
	m.attempt++
	m.began = now
	a := Action{Kind: Round}
	if m.everJoined && m.cfg.Writer {
		// Its grant takes it off the queue where it grants, also where a
		// release that named it popped another waiter.
		a.InQueue, a.Ask = true, m.ask && m.joined
	}
	m.ask = false
	return m.io(stRound, a)
}

// RoundDone: the round Round asked for came back at now.
func (m *Machine) RoundDone(now time.Time, r RoundResult) Action {
	if m.st != stRound {
		return m.invalid()
	}
	switch {
	case r.Final:
		m.acquired = r.Acquired
		return m.done(EndRound)
	case r.CtxEnded:
		return m.done(EndRoundCtx)
	case r.Place > 1:
		// Behind other waiters on a majority: the key is the head's; a
		// round the queue refused is not an attempt. Where the round was
		// granted all the same (the masters disagree on the head), its
		// grant took this waiter off the queue: back in, at its place.
		m.attempt--
		m.round, m.woke, m.behind = false, false, r.Place
		if r.GrantedSomewhere {
			return m.io(stPlaceJoin, Action{Kind: Join})
		}
		return m.sleep(now)
	case m.cfg.MaxAttempts > 0 && m.attempt >= m.cfg.MaxAttempts:
		return m.done(EndGaveUp)
	}
	// A round that found the lock held by a majority waits to be woken by
	// name; one that split the votes retries on the short backoff, since
	// nobody may be left to release. A writer refused for live readers
	// waits for them to leave, which is announced: the short backoff too.
	m.held = r.HeldByMajority
	if m.cfg.Writer {
		m.held = r.WriterHeld
	}
	rejoin := true
	if m.woke && m.cfg.Queued && !m.retried {
		// Woken on the first master's announcement, the round may have
		// found others not yet released: retry at once if a majority has
		// released by now, or when it has.
		m.retried = true
		now2, later := m.local.WakeOnMajority()
		if now2 {
			return m.loop(now)
		}
		rejoin = !later
	}
	if !r.HeldElsewhere || !rejoin {
		return m.sleep(now)
	}
	if !m.registered {
		m.register(true) // from now on a release of the key wakes it
	}
	if m.cfg.Queued {
		// (Again:) a release may have taken it off the queue.
		m.joined, m.everJoined = true, true
		return m.io(stRoundJoin, Action{Kind: Join})
	}
	return m.mayPoll(now)
}

// mayPoll polls, after a failed round, when the holder's keys expire (a
// holder that dies releases nothing): on a round that found the lock held
// by a majority, for one resource that is not read-locked.
func (m *Machine) mayPoll(now time.Time) Action {
	if m.held && !m.cfg.Multi && !m.cfg.Reader {
		return m.io(stRoundProbe, Action{Kind: Probe})
	}
	return m.sleep(now)
}

// JoinDone: the join Join asked for came back at now.
func (m *Machine) JoinDone(now time.Time) Action {
	switch m.st {
	case stRoundJoin:
		if !m.woke && m.local.FreedSince(m.began) {
			// Released meanwhile, with nobody named: this caller was not
			// yet waiting to be told.
			m.held = false
		}
		return m.mayPoll(now)
	case stPlaceJoin, stStartJoin:
		return m.sleep(now)
	case stPollJoin:
		return m.polledOn(now)
	case stGiveBackJoin:
		m.joined, m.everJoined, m.round = true, true, false
		m.grant = false // named from now on: its member carries no token
		return m.loop(now)
	}
	return m.invalid()
}

// ProbeDone: the poll came back at now: free, the key is not held on a
// majority; expires, when it will have expired on a majority (zero: not
// known). The driver has counted any grants the poll saw.
func (m *Machine) ProbeDone(now time.Time, free bool, expires time.Time) Action {
	switch m.st {
	case stRoundProbe:
		m.expires = expires
		if m.local.TakeGrants() {
			return m.done(EndHanded)
		}
		if m.local.Grants() > 0 {
			// Handed the key by a minority whose messages were lost: the
			// poll read every master, so complete at once.
			return m.io(stComplete, Action{Kind: Complete})
		}
		if free && !expires.IsZero() {
			// Gone from a majority between the round and this read:
			// expired, or released to a waiter a release named, whose
			// round is on its way. Look again once such a round has had
			// its MasterTimeout, not at once.
			if at := now.Add(m.cfg.MasterTimeout); at.After(m.expires) {
				m.expires = at
			}
		}
		return m.sleep(now)
	case stGrantProbe:
		if m.local.TakeGrants() {
			return m.done(EndHanded)
		}
		// The poll read every master: what it did not find handed to the
		// waiter went to another, or is free (completed next).
		return m.io(stComplete, Action{Kind: Complete})
	case stPollProbe:
		if m.local.TakeGrants() {
			return m.done(EndHanded)
		}
		if m.local.Grants() > 0 {
			// Handed the key by a minority, whose messages were lost: as
			// above.
			return m.io(stComplete, Action{Kind: Complete})
		}
		switch {
		case !free:
			m.suspect, m.round, m.behind, m.expires = false, false, 0, expires
			if m.probes++; m.probes%4 == 0 {
				return m.io(stPollJoin, Action{Kind: Join})
			}
		case m.suspect:
			m.suspect = false
		default:
			return m.io(stPollRank, Action{Kind: Rank})
		}
		return m.polledOn(now)
	}
	return m.invalid()
}

// polledOn ends a poll's handling.
func (m *Machine) polledOn(now time.Time) Action {
	m.woke, m.expiring = false, false
	return m.loop(now)
}

// RankDone: the rank came back at now: the waiter's place + 1 on a
// majority of masters, 0 off the queue there, 1 when too few answered.
func (m *Machine) RankDone(now time.Time, r uint64) Action {
	switch m.st {
	case stPollRank:
		// Free: its place says whether the key is its to take. Off the
		// queue (a release named it; the wake was lost): a round now.
		// Behind another waiter: that waiter's, unless the queue has not
		// moved since its last poll that found the key free. Woken at the
		// holder's expiry (§14.2), the head takes the key at once.
		switch {
		case r == 0:
			m.behind = 0
		case r == 1 && m.expiring:
			m.suspect, m.behind = false, 0
		case r == 1:
			m.suspect, m.round, m.behind = true, false, 0
		case m.behind == 0 || r < m.behind:
			m.round, m.behind = false, r
		default:
			m.behind = 0
		}
		return m.polledOn(now)
	case stWokenRank:
		if r > 1 {
			// Woken by a release that named nobody (§14.1 item 2): the
			// key is the head's, and a round now would split its handoff.
			m.round, m.woke, m.behind = false, false, r
		}
		return m.loop(now)
	}
	return m.invalid()
}

// CompleteDone: the completion came back at now (the driver has counted
// the grants it took).
func (m *Machine) CompleteDone(now time.Time) Action {
	if m.st != stComplete {
		return m.invalid()
	}
	if m.local.TakeGrants() {
		return m.done(EndHanded)
	}
	// Still no majority: give back, so that the masters that handed it
	// the key hand it on, and join again, at the same place, as a waiter
	// that releases name: the masters disagree on the head, or some do
	// not answer, and a waiter handed a minority cannot make progress on
	// its own, where one named makes rounds (docs/design.md §14.3 item 5).
	return m.io(stGiveBack, Action{Kind: GiveBack, Again: true})
}

// GiveBackDone: the give-back came back at now.
func (m *Machine) GiveBackDone(now time.Time) Action {
	if m.st != stGiveBack {
		return m.invalid()
	}
	return m.io(stGiveBackJoin, Action{Kind: Join})
}

// sleep waits for the next event: the timer after the backoff (later in
// the queue, where it is woken by name), or at the holder's expiry if
// that is sooner, or after a jittered MasterTimeout for a waiter handed a
// minority of grants.
func (m *Machine) sleep(now time.Time) Action {
	if m.giving {
		m.st, m.expiring = stSleeping, false
		return Action{Kind: Sleep, Delay: max(m.giveAt.Sub(now), 0)}
	}
	n := max(m.attempt, 1)
	d := m.local.Backoff(n)
	if m.joined && m.held && !m.woke && !m.suspect {
		d = m.local.Backoff(n + QueuedSteps + m.probes)
	}
	m.expiring = false
	if !m.expires.IsZero() {
		if u := m.expires.Sub(now); u < d {
			d, m.expiring = max(u, 0), true
		}
		m.expires = time.Time{}
	}
	m.st = stSleeping
	return Action{Kind: Sleep, Delay: d}
}

// TimerFired: the sleep's timer fired at now.
func (m *Machine) TimerFired(now time.Time) Action {
	if m.st != stSleeping {
		return m.invalid()
	}
	if m.giving {
		// No majority came: read every master (a round would be refused
		// where its own grant is); the poll counts a key found holding
		// the grant token, and its round trip lets the grants still on
		// their way arrive.
		m.giving = false
		return m.io(stGrantProbe, Action{Kind: Probe})
	}
	// The backoff covers a lost release message. Only the first waiter in
	// line polls: the others are woken in turn. A queued waiter's poll
	// only asks whether the key is free on a majority: a round at every
	// poll would split the votes of the handoffs in progress.
	m.round = !m.registered || m.local.FirstInLine()
	if m.round && m.joined && m.held && !m.woke {
		return m.io(stPollProbe, Action{Kind: Probe})
	}
	return m.polledOn(now)
}

// Woken: a release named the waiter, or handed it the key, at now.
func (m *Machine) Woken(now time.Time) Action {
	if m.st != stSleeping {
		return m.invalid()
	}
	if m.local.TakeGrants() {
		return m.done(EndHanded)
	}
	if m.local.Grants() > 0 {
		// Handed the key by some masters, not yet a majority: the others'
		// grants are on their way (the majority's wakes it again), or
		// went to another waiter. Wait the first backoff for them, from
		// the first grant: later wakes do not put it off.
		if !m.giving {
			m.giving, m.giveAt = true, now.Add(m.local.Backoff(1))
		}
		m.round = false
		return m.sleep(now)
	}
	m.round, m.woke, m.retried = true, true, false
	m.expires, m.expiring = time.Time{}, false // released: the next holder has its own TTL
	if !m.joined {
		return m.loop(now)
	}
	switch {
	case m.local.Popped():
		m.joined = false // the release that named it took it off
	case m.cfg.Writer:
		m.ask = true // a writer's round asks its place itself
	default:
		return m.io(stWokenRank, Action{Kind: Rank})
	}
	return m.loop(now)
}

// CtxEnded: the caller's context ended while sleeping.
func (m *Machine) CtxEnded(now time.Time) Action {
	if m.st != stSleeping {
		return m.invalid()
	}
	return m.done(EndCtx)
}

// Closed: the Locker began closing while sleeping.
func (m *Machine) Closed(now time.Time) Action {
	if m.st != stSleeping {
		return m.invalid()
	}
	return m.done(EndClosed)
}
