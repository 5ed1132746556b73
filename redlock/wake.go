package redlock

import (
	"context"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/driver"
	"github.com/quorumlab/redlock/quorum"
)

// Wake on release (docs/design.md §14).
//
// A release deletes the key and PUBLISHes, on a channel named like the key,
// the SHA-1 of the released token. A Lock caller whose round found the key
// held registers as a waiter; the Locker subscribes to the key's channel on
// every master (one subscription connection per master, shared by all its
// waiters) and, when the release of one token has been announced by a
// majority of masters, wakes the longest-waiting of its waiters for that
// key, which retries at once. One wake per release, not one per waiter:
// the others would only find the key taken again. Counting a majority of
// announcements, not the first, means the key is free on enough masters
// for the retry to succeed, and ignores the clean-up of failed rounds
// (released on the few masters they reached). Nothing here is needed for
// safety: a message that is lost, or a subscription that is down, only
// leaves the waiter on its backoff timer.

// With a queue on the masters (queued: one resource, lock keys with a
// hash tag), a waiter also joins the key's queue there, and a release
// names the longest-waiting caller of every Locker: a Locker wakes its
// waiter only when a majority of masters named it, so one release wakes
// one caller across all Lockers. A release that names nobody (an empty
// queue, or a master without the queue) wakes this Locker's first waiter,
// as before.

// Wake on expiry (docs/design.md §14.2): a holder that dies releases
// nothing, so nothing is announced; a waiter that read the holder's PTTLs
// retries when a majority of its keys will have expired.

// expiresAt is when the key that the probe res (started at start) found
// held will have expired on need masters: the need-th earliest of each
// master's expiry, the arrival of its reply plus its PTTL plus margin (a
// master where the key was absent has expired already). A master that did
// not answer, or whose key has no TTL, is not counted: zero when fewer than
// need are.
func expiresAt(res quorum.Result, start time.Time, need int, margin time.Duration) time.Time {
	at := make([]time.Time, 0, len(res.Replies))
	for _, r := range res.Replies {
		switch {
		case r.Outcome == quorum.OK:
			at = append(at, start.Add(r.Latency))
		case r.Outcome == quorum.Refused && r.Value <= maxPTTL:
			at = append(at, start.Add(r.Latency+time.Duration(r.Value)*time.Millisecond+margin))
		}
	}
	if len(at) < need {
		return time.Time{}
	}
	slices.SortFunc(at, time.Time.Compare)
	return at[need-1]
}

// maxPTTL is the longest PTTL (ms) that expiresAt counts: a time.Duration
// holds it with room for the latency and margin (about 290 years).
const maxPTTL = uint64(math.MaxInt64/int64(time.Millisecond)) / 2

// lingerFor is how long a key stays subscribed after its last waiter left,
// so that a key contended now and then is not subscribed and unsubscribed
// around every wait.
const lingerFor = time.Second

type waker struct {
	l *Locker

	mu     sync.Mutex
	queues map[string]*waitQueue // by key: subscribed, or about to be
	// watched: the channels an Election's observers listen on (watch),
	// subscribed beside the keys of queues.
	watched map[string][]*watcher
	subs    []*subscriber // by master; nil until the first wait
	closed  bool
	quit    chan struct{}
	wg      sync.WaitGroup
	ctx     context.Context // subscriptions' calls; cancelled by close
	cancel  context.CancelFunc

	waiting atomic.Int64 // waiters registered: busy's fast answer when 0
	keys    atomic.Int64 // len(queues): contended's fast answer when 0
	id      string       // this Locker's part of its waiters' ids in the queues
	suffix  string       // of the channel on which a release names one of its waiters
	seq     atomic.Uint64
	drop    atomic.Bool  // tests: ignore every announcement
	woken   atomic.Int64 // waiters woken, for tests
}

// waitQueue is the waiters of one key, in arrival order, and the tally of
// release announcements since the last wake.
type waitQueue struct {
	waiters   []*waiter
	tally     map[string]int // digest of a released token → masters that announced it
	idleSince time.Time      // when the last waiter left (zero while there are waiters)
	// handedAt is when a release last named a queued caller (zero once a
	// release named nobody): the masters' queue is not empty, and a new
	// caller joins it rather than race the one being woken.
	handedAt time.Time
	// freedAt is when a master last announced a release that named none
	// of this Locker's waiters.
	freedAt time.Time
}

// waiter is one Lock call waiting for any of its keys to be released.
type waiter struct {
	ch     chan struct{} // one buffered wake
	keys   []string
	queued bool // registered in the queues (not when the Locker was closing)
	// Its entry in the key's queue on the masters: id, and began, when
	// it started waiting: each join sends its age since then, which the
	// master takes from its own clock for the score (join.lua), and a
	// member joined again keeps its score.
	id    string
	began time.Time
	// life: how long, in ms, each master keeps its member past a join
	// (memberLife).
	life uint64
	// The release that last named it (msg), how many masters have, and
	// whether one has since the caller last asked: guarded by the
	// waker's mutex.
	msg    string
	named  int
	by     []bool // by master: named it in msg
	popped bool
	again  bool // wake it again on the majority's announcement
	// grant: a waiter a release may hand the key to (nil otherwise);
	// guarded by the waker's mutex.
	grant *grantState
	// reader: an RLock waiting for a writer to go. It waits on the
	// writer's key, and every release of that key wakes every reader
	// (readers share, so none is first in line), besides the one writer
	// a release wakes; a reader never holds a writer back in line.
	reader bool
}

// subscriber owns one master's subscription connection.
type subscriber struct {
	i      int
	ps     pubSub
	notify chan struct{}   // the wanted channels changed
	have   map[string]bool // the channels subscribed
}

// watcher is an observer of some channels (an Election's Observe): c
// gets a value, without blocking, when a message comes on any of them.
type watcher struct {
	w     *waker
	names []string
	c     chan struct{}
}

// watch subscribes, on every master that has a subscription connection,
// to the channels names, and returns the watcher that their messages
// poke. Nothing here is needed for correctness: a message lost, or a
// master without the connection, leaves the observer to its poll.
func (l *Locker) watch(names ...string) *watcher {
	w := l.wake
	x := &watcher{w: w, names: names, c: make(chan struct{}, 1)}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return x
	}
	if w.watched == nil {
		w.watched = map[string][]*watcher{}
	}
	for _, n := range names {
		w.watched[n] = append(w.watched[n], x)
	}
	if w.subs == nil {
		w.startLocked()
	}
	w.notifyLocked()
	return x
}

// stop takes x off its channels; they are unsubscribed when nobody else
// watches them.
func (x *watcher) stop() {
	w := x.w
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range x.names {
		left := slices.DeleteFunc(w.watched[n], func(y *watcher) bool { return y == x })
		if len(left) == 0 {
			delete(w.watched, n)
		} else {
			w.watched[n] = left
		}
	}
	w.notifyLocked()
}

// poked hands a message on channel to its watchers. w.mu is held.
func (w *waker) pokedLocked(channel string) {
	for _, x := range w.watched[channel] {
		select {
		case x.c <- struct{}{}:
		default:
		}
	}
}

func newWaker(l *Locker) *waker {
	w := &waker{l: l, queues: map[string]*waitQueue{}, quit: make(chan struct{})}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], l.env.random())
	w.id = hex.EncodeToString(b[:])
	w.suffix = ":w:" + w.id
	w.ctx, w.cancel = context.WithCancel(context.Background())
	return w
}

// wait registers a waiter for t's keys, subscribing to those not yet
// subscribed. It never blocks on a master: subscriptions are made by each
// master's subscriber goroutine.
func (w *waker) wait(t target) *waiter {
	keys := t.keys
	if keys == nil {
		keys = []string{t.key}
	}
	reader := t.mode == modeRead
	if reader {
		// "<stem>:r" waits for "<stem>:w" (rwmutex.go), whose releases
		// are announced.
		keys = []string{t.key[:len(t.key)-1] + "w"}
	}
	wt := &waiter{ch: make(chan struct{}, 1), keys: keys, reader: reader,
		id: w.id + "." + strconv.FormatUint(w.seq.Add(1), 36), began: w.l.env.now()}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return wt // never woken: the backoff and ErrClosed end the wait
	}
	changed := false
	for _, k := range keys {
		q := w.queues[k]
		if q == nil {
			q = &waitQueue{}
			w.queues[k] = q
			w.keys.Add(1)
			changed = true
		}
		q.waiters = append(q.waiters, wt)
		q.idleSince = time.Time{}
	}
	wt.queued = true
	w.waiting.Add(1)
	if w.subs == nil {
		w.startLocked()
	}
	if changed {
		w.notifyLocked()
	}
	return wt
}

// busy reports whether this Locker has callers waiting for exactly t's
// keys. Only those go first: a caller for other keys (a set that shares
// one) may be waiting for a key t does not need.
// Every Lock call asks, so the common answer, nobody waits at all, is
// read from an atomic without the waker's mutex.
func (w *waker) busy(t target) bool {
	if w.waiting.Load() == 0 {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	if q := w.queues[t.key]; q != nil {
		for _, x := range q.waiters {
			if x.reader {
				continue
			}
			if (t.keys == nil && len(x.keys) == 1) || slices.Equal(x.keys, t.keys) {
				return true
			}
		}
	}
	return false
}

// contended reports whether a caller of this Locker has waited for key
// within lingerFor (its entry in queues is swept after that): a release of
// key then hands it on to the masters' queue (docs/design.md §14.1 item
// 2). Every release asks, so the common answer, no key waited for at all,
// is read from an atomic without the waker's mutex.
func (w *waker) contended(key string) bool {
	if w.keys.Load() == 0 {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.queues[key] != nil
}

// channel is where a release of key names one of this Locker's waiters
// (release.lua).
func (w *waker) channel(key string) string { return key + w.suffix }

// handed records that this Locker's release of key woke a queued caller,
// so that a Lock of this Locker for key within handingOn's maxAge joins
// the queue behind it. A key none of its callers waited for lately (an
// election's campaigner that never waited, election.go) gets an entry
// without waiters, forgotten after lingerFor as any idle one.
func (w *waker) handed(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	now := w.l.env.now()
	q := w.queues[key]
	if q == nil {
		q = &waitQueue{idleSince: now}
		w.queues[key] = q
		w.keys.Add(1)
		if w.subs == nil {
			w.startLocked()
		}
		w.notifyLocked()
	}
	q.handedAt = now
}

// freedSince reports whether a master announced, since t0, a release of
// t's key that woke nobody here: a caller whose round (begun at t0) found
// the key held, and that was not yet waiting, may have missed it.
func (w *waker) freedSince(t target, t0 time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[t.key]
	return q != nil && q.freedAt.After(t0)
}

// handingOn reports whether a release of t's key recently woke a queued
// caller (within maxAge): a new caller then joins the queue behind it
// instead of racing it, which would split the masters' votes.
func (w *waker) handingOn(t target, maxAge time.Duration) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[t.key]
	return q != nil && !q.handedAt.IsZero() && w.l.env.now().Sub(q.handedAt) < maxAge
}

// first reports whether no waiter for the same keys is ahead of wt in
// line, or wt is in no line at all (the Locker is closing): then it polls
// on its backoff; otherwise it waits to be woken in turn. Waiters for
// other sets of keys do not hold it back.
func (w *waker) first(wt *waiter) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || wt.reader {
		return true
	}
	q := w.queues[wt.keys[0]]
	j := q.place(wt)
	if j < 0 {
		return true
	}
	for _, x := range q.waiters[:j] {
		if !x.reader && slices.Equal(x.keys, wt.keys) {
			return false
		}
	}
	return true
}

// place is wt's place in q (0 first), or −1 when it is not in q.
func (q *waitQueue) place(wt *waiter) int {
	if q == nil {
		return -1
	}
	return slices.Index(q.waiters, wt)
}

// done unregisters wt. A wake it received but did not use goes to the
// next waiter.
func (w *waker) done(wt *waiter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if wt.queued {
		w.waiting.Add(-1)
	}
	unused := len(wt.ch) > 0
	now := w.l.env.now()
	for _, k := range wt.keys {
		q := w.queues[k]
		j := q.place(wt)
		if j < 0 {
			continue
		}
		q.waiters = slices.Delete(q.waiters, j, j+1)
		if len(q.waiters) == 0 {
			q.idleSince = now
		} else if unused {
			unused = !q.wakeOne()
		}
	}
}

// released counts master i's announcement msg that a token was released
// from key (its digest, then the waiter taken off the queue, if any), and
// once a majority of masters have announced the same, wakes that waiter if
// it is this Locker's, or with no waiter named, this Locker's first.
func (w *waker) released(i int, key, msg string) {
	if w.drop.Load() {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[key]
	if q == nil {
		return
	}
	if !strings.Contains(msg, " ") {
		q.freedAt = w.l.env.now()
	}
	if len(q.waiters) == 0 {
		if !strings.Contains(msg, " ") {
			q.handedAt = time.Time{}
		}
		return
	}
	if q.tally == nil {
		q.tally = map[string]int{}
	}
	if dig, head, named := strings.Cut(msg, " "); named {
		if id, _, handed := strings.Cut(head, " "); handed {
			// The master handed the key to one of this Locker's waiters.
			q.handedAt = w.l.env.now()
			// dig is the SHA-1 of the token the master set: a grant of
			// this waiter's own token, or not counted.
			if x := q.find(id); x != nil && x.grant != nil && dig == x.grant.digest {
				// Wake it on the first grant (it then waits for the
				// others, and gives back what it has if no majority
				// comes) and on the majority's.
				switch x.grant.got(i) {
				case 1:
					if x.wake() {
						w.woken.Add(1) // one per release, as for a waiter named
					}
				case w.l.need:
					x.wake()
				}
			}
			return
		}
		// Only this Locker hears it (its own channel): no tally needed.
		q.handedAt = w.l.env.now()
		if q.has(head) {
			// A writer is named: the readers waiting for it go in before
			// the next writer, whose intent their passes let them by
			// (rw_read.lua), as after a release naming nobody.
			w.woken.Add(q.wakeReaders())
			if q.named(i, head, msg, w.l.need, len(w.l.streams)) {
				w.woken.Add(1)
			}
			return
		}
		// It named a waiter of this Locker that has left (its entry
		// reached this master after the release that woke it): the key
		// is free all the same, and counts as a release naming nobody.
		msg = dig
		q.freedAt = w.l.env.now()
	}
	q.tally[msg]++
	if q.tally[msg] < w.l.need {
		if len(q.tally) > 64 { // releases that never reach a majority: forget them
			clear(q.tally)
		}
		return
	}
	delete(q.tally, msg)
	q.handedAt = time.Time{}
	if !strings.HasPrefix(msg, readersGone) {
		// A writer released: the readers may go (a writer's intent may
		// still refuse them; they then wait as before).
		w.woken.Add(q.wakeReaders())
	}
	if q.wakeOne() {
		w.woken.Add(1)
	}
}

// named counts a master's announcement that the release msg named the
// waiter id, and wakes it on the first: each master names the same waiter
// when they agree on the queue, so waiting for more would only slow the
// handoff; and again on the majority's if asked (wakeOnMajority). It
// reports whether it woke the waiter on the first.
func (q *waitQueue) named(i int, id, msg string, need, masters int) bool {
	for _, x := range q.waiters {
		if x.id != id {
			continue
		}
		if x.msg != msg {
			x.msg, x.named, x.popped, x.again = msg, 0, true, false
			if x.by == nil {
				x.by = make([]bool, masters)
			}
			clear(x.by)
		}
		if x.by[i] {
			return false // a duplicate
		}
		x.by[i] = true
		x.named++
		switch {
		case x.named == 1:
			return x.wake()
		case x.again && x.named == need:
			x.again = false
			x.wake()
		}
		return false
	}
	return false
}

// wakeOnMajority is called by wt's Lock when the round it made on a wake
// by name failed. now: a majority of masters have by now announced the
// release that named it (the key is free there): retry at once. later:
// they have not, and the majority's announcement will wake it again.
func (w *waker) wakeOnMajority(wt *waiter) (now, later bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if wt.msg == "" {
		return false, false
	}
	if wt.named >= w.l.need {
		return true, false
	}
	wt.again = true
	return false, true
}

// find is the waiter id of q, or nil.
func (q *waitQueue) find(id string) *waiter {
	for _, x := range q.waiters {
		if x.id == id {
			return x
		}
	}
	return nil
}

// grantState is what a waiter that a release may hand the key to knows
// of the grants (docs/design.md §14.3).
type grantState struct {
	// token is the current grant token (a give-back draws a new one),
	// digest its hex SHA-1, as release.lua names a grant.
	token  string
	digest string
	ttl    uint64 // ms
	// since is when the first join whose queue member carries token was
	// sent (zero before one is): a master hands the key to token only
	// after such a join reached it, so the key lives there at least TTL
	// from since.
	since time.Time
	off   bool   // no grant counts any more (the waiter gave back, with no new token)
	by    []bool // by master: its grant of token is counted
}

// member is the queue member of the waiter id carrying g's token.
func (g *grantState) member(id string) string {
	return id + " " + strconv.FormatUint(g.ttl, 10) + " " + g.token
}

// got counts master i's grant of the current token, and returns how many
// masters it now counts (0 when it does not count: counting is off, or the
// master's grant is counted already).
func (g *grantState) got(i int) int {
	if g.off || g.since.IsZero() || g.by[i] {
		return 0
	}
	g.by[i] = true
	return g.count()
}

func (g *grantState) count() int {
	n := 0
	for _, b := range g.by {
		if b {
			n++
		}
	}
	return n
}

// grantedSince is, when a majority of masters have handed wt the key, the
// send of the first join that carried its token: each of them set the key
// after such a join reached it, so the key lives there at least TTL from
// that instant.
func (w *waker) grantedSince(wt *waiter) (time.Time, []bool, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	g := wt.grant
	if g == nil || g.count() < w.l.need {
		return time.Time{}, nil, false
	}
	return g.since, slices.Clone(g.by), true
}

// grants is how many masters have handed wt the key (counted).
func (w *waker) grants(wt *waiter) int {
	if wt == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if wt.grant == nil {
		return 0
	}
	return wt.grant.count()
}

// mine counts master i, where a poll read token, wt's grant token, in the
// key, as a grant: the master set the key after a join carrying token
// reached it. A poll of a token given back since does not count.
// partial is wt's grant token, its TTL in ms and which masters have
// handed it the key, while some have and no give-back has ended the
// token's count (by is nil otherwise).
func (w *waker) partial(wt *waiter) (token string, ttl uint64, by []bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	g := wt.grant
	if g == nil || g.off || g.since.IsZero() || g.count() == 0 {
		return "", 0, nil
	}
	return g.token, g.ttl, slices.Clone(g.by)
}

func (w *waker) mine(wt *waiter, i int, token string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if g := wt.grant; g != nil && g.token == token {
		g.got(i)
	}
}

// resetGrants stops counting the grants of wt's token so far, and returns
// its queue member with that token. With next (not ""), wt's later joins
// carry next instead: a give-back of the old token, however late it runs
// on a master (a release parked while the master was not answering, or
// sent again after NOSCRIPT, runs after commands sent later), cannot
// delete a key handed to the new one, and a grant of the old token is
// never counted (its digest is not the new token's). Without next, no
// grant counts any more: wt leaves, or acquires by its rounds.
func (w *waker) resetGrants(wt *waiter, next string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	g := wt.grant
	old := g.member(wt.id)
	clear(g.by)
	if next == "" {
		g.off = true
		return old
	}
	g.token, g.digest, g.since = next, tokenDigest(next), time.Time{}
	return old
}

// unhand makes wt a waiter that releases name, no longer one they may
// hand the key to: its later joins carry its bare id, and no grant
// counts (wt gave its token back first).
func (w *waker) unhand(wt *waiter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wt.grant = nil
}

// tokenDigest is the hex SHA-1 of token, as release.lua names a grant.
func tokenDigest(token string) string {
	sum := sha1.Sum([]byte(token))
	return hex.EncodeToString(sum[:])
}

// hearsAll reports whether this Locker has a subscription on every
// master: only then can it be told of every grant.
func (w *waker) hearsAll() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.subs) == len(w.l.masters)
}

// setGrant makes wt a waiter a release may hand the key to.
func (w *waker) setGrant(wt *waiter, g *grantState) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wt.grant = g
}

// aged reports whether wt's grant token was first joined more than an
// eighth of its TTL before now.
func (w *waker) aged(wt *waiter, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	g := wt.grant
	return g != nil && !g.off && !g.since.IsZero() && now.Sub(g.since) > time.Duration(g.ttl)*time.Millisecond/8
}

// token is wt's grant token.
func (w *waker) token(wt *waiter) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return wt.grant.token
}

// member is wt's member in its key's queue: its id, or for a waiter a
// release may hand the key to, "<id> <TTL ms> <grant token>" (§14.3).
// With join (the member is about to be sent in a join, at now), it dates
// the grant token's first join.
func (w *waker) member(wt *waiter, join bool, now time.Time) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	g := wt.grant
	if g == nil {
		return wt.id
	}
	if join && g.since.IsZero() {
		g.since = now
	}
	return g.member(wt.id)
}

// has reports whether the waiter id is in q.
func (q *waitQueue) has(id string) bool {
	return slices.ContainsFunc(q.waiters, func(x *waiter) bool { return x.id == id })
}

// popped reports whether a release named wt (and so took it off the
// queue) since the last call.
func (w *waker) popped(wt *waiter) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := wt.popped
	wt.popped = false
	return p
}

// wake gives x a wake unless one is pending.
func (x *waiter) wake() bool {
	if len(x.ch) > 0 {
		return false
	}
	x.ch <- struct{}{}
	return true
}

// readersGone begins what rw_unread.lua announces on the writer key's
// channel when the last reader left while a writer waits (then the digest
// of the intent's token, so that the announcements of one drain are
// counted together): it wakes a writer, never the readers, whom that
// writer's intent refuses.
const readersGone = "readers:"

// wakeReaders wakes every reader waiting on q's key (a writer key) that
// has no wake pending, and returns how many it woke.
func (q *waitQueue) wakeReaders() int64 {
	n := int64(0)
	for _, x := range q.waiters {
		if x.reader && x.wake() {
			n++
		}
	}
	return n
}

// wakeOne wakes the longest-waiting waiter that has no wake pending, not
// a reader (wakeReaders wakes them), and reports whether there was one.
func (q *waitQueue) wakeOne() bool {
	for _, x := range q.waiters {
		if !x.reader && len(x.ch) == 0 {
			x.ch <- struct{}{}
			return true
		}
	}
	return false
}

// startLocked starts one subscriber goroutine per master, and the sweeper
// that unsubscribes keys nobody has waited for in lingerFor. A detached
// Locker (env) starts none: its owner calls pump after each event, and
// the sweep runs on its timers.
func (w *waker) startLocked() {
	w.subs = make([]*subscriber, 0, len(w.l.masters))
	detached := w.l.env.detached()
	for i, m := range w.l.masters {
		ps := subscribe(w.ctx, m, w.l.given[i])
		if ps == nil {
			continue
		}
		s := &subscriber{i: i, ps: ps, notify: make(chan struct{}, 1), have: map[string]bool{}}
		w.subs = append(w.subs, s)
		if !detached {
			w.wg.Go(func() { w.run(s) })
		}
	}
	if detached {
		w.l.env.afterFunc(lingerFor/2, w.sweepTick)
		return
	}
	w.wg.Go(w.sweep)
}

// subscribe opens m's subscription connection, or returns nil where there
// is none to share: a *redis.Ring subscribes each channel on the one
// shard its name hashes to (and panics without a channel), so its
// waiters rely on their backoff alone. Any other client that panics here
// is treated alike. A master on the client path (nil m) has one when it
// is a Subscriber (subscriber.go).
func subscribe(ctx context.Context, m redis.UniversalClient, given driver.Master) (ps pubSub) {
	if m == nil {
		if sb, ok := given.(driver.Subscriber); ok {
			return newClientPubSub(sb)
		}
		return nil
	}
	if _, ok := m.(*redis.Ring); ok {
		return nil
	}
	defer func() {
		if recover() != nil {
			ps = nil
		}
	}()
	return m.Subscribe(ctx)
}

func (w *waker) notifyLocked() {
	for _, s := range w.subs {
		s.poke()
	}
}

// run is master s.i's subscriber: it keeps the subscriptions in line with
// the keys waited for, and hands every announcement to released. go-redis
// reconnects a dropped subscription and subscribes it again; what was
// published meanwhile is lost, and the waiters' backoff covers it.
func (w *waker) run(s *subscriber) {
	msgs := s.ps.Channel()
	for {
		select {
		case <-w.quit:
			return
		case m, ok := <-msgs:
			if !ok {
				return
			}
			w.message(s, m)
		case <-s.notify:
			w.reconcile(s)
		}
	}
}

// message hands the announcement m that s's master published to
// released, and pokes the channel's watchers.
func (w *waker) message(s *subscriber, m *redis.Message) {
	w.mu.Lock()
	w.pokedLocked(m.Channel)
	w.mu.Unlock()
	w.released(s.i, strings.TrimSuffix(m.Channel, w.suffix), m.Payload)
}

// pump does, without blocking, what the subscriber goroutines would: for
// each master in turn, the change of subscriptions asked for, then the
// announcements that came. A detached Locker has no such goroutines; its
// owner calls pump after each event.
func (w *waker) pump() {
	w.mu.Lock()
	subs := w.subs
	w.mu.Unlock()
	for _, s := range subs {
		if len(s.notify) > 0 {
			<-s.notify
			w.reconcile(s)
		}
		for msgs := s.ps.Channel(); len(msgs) > 0; {
			w.message(s, <-msgs)
		}
	}
}

// reconcile subscribes s to the keys waited for and unsubscribes it from
// the others. A master that does not answer holds up only its own
// subscriber.
func (w *waker) reconcile(s *subscriber) {
	w.mu.Lock()
	want := make(map[string]bool, 2*len(w.queues)+len(w.watched))
	for k := range w.queues {
		want[k], want[w.channel(k)] = true, true
	}
	for n := range w.watched {
		want[n] = true
	}
	var sub, unsub []string
	for n := range want {
		if !s.have[n] {
			sub = append(sub, n)
		}
	}
	for n := range s.have {
		if !want[n] {
			unsub = append(unsub, n)
		}
	}
	w.mu.Unlock()
	// In one order, whatever the maps' (the simulator replays a seed).
	slices.Sort(sub)
	slices.Sort(unsub)
	ctx := w.ctx // ended by close: a dial to a stalled master must not hold it up
	failed := false
	if len(sub) > 0 {
		if err := s.ps.Subscribe(ctx, sub...); err != nil {
			failed = true
		} else {
			for _, n := range sub {
				s.have[n] = true
			}
		}
	}
	if len(unsub) > 0 {
		if err := s.ps.Unsubscribe(ctx, unsub...); err != nil {
			failed = true
		} else {
			for _, n := range unsub {
				delete(s.have, n)
			}
		}
	}
	if failed {
		// The master is not answering: try again a little later (go-redis
		// redials), not in a tight loop.
		w.l.env.afterFunc(lingerFor/2, func() { s.poke() })
	}
}

// poke asks s to reconcile, without blocking.
func (s *subscriber) poke() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// sweep forgets keys that nobody has waited for in lingerFor.
func (w *waker) sweep() {
	var t *time.Timer // env.sleep's, kept for reuse
	for w.l.env.sleep(w.ctx, context.Background(), lingerFor/2, nil, &t) == wakeTimer {
		w.sweepOnce()
	}
	if t != nil {
		t.Stop()
	}
}

// sweepTick is the sweep of a detached Locker, on its timers until it
// closes.
func (w *waker) sweepTick() {
	if w.sweepOnce() {
		w.l.env.afterFunc(lingerFor/2, w.sweepTick)
	}
}

// sweepOnce forgets the keys that nobody has waited for in lingerFor, and
// reports whether the waker is still open.
func (w *waker) sweepOnce() bool {
	now := w.l.env.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	changed := false
	for k, q := range w.queues {
		if len(q.waiters) == 0 && now.Sub(q.idleSince) >= lingerFor {
			delete(w.queues, k)
			w.keys.Add(-1)
			changed = true
		}
	}
	if changed {
		w.notifyLocked()
	}
	return !w.closed
}

// close stops the subscribers and joins their goroutines.
func (w *waker) close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	close(w.quit)
	w.cancel()
	subs := w.subs
	w.mu.Unlock()
	for _, s := range subs {
		s.ps.Close()
	}
	w.wg.Wait()
}
