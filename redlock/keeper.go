package redlock

import (
	"container/heap"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/quorumlab/redlock/quorum"
)

// keepWorkers bounds how many extensions one Locker's keeper has in
// flight at once. Extensions that fall due together are sent by up to
// this many goroutines, so their commands reach each master's stream
// together and go out pipelined, while the number of goroutines stays
// the same whether the Locker keeps ten leases or a hundred thousand.
const keepWorkers = 64

// keepBatch bounds how many locks one batched extension carries (one
// script call per master), so that no call holds a master for long, and
// a call that times out on a loaded machine fails few locks at once.
const keepBatch = 64

// keepAhead is how much earlier than planned the keeper may extend a lock
// so that it joins a batch with others falling due about then: at most
// this, and at most a quarter of the wait that was planned.
const keepAhead = 10 * time.Millisecond

// keeper extends every Held of one Locker (docs/design.md §8, "Keeping
// many leases"): a min-heap of the times each Held's next extension falls
// due, one goroutine that sleeps until the earliest, and up to keepWorkers
// goroutines that run the extensions that are due. The goroutine runs
// only while some Held is kept, and the workers only while an extension
// is due: a Locker that keeps nothing has none.
//
// Each Held's loss is declared by its own timer (Held.lost), not by the
// keeper: a slow or stalled keeper delays extensions, never the loss
// signal.
type keeper struct {
	mu      sync.Mutex
	base    time.Time       // due times count from it (monotonic); set once
	env     env             // the Locker's clock
	quit    context.Context // the Locker's: done when Close begins, and the goroutine then returns
	due     dueHeap
	live    int           // Helds kept (added and not left)
	running bool          // the goroutine runs
	wakeup  chan struct{} // the earliest due time moved earlier, or live fell to 0
	ready   []*keeping    // due, not yet taken by a worker; ready[head:] is pending
	head    int
	batch   []*keeping // the same for locks extended in batches; batch[bhead:] is pending
	bhead   int
	workers int // worker goroutines running
}

// dueItem is one planned extension; it is stale once its Held has left or
// has been planned again (gen moved on).
type dueItem struct {
	at    time.Duration // since the keeper's base
	ahead time.Duration // it may go this much before at, in a batch
	h     *keeping
	gen   uint64
}

type dueHeap []dueItem

func (d dueHeap) Len() int           { return len(d) }
func (d dueHeap) Less(i, j int) bool { return d[i].at < d[j].at }
func (d dueHeap) Swap(i, j int)      { d[i], d[j] = d[j], d[i] }
func (d *dueHeap) Push(x any)        { *d = append(*d, x.(dueItem)) }
func (d *dueHeap) Pop() any {
	old := *d
	it := old[len(old)-1]
	old[len(old)-1] = dueItem{}
	*d = old[:len(old)-1]
	return it
}

// add starts keeping h, its first extension due in `in`, unless h's
// context has ended (a loss or an unlock, which leave the keeper after
// they end it, came first).
func (k *keeper) add(h *keeping, in time.Duration) {
	k.mu.Lock()
	if h.ctx.Err() != nil {
		k.mu.Unlock()
		return
	}
	h.left = false
	k.live++
	k.mu.Unlock()
	k.schedule(h, in)
}

// schedule plans h's next extension in `in`, replacing any plan it had;
// nothing once h has left.
func (k *keeper) schedule(h *keeping, in time.Duration) {
	now := k.env.now()
	k.mu.Lock()
	defer k.mu.Unlock()
	if h.left {
		return
	}
	if k.base.IsZero() {
		k.base = now
	}
	at := now.Sub(k.base) + in
	h.gen++
	heap.Push(&k.due, dueItem{at: at, ahead: min(keepAhead, in/4), h: h, gen: h.gen})
	if !k.running {
		k.running = true
		if k.wakeup == nil {
			k.wakeup = make(chan struct{}, 1)
		}
		k.env.spawn(k.run)
		return
	}
	if k.due[0].h == h && k.due[0].gen == h.gen {
		k.signal()
	}
}

// leave stops keeping h: no extension of it starts from now on, and one
// in flight alone (extendOnce) is ended; a batched one runs on for the
// others, and settles nothing for h once its lock is released.
func (k *keeper) leave(h *keeping) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if h.extStop != nil {
		h.extStop()
		h.extStop = nil
	}
	if h.left {
		return
	}
	h.left = true
	k.live--
	if k.live == 0 {
		k.signal()
	}
}

// signal wakes the goroutine. k.mu is held.
func (k *keeper) signal() {
	select {
	case k.wakeup <- struct{}{}:
	default:
	}
}

// run moves the extensions that are due to the workers, starting workers
// as needed, and sleeps until the next falls due. It returns when no Held
// is kept, or once the Locker's Close has begun.
func (k *keeper) run() {
	var t *time.Timer // env.sleep's, kept for reuse
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		k.mu.Lock()
		if k.live == 0 || k.quit.Err() != nil {
			// Nothing is kept, or the Locker is closing: no extension
			// can succeed from now on (Close), and the kept locks end
			// by their own loss timers, which need no goroutine.
			k.running = false
			k.due = nil // only stale items are left, or none that can run
			k.mu.Unlock()
			return
		}
		now := k.env.now().Sub(k.base)
		for len(k.due) > 0 {
			it := k.due[0]
			if it.h.left || it.gen != it.h.gen {
				heap.Pop(&k.due)
				continue
			}
			if it.at-it.ahead > now {
				break
			}
			heap.Pop(&k.due)
			if it.h.lk.batchable() {
				k.batch = append(k.batch, it.h)
			} else {
				k.ready = append(k.ready, it.h)
			}
		}
		k.startWorkersLocked()
		wait := time.Hour
		if len(k.due) > 0 {
			wait = k.due[0].at - now
		}
		k.mu.Unlock()
		k.env.sleep(context.Background(), k.quit, wait, k.wakeup, &t)
	}
}

// startWorkersLocked starts workers for what is pending, one per lock
// extended alone and one per batch of up to keepBatch, up to keepWorkers in
// all. k.mu is held.
func (k *keeper) startWorkersLocked() {
	for k.workers < keepWorkers && k.workers < len(k.ready)-k.head+(len(k.batch)-k.bhead+keepBatch-1)/keepBatch {
		k.workers++
		k.env.spawn(k.work)
	}
}

// single hands hs to the workers, to be extended one by one
// (extendOnce): the locks a batch did not extend.
func (k *keeper) single(hs []*keeping) {
	if len(hs) == 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, h := range hs {
		if !h.left {
			k.ready = append(k.ready, h)
		}
	}
	k.startWorkersLocked()
}

// work runs due extensions until none is left: up to keepBatch of the
// batched kind at once, the others one by one.
func (k *keeper) work() {
	for {
		k.mu.Lock()
		if n := min(len(k.batch)-k.bhead, keepBatch); n > 0 {
			hs := slices.Clone(k.batch[k.bhead : k.bhead+n])
			clear(k.batch[k.bhead : k.bhead+n])
			k.bhead += n
			if k.bhead == len(k.batch) {
				k.batch, k.bhead = k.batch[:0], 0
			}
			k.mu.Unlock()
			extendBatch(hs)
			continue
		}
		if k.head == len(k.ready) {
			k.ready, k.head = k.ready[:0], 0
			k.workers--
			k.mu.Unlock()
			return
		}
		h := k.ready[k.head]
		k.ready[k.head] = nil
		k.head++
		k.mu.Unlock()
		h.extendOnce()
	}
}

// extendOnce is one of the keeper's extensions of h. On success the
// Extend itself plans the next (rearmLocked); on a failure that time may
// still mend, it plans a retry; otherwise h leaves the keeper and its
// timer ends the lock at its deadline, if it has not.
func (h *keeping) extendOnce() {
	h.busy.Lock()
	defer h.busy.Unlock()
	lk := h.lk
	l := lk.locker
	k := &l.keeper
	ctx := h.ctx
	if ctx.Err() != nil {
		k.leave(h)
		return
	}
	// Bounded by the deadline: an extension that ends after it is
	// worthless. It must not inherit a cancellation meant for fn, but
	// ends when h leaves the keeper (an Unlock must not wait for it).
	ectx, ecancel := l.until(context.WithoutCancel(ctx), lk.Deadline())
	defer ecancel()
	k.mu.Lock()
	left := h.left
	if !left {
		h.extStop = ecancel
	}
	k.mu.Unlock()
	if left {
		return
	}
	began := l.env.now()
	err := lk.extend(ectx, true, nil) // on success it re-arms h.lost and plans the next
	k.mu.Lock()
	h.extStop = nil
	k.mu.Unlock()
	l.pace.record(l.env.now().Sub(began))
	if err == nil {
		if h.failed > 0 {
			l.log.InfoContext(ctx, "redlock: extended after a failure", l.logResource(lk.resource), "token", shortToken(lk.token), "failed", h.failed)
		}
		h.failed = 0
		return
	}
	h.failed++
	if errors.Is(err, ErrClosed) || errors.Is(err, ErrInvalid) || lk.isReleased() || !l.env.now().Before(lk.Deadline()) {
		// Nothing more can extend it (closed, refused by the masters'
		// ACL, unlocked, or past its deadline): the timer ends the lock
		// at its deadline, if it has not.
		k.leave(h)
		return
	}
	h.retryLocked(err, lk.Deadline())
}

// retry plans the keeper's next attempt after a failed extension whose
// failure time may still mend, and says so. h.busy is held; deadline is
// the lock's.
func (h *keeping) retryLocked(err error, deadline time.Time) {
	lk := h.lk
	l := lk.locker
	l.log.WarnContext(h.ctx, "redlock: extension failed; retrying while time remains", l.logResource(lk.resource), "token", shortToken(lk.token), l.logErr(err, lk.resource))
	// Retry soon, but not in a tight loop against a stalled quorum.
	l.keeper.schedule(h, max(l.opts.MasterTimeout, deadline.Sub(l.env.now())/4))
}

// until is ctx, ended with context.DeadlineExceeded at deadline on the
// Locker's clock (env), or by the CancelFunc, which the caller calls.
func (l *Locker) until(ctx context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	t := l.env.afterFunc(deadline.Sub(l.env.now()), func() { cancel(context.DeadlineExceeded) })
	return ctx, func() { t.Stop(); cancel(context.Canceled) }
}

// keepWait is how long one of the keeper's extensions waits for the
// masters to answer (docs/design.md §8): a quarter of the time the lock
// has left, and at least MasterTimeout. An acquisition gives up on a master
// at MasterTimeout so that its caller can retry at once; a kept lock has no
// caller to retry, and a wait cut at MasterTimeout on masters that all
// answer a little slower (a loaded host) fails every extension until the
// lock is lost. The wait ends earlier once a majority has answered, so a
// stalled minority costs nothing more; the validity of an extension still
// counts from its start, and a majority that answers after its deadline
// (or with no validity left) still extends nothing.
func (l *Locker) keepWait(deadline time.Time) time.Duration {
	return max(l.opts.MasterTimeout, deadline.Sub(l.env.now())/4)
}

// keepContext is ctx for a keeper's extension that began at start, ended
// once the Locker closes, though not before MasterTimeout from start (as
// long as any round waits): Close waits for operations in flight, and must
// not wait for keepWait.
func (l *Locker) keepContext(ctx context.Context, start time.Time) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := l.env.afterDone(l.quit, func() {
		l.env.afterFunc(start.Add(l.opts.MasterTimeout).Sub(l.env.now()), cancel)
	})
	return ctx, func() { stop(); cancel() }
}

// batchable reports whether the keeper extends lk in a batch: a lock on
// one key that Extend would extend with extend.lua (not a read lock, not
// a semaphore's permit, whose record is extended with it), on a Locker
// without a Redis Cluster master (whose keys of one call must share a slot).
func (lk *Lock) batchable() bool {
	return !lk.multi() && lk.mode != modeRead && lk.permits == 0 && !lk.locker.hasClusterMaster()
}

// extendBatch is the keeper's extension of several Helds at once
// (docs/design.md §8, "Batched extensions"): one extend_batch.lua call
// per master carries every lock, and each lock is decided on its own
// exactly as Extend decides it. Each lock's extension mutex (extMu) is
// held from before the batch's start to its decision, as Extend holds
// it, and its mutex only to read it and to settle it; validity counts from
// the batch's start, taken before anything is sent; a lock succeeds only
// when a majority extended its key, validity is left and its current
// deadline has not passed. A lock the batch does not extend (or cannot
// carry: unlocked, lapsed, Locker closed) goes down the single path,
// extendOnce, which retries it or ends it as before.
func extendBatch(hs []*keeping) {
	l := hs[0].lk.locker
	in, single := claimBatch(hs)
	// After every lock is unlocked: the workers take them one by one, in
	// parallel, as they take the locks that are never batched.
	defer func() { l.keeper.single(single) }()
	if len(in) == 0 {
		return
	}
	if !l.enter() {
		for _, h := range in {
			h.unlockBatched()
		}
		single = in // each gets ErrClosed and leaves
		return
	}
	defer l.ops.Done()
	start := l.env.now()
	in, b, first, last, late := batchOf(in, start)
	single = append(single, late...)
	if len(in) == 0 {
		return
	}
	// An answer after the last deadline is worthless to every lock.
	ctx, cancel := l.until(context.Background(), last)
	defer cancel()
	ctx, stop := l.keepContext(ctx, start)
	defer stop()
	res := l.extendRound(ctx, start, l.keepWait(first), b)
	elapsed := l.env.now().Sub(start)
	l.pace.record(elapsed)
	l.tel.round(ctx, l, "extend", res)
	single = append(single, settleBatch(in, b, res, start, elapsed)...)
}

// claimBatch takes each of hs for a batched extension: its busy mutex and
// its Lock's extension mutex held (in), or, when another worker or an
// Extend has it, for the single path (single); one that left the keeper,
// or whose context ended, is dropped.
func claimBatch(hs []*keeping) (in, single []*keeping) {
	for _, h := range hs {
		k := &h.lk.locker.keeper
		if !h.busy.TryLock() {
			// Another worker extends it, or Unlock stops it: the single
			// path waits for that, then does what is left.
			single = append(single, h)
			continue
		}
		k.mu.Lock()
		left := h.left
		k.mu.Unlock()
		switch {
		case left:
			h.busy.Unlock()
			continue
		case h.ctx.Err() != nil:
			k.leave(h)
			h.busy.Unlock()
			continue
		}
		if !h.lk.extMu.TryLock() {
			h.busy.Unlock()
			single = append(single, h) // an Extend of the caller's is under way
			continue
		}
		in = append(in, h)
	}
	return in, single
}

// unlockBatched releases what claimBatch took of h.
func (h *keeping) unlockBatched() {
	h.lk.extMu.Unlock()
	h.busy.Unlock()
}

// batchOf is the batch of in's locks still to extend at start (in, kept in
// place), their earliest and latest deadlines, and those released or past
// their deadline (late: unlocked, for the single path).
func batchOf(in []*keeping, start time.Time) (kept []*keeping, b *extBatch, first, last time.Time, late []*keeping) {
	b = &extBatch{need: in[0].lk.locker.need}
	n := 0
	for _, h := range in {
		lk := h.lk
		lk.mu.Lock()
		released, deadline, ttl := lk.released, lk.deadline, lk.ttl
		lk.mu.Unlock()
		if released || !start.Before(deadline) {
			h.unlockBatched()
			late = append(late, h)
			continue
		}
		in[n] = h
		n++
		b.keys = append(b.keys, lk.key)
		b.tokens = append(b.tokens, lk.token)
		b.ttls = append(b.ttls, uint64(ttl.Milliseconds()))
		last = later(last, deadline)
		if first.IsZero() || deadline.Before(first) {
			first = deadline
		}
	}
	return in[:n], b, first, last, late
}

// settleBatch decides each lock of a batched extension begun at start
// from the round res, and unlocks it; those for the single path are
// returned.
func settleBatch(in []*keeping, b *extBatch, res quorum.Result, start time.Time, elapsed time.Duration) (single []*keeping) {
	l := in[0].lk.locker
	now := l.env.now()
	refused := refusal(l.nodeResults(res))
	for i, h := range in {
		lk := h.lk
		lk.mu.Lock()
		if lk.released {
			// Unlocked during the round: nothing of it counts.
			lk.mu.Unlock()
			l.keeper.leave(h)
			h.unlockBatched()
			continue
		}
		if int(b.ok[i]) >= l.need && lk.budget.Validity(elapsed) > 0 && now.Before(lk.deadline) {
			lk.setDeadlineLocked(lk.budget.Deadline(start)) // re-arms h.lost and plans the next
			l.tel.extension(h.ctx, outExtended, lk.resource)
			if h.failed > 0 {
				l.log.InfoContext(h.ctx, "redlock: extended after a failure", l.logResource(lk.resource), "token", shortToken(lk.token), "failed", h.failed)
			}
			h.failed = 0
			lk.mu.Unlock()
			h.unlockBatched()
			continue
		}
		// Not extended. A refusal by the masters' ACL ends the keeping
		// (the single path returns ErrInvalid and leaves); otherwise, as
		// after a failed Extend, retry while time remains (in a batch
		// again: a failed batch must not turn into one call per lock,
		// just when the masters are slow), or leave past the deadline,
		// where the timer ends the lock.
		if refused != nil {
			lk.mu.Unlock()
			h.unlockBatched()
			single = append(single, h)
			continue
		}
		h.failed++
		deadline := lk.deadline
		var err error
		switch {
		case !now.Before(deadline):
			l.keeper.leave(h)
		case int(b.ok[i]) < l.need:
			err = &Error{Op: "extend", Resource: lk.resource, Need: l.need, Reason: "no majority extended the key in a batched extension", kind: ErrLost}
		default:
			err = &Error{Op: "extend", Resource: lk.resource, Need: l.need, Reason: lateReason(elapsed, lk.budget), kind: ErrLost}
		}
		l.tel.extension(h.ctx, outExtFailed, lk.resource)
		if err != nil {
			h.retryLocked(err, deadline)
		}
		lk.mu.Unlock()
		h.unlockBatched()
	}
	return single
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// errBatchDecided ends a batched extension's wait once every lock in it
// is decided.
var errBatchDecided = errors.New("redlock: every lock of the batch is decided")

// extendRound sends b to every master and waits until each of its locks
// is decided (a majority extended it, or too few masters are left to),
// wait has passed since start (keepWait), or ctx ends. Each master's answer
// counts for a lock only if it came before the wait ended.
func (l *Locker) extendRound(ctx context.Context, start time.Time, wait time.Duration, b *extBatch) quorum.Result {
	n := len(l.streams)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	b.begin(n, cancel)
	r, _ := quorum.NewRound(n, l.need, true, start)
	cmds := make([]cmd, n)
	for i, s := range l.streams {
		c := &cmds[i]
		c.round, c.node, c.ext = r, i, b
		c.kind, c.key = cmdExtendBatch, b.keys[0]
		switch s.submit(c, start) {
		case refused:
			r.Skip(i, quorum.Unavailable, s.skipError())
			b.answered(i, false)
		case parked:
			r.Skip(i, quorum.Unavailable, errDeferred)
			b.answered(i, false)
		}
	}
	res := l.env.await(ctx, r, wait)
	b.stop()
	if errors.Is(context.Cause(ctx), errBatchDecided) {
		res.Err = nil
	}
	l.pace.observe(res)
	return res
}

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
