package wait

import "time"

// The events of a wait (wait.go): the methods by which the driver reports
// each one, and how the Machine decides the Action that follows.

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
