package redlock

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/quorumlab/redlock/driver"
	"github.com/quorumlab/redlock/internal/sim"
	"github.com/quorumlab/redlock/internal/sim/world"
	"github.com/quorumlab/redlock/internal/transport"
	"github.com/quorumlab/redlock/quorum"
)

// The deterministic simulator's process (docs/design.md §20): a real
// Locker, detached (env.go), whose callers run the library's own Lock and
// Unlock (the wait's state machine and its driver, the rounds, the
// validity arithmetic, the waker, the streams with their breakers,
// parking and NOSCRIPT resends, the Lua scripts' models on the masters)
// against the world's simulated masters, network and clocks
// (internal/sim/world). What it replaces is the transport (a link that
// turns each command into a world Send, a subscription that turns into
// world Subscribes) and time: the world's clock of the process, its
// timers, and its seeded randomness.
//
// Each caller is a coroutine (iter.Pull): it runs the library's blocking
// code until that code waits (a round's replies, the wait's sleep, the
// caller's own hold), and yields there; the process resumes it once what
// it waits for has come. Only one coroutine runs at a time, and the
// process picks the next in a fixed order, so a seed replays exactly.

// simEpoch is what the process clock counts from: a time.Time with no
// monotonic reading, so that Add, Sub and Before work as usual.
var simEpoch = time.Unix(0, 0)

// simConfig is what the processes of one run share.
type simConfig struct {
	opts      Options
	resources []string
	callers   int           // callers per process
	hold      time.Duration // a section lasts up to
	think     time.Duration // between two calls, up to
	limit     time.Duration // a Lock call's context limit (0: none)
	// toDeadline: a section lasts until just before the lock's deadline
	// (100µs, on the holder's clock), then the holder stalls for
	// stall before it acts (a stop-the-world pause between its check of
	// the deadline and its write). acts: the holder acts until it exits
	// (the history's interval has no deadline); otherwise it counts on
	// the lock until its deadline plus the SafetyMargin, the instant up
	// to which a holder that checked its deadline in time may still act
	// (docs/design.md §3, assumption 4).
	toDeadline bool
	stall      time.Duration
	acts       bool
	// pollers: callers per process that call TryLock (one round, no
	// wait) instead of Lock, and so take a key the moment it is free.
	pollers int
	// permits: each resource is a Semaphore of that many permits
	// (Acquire, TryAcquire); readers: each is an RWMutex, and a call is an
	// RLock with that chance (a Lock otherwise); 0: a mutex.
	permits int
	readers float64
	// extend: a holder extends its lock halfway through its section.
	// extendDrawn: that Extend draws its TTL (WithTTL, whole milliseconds
	// from half the lock's TTL to three times it) one time in two, and
	// its context one time in two ends at an instant drawn up to twice
	// MasterTimeout into the round, as a caller's deadline does: an
	// extension then reaches some masters and not others, and the keys'
	// lives differ from master to master (what Adopt and Unlock must read
	// right).
	extend, extendDrawn bool
	// election: each resource is an election (Options.Fencing); a call
	// is a Campaign (unkept), a section reads the Leader and may Proclaim,
	// and the holder Resigns.
	election bool
	// extendTTL (with toDeadline): a MasterTimeout before its deadline the
	// holder extends its lock, with a TTL drawn from [extendTTL[0],
	// extendTTL[1]] in whole milliseconds (WithTTL). An Extend that
	// returns nil promises that the new deadline is still ahead
	// (docs/design.md §6): the holder takes it as its check of the
	// deadline, and stalls for stall before it acts; then it goes on to
	// the deadline, new or old, as without an extension.
	extendTTL [2]time.Duration
	// keep: the chance that a section keeps its lock (Do's fn for a
	// mutex half the time, Lock and Keep otherwise) and holds it for up
	// to keepHold, several TTLs, while the Locker's keeper extends it.
	keep     float64
	keepHold time.Duration
	// closeEarly: the chance that a process closes its Locker as soon as
	// its callers have returned, without waiting for its streams: what
	// they still hold for a stalled or cut master (releases, leaves) is
	// dropped, as when a service restarts during an incident. The run
	// then lets every key's life pass before it looks for leftovers.
	closeEarly float64
	// The rest of the surface (sim_surface_test.go). adopt: the chance
	// that a holder of a mutex's lock hands it over by its token instead
	// of unlocking it. multi: the chance that a call locks several
	// resources (LockAll, TryLockAll for a poller); each process has an
	// adopter, a caller that adopts what the others hand over, at once
	// (sim_surface_test.go). watch: the chance that
	// a caller reads who holds its resource before its call (Holders, or
	// Leader for an election). observe: each process of an election row
	// runs an observer (Observe's loop) on one election.
	adopt, multi, watch float64
	observe             bool
	// shut: the chance that a process ends by a closer of its own, at an
	// instant drawn in the run's span: Shutdown or Close, racing its
	// callers in whatever state they are (sim_surface_test.go).
	shut float64
}

// simProc is one process: a Locker and its callers. It is the world's
// Client and the Locker's env.
type simProc struct {
	w     *world.World
	rng   *rand.Rand
	id    int
	cfg   *simConfig
	l     *Locker
	clock time.Duration // the process's clock at the current event
	out   []world.Action

	paths   []*simPath
	subs    []*simSub
	callers []*simCaller
	spawned []*simCaller // the Locker's own goroutines (env.spawn), while they run
	cur     *simCaller
	timers  map[uint64]*simTimer
	timerID uint64
	pending []func()   // what later was handed, in order
	dones   []*simDone // afterDone's, in the order registered
	calls   uint64
	sems    map[string]*Semaphore
	rws     map[string]*RWMutex
	elects  map[*simCaller]map[string]*Election // each caller campaigns on its own

	stopping bool
	stopped  time.Duration // when Stop came
	closed   bool
	early    bool // closes without waiting for its streams (closeEarly)
	// base is every call's parent context: a process that closes early
	// cancels it when it stops, as a service shutting down cancels the
	// requests in flight.
	base       context.Context
	cancelBase context.CancelFunc

	broken []world.Violation // promises the process saw broken (violates)
	losses []world.Loss      // kept locks lost while held (world.Kept judges them)

	shared    *simShared       // what the run's processes share (handed-over locks)
	held      map[uint64]*Lock // with a closer: the locks of the sections open, by call
	closing   bool             // the closer began: calls that fail now are its
	obsCtx    context.Context
	cancelObs context.CancelFunc // ends the observers (simConfig.observe) at Stop
}

var (
	_ world.Client = (*simProc)(nil)
	_ env          = (*simProc)(nil)
)

// newSimProc makes the process that will be the world's client id.
func newSimProc(w *world.World, id int, cfg *simConfig, shared *simShared) (*simProc, error) {
	p := &simProc{w: w, rng: w.Rand(), id: id, cfg: cfg, timers: map[uint64]*simTimer{}, shared: shared,
		sems: map[string]*Semaphore{}, rws: map[string]*RWMutex{}, elects: map[*simCaller]map[string]*Election{}}
	n := w.Masters()
	masters := make([]driver.Master, n)
	p.paths = make([]*simPath, n)
	p.subs = make([]*simSub, n)
	for i := range masters {
		masters[i] = &simMaster{p: p, i: i}
		p.paths[i] = &simPath{p: p, m: i}
	}
	opts := cfg.opts
	l, err := newLocker(masters, &opts, p, func(c *pathConfig) pathway {
		sp := p.paths[c.Master]
		sp.s = transport.NewStream(c, sp.dial, 0)
		return pathway{sp.s}
	})
	if err != nil {
		return nil, err
	}
	p.l = l
	p.base, p.cancelBase = context.WithCancel(context.Background())
	p.obsCtx, p.cancelObs = context.WithCancel(context.Background())
	if cfg.closeEarly > 0 {
		p.early = p.rng.Float64() < cfg.closeEarly
	}
	return p, nil
}

// The env.

func (p *simProc) now() time.Time { return simEpoch.Add(p.clock) }

func (p *simProc) await(ctx context.Context, r *quorum.Round, timeout time.Duration) quorum.Result {
	if !r.Decided() && ctx.Err() == nil {
		c := p.caller("a round")
		c.wait, c.round, c.ctx = waitRound, r, ctx
		c.arm(r.Start().Add(timeout).Sub(p.now()))
		c.suspend()
	}
	var err error
	if !r.Decided() && ctx.Err() != nil {
		err = ctx.Err()
	}
	return r.Finish(p.now(), timeout, err)
}

func (p *simProc) sleep(ctx, quit context.Context, delay time.Duration, woken <-chan struct{}, _ **time.Timer) wakeup {
	c := p.caller("a wait")
	c.wait, c.ctx, c.quit, c.woken = waitSleep, ctx, quit, woken
	c.arm(delay)
	c.suspend()
	switch {
	case ctx.Err() != nil:
		return wakeCtx
	case quit.Err() != nil:
		return wakeClosed
	case len(woken) > 0:
		<-woken
		return wakeWoken
	}
	return wakeTimer
}

func (p *simProc) afterFunc(d time.Duration, f func()) stopper {
	t := &simTimer{f: f}
	p.setTimer(d, t)
	return t
}

func (p *simProc) setTimer(d time.Duration, t *simTimer) {
	p.timerID++
	p.timers[p.timerID] = t
	p.out = append(p.out, world.Action{Kind: world.After, Tag: p.timerID, Delay: max(d, 0)})
}

// simDone is one afterDone: f, once ctx has ended, unless stopped.
type simDone struct {
	ctx  context.Context
	f    func()
	over bool // run or stopped
}

// afterDone registers f, which settle runs once ctx has ended: on the
// process's own turn, not on a goroutine of the context package's.
func (p *simProc) afterDone(ctx context.Context, f func()) func() bool {
	d := &simDone{ctx: ctx, f: f}
	p.dones = append(p.dones, d)
	return func() bool {
		stopped := !d.over
		d.over = true
		return stopped
	}
}

// ended takes the first afterDone whose context has ended, and returns
// its function; nil when there is none. Stopped ones are dropped.
func (p *simProc) ended() func() {
	p.dones = slices.DeleteFunc(p.dones, func(d *simDone) bool { return d.over })
	for _, d := range p.dones {
		if d.ctx.Err() != nil {
			d.over = true
			return d.f
		}
	}
	return nil
}

func (p *simProc) random() uint64 { return p.rng.Uint64() }

func (p *simProc) intN(n int64) int64 { return p.rng.Int64N(n) }

func (p *simProc) detached() bool { return true }

func (p *simProc) later(f func()) { p.pending = append(p.pending, f) }

// spawn runs f as a coroutine of the process's, after its callers in the
// order spawned (the keeper's loop and workers).
func (p *simProc) spawn(f func()) {
	c := &simCaller{p: p, wait: waitStart, body: f}
	c.next, c.stop = iter.Pull(c.run)
	p.spawned = append(p.spawned, c)
}

// simTimer is one afterFunc.
type simTimer struct {
	f              func()
	c              *simCaller // a caller's timer, for its gen-th wait
	gen            uint64
	fired, stopped bool
}

func (t *simTimer) Stop() bool {
	was := !t.fired && !t.stopped
	t.stopped = true
	return was
}

// waitKind is what a suspended caller waits for.
type waitKind uint8

const (
	waitNone  waitKind = iota // running, or done
	waitStart                 // not yet started
	waitRound                 // a round: decided, its deadline, or ctx
	waitSleep                 // the wait's sleep: its timer, a wake, ctx, or Close
	waitPause                 // its own timer (a section's hold, the time between calls)
)

// simCaller is one goroutine of the process, as a coroutine.
type simCaller struct {
	p     *simProc
	next  func() (struct{}, bool)
	stop  func()
	yield func(struct{}) bool
	done  bool
	try   bool   // a poller
	body  func() // a spawned goroutine's (env.spawn): run once, instead of sections

	wait  waitKind
	round *quorum.Round
	ctx   context.Context
	quit  context.Context
	woken <-chan struct{}
	gen   uint64 // of the timer it waits for
	fired bool
}

// caller is the caller running now; the library waits only on one.
func (p *simProc) caller(what string) *simCaller {
	if p.cur == nil {
		panic("sim: the Locker waited for " + what + " outside a caller")
	}
	return p.cur
}

// arm sets c's timer for d from now; only the latest one counts.
func (c *simCaller) arm(d time.Duration) {
	c.gen++
	c.fired = false
	c.p.setTimer(d, &simTimer{c: c, gen: c.gen})
}

// suspend yields to the process until it resumes c.
func (c *simCaller) suspend() {
	if !c.yield(struct{}{}) {
		panic("sim: a caller was stopped while suspended")
	}
}

// pause is the caller's own wait of d.
func (c *simCaller) pause(d time.Duration) {
	if d <= 0 {
		return
	}
	c.wait = waitPause
	c.arm(d)
	c.suspend()
}

func (c *simCaller) ready() bool {
	switch c.wait {
	case waitStart:
		return true
	case waitRound:
		return c.fired || c.round.Decided() || ended(c.ctx)
	case waitSleep:
		return c.fired || len(c.woken) > 0 || ended(c.ctx) || ended(c.quit)
	case waitPause:
		return c.fired
	}
	return false
}

// ended reports whether ctx has ended, without its mutex (Err takes it).
func ended(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

// run is the caller's life: sections until the process stops.
func (c *simCaller) run(yield func(struct{}) bool) {
	c.yield = yield
	if c.body != nil {
		c.body()
		return
	}
	for !c.p.stopping {
		c.p.section(c)
	}
}

// section is one Lock call, and if it acquires, a critical section and
// Unlock.
func (p *simProc) section(c *simCaller) {
	cfg := p.cfg
	p.calls++
	call := p.calls
	res := cfg.resources[p.rng.IntN(len(cfg.resources))]
	ctx, cancel := context.WithCancel(p.base)
	defer cancel()
	if cfg.limit > 0 {
		defer p.afterFunc(cfg.limit, cancel).Stop()
	}
	if p.surface(ctx, c, res) {
		return
	}
	limit := cfg.limit
	if c.try {
		limit = time.Nanosecond // a TryLock waits for nothing: no liveness to judge
	}
	p.record(world.Note{Kind: world.Begin, Call: call, Resource: res, Limit: limit})
	if cfg.keep > 0 && !cfg.election && p.rng.Float64() < cfg.keep {
		p.keptSection(ctx, c, call, res)
		return
	}
	lk := p.take(ctx, c, call, res)
	if lk == nil {
		return
	}
	if cfg.election {
		p.lead(ctx, c, call, res, lk)
		return
	}
	p.hold(ctx, c, lk, []uint64{call})
	p.release(c, lk, []uint64{call}, 0)
}

// take is c's Lock call for res (p.lock), recorded: Acquired (and
// checked) or Failed, after which c thinks and take returns nil.
func (p *simProc) take(ctx context.Context, c *simCaller, call uint64, res string) *Lock {
	lk, mode, err := p.lock(ctx, c, res)
	if err != nil {
		p.checkOpen(err, "a call")
		p.failed(call)
		c.pause(p.draw(p.cfg.think))
		return nil
	}
	p.acquired(world.Note{Kind: world.Acquired, Call: call, Mode: mode, Fence: lk.Fence(), Deadline: p.until(lk)}, lk)
	p.checkAcquired(lk)
	return lk
}

// checkOpen: ErrClosed comes only from a Locker whose Shutdown or Close
// began (docs/design.md §9, §17).
func (p *simProc) checkOpen(err error, what string) {
	if errors.Is(err, ErrClosed) && !p.closing && !p.closed {
		p.breaks(fmt.Sprintf("%s returned %v while its Locker was open", what, err))
	}
}

// failed records that call did not acquire; when the process's stop
// cancelled it (closeEarly), its context ended then.
func (p *simProc) failed(call uint64) {
	n := world.Note{Kind: world.Failed, Call: call}
	if ended(p.base) || p.closing {
		n.Limit = 1
	}
	p.record(n)
}

// keptSection is a section that keeps its lock: Do's fn (a mutex, half
// the time) or Lock and Keep. The holder works for up to keepHold, waking
// when the lock's context ends, and stops there (Done); at each wake it
// records the deadline the keeper has moved the lock to.
func (p *simProc) keptSection(ctx context.Context, c *simCaller, call uint64, res string) {
	cfg := p.cfg
	hold := p.draw(cfg.keepHold)
	if cfg.permits == 0 && cfg.readers == 0 && p.rng.IntN(2) == 0 {
		var held *Lock
		err := p.l.Do(ctx, res, func(fctx context.Context) error {
			held, _ = FromContext(fctx)
			p.acquired(world.Note{Kind: world.Acquired, Call: call, Mode: world.Exclusive, Fence: held.Fence(), Deadline: p.until(held)}, held)
			p.checkAcquired(held)
			p.keptHold(c, call, held, fctx, hold)
			p.record(world.Note{Kind: world.Exit, Call: call})
			return nil
		})
		switch {
		case held == nil && errors.Is(err, ErrLost):
			// Do's Lock acquired, but the lock's deadline passed before
			// fn could start (a validity window barely longer than the
			// round, as the swarm draws): fn never ran on it, which
			// checkDo's promise is; the acquisition was not late, so
			// the call is not judged for liveness (docs/design.md §20).
			p.record(world.Note{Kind: world.Failed, Call: call, Limit: 1})
		case held == nil:
			p.checkOpen(err, "Do")
			p.failed(call)
		default:
			p.checkDo(held, err)
			p.checkReleased(held)
		}
		c.pause(p.draw(cfg.think))
		return
	}
	lk := p.take(ctx, c, call, res)
	if lk == nil {
		return
	}
	deadline := lk.Deadline()
	if err := lk.Keep(); err != nil {
		p.checkPast(lk, deadline, "when Keep failed")
		p.record(world.Note{Kind: world.Done, Call: call})
	} else {
		p.keptHold(c, call, lk, lk.Context(), hold)
	}
	p.record(world.Note{Kind: world.Exit, Call: call})
	_ = lk.Unlock(context.Background())
	p.checkReleased(lk)
	c.pause(p.draw(cfg.think))
}

// keptHold is a kept lock's section: up to hold, or until ctx (the
// lock's) ends, which it records as Done the instant it wakes.
func (p *simProc) keptHold(c *simCaller, call uint64, lk *Lock, ctx context.Context, hold time.Duration) {
	from, end := p.w.Now(), p.now().Add(hold)
	key := lk.key // a lock on several resources: its first key
	if len(lk.keys) > 0 {
		key = lk.keys[0]
	}
	on := p.w.HeldOn(key, lk.token) // the masters that hold it as the keeping begins (none for a reader)
	lk.mu.Lock()
	spare := lk.deadline.Sub(p.now()) - lk.leadLocked() // the keeper's time to extend it before it is declared lost
	lk.mu.Unlock()
	for !ended(ctx) && p.now().Before(end) {
		p.sleep(ctx, context.Background(), end.Sub(p.now()), nil, nil)
		p.record(world.Note{Kind: world.Extended, Call: call, Deadline: p.until(lk)})
	}
	if ended(ctx) {
		p.record(world.Note{Kind: world.Done, Call: call})
		if cause := context.Cause(ctx); errors.Is(cause, ErrLost) && !p.closing && !p.stopping {
			p.losses = append(p.losses, world.Loss{Client: p.id, Call: call, From: from, At: p.w.Now(), Spare: spare, On: on, What: fmt.Sprintf("%v (token %s)", cause, lk.token)})
		}
		return
	}
	p.checkPast(lk, lk.Deadline(), "at its exit")
}

// The lifecycle's promises (docs/design.md §8), checked where the process
// stands: a lock past its deadline, or released, is over, and whatever is
// made from it afterwards is born over.

// checkAcquired: a lock is never handed out with its validity run out
// (§2): at the decision (its Acquisition's Start + Elapsed), the deadline
// is still ahead. (Lock may return later than the decision: a pause of
// the process, which the SafetyMargin covers.)
func (p *simProc) checkAcquired(lk *Lock) {
	p.checkDecided(lk)
	p.checkKeys(lk, "acquired")
}

// checkAdopted is checkAcquired for a lock Adopt made, whose claim
// (docs/design.md §16) is that no other token holds a majority before its
// deadline: N − M + 1 masters holding ours bring that about, M the
// majority (for an odd N, M of them; for an even N, one fewer).
func (p *simProc) checkAdopted(lk *Lock) {
	p.checkDecided(lk)
	n := p.w.Masters()
	p.checkKeysOn(lk, "adopted", n-(n/2+1)+1)
}

func (p *simProc) checkDecided(lk *Lock) {
	a := lk.Acquisition()
	if decided := a.Start.Add(a.Elapsed); !decided.Before(lk.Deadline()) {
		p.breaks(fmt.Sprintf("a lock was decided %v past its deadline (elapsed %v; token %s)", decided.Sub(lk.Deadline()), a.Elapsed, lk.token))
	}
}

// checkPublished: a Campaign or a Proclaim that returned with its lock
// before the deadline has its term and value recorded on a majority of the
// masters (docs/design.md §21), read from their keyspaces (World.Recorded).
func (p *simProc) checkPublished(lk *Lock, value, when string) {
	if !p.now().Before(lk.Deadline()) {
		return
	}
	need := p.w.Masters()/2 + 1
	if n := p.w.Recorded(lk.key+leaderSuffix, "term", strconv.FormatUint(lk.Fence(), 10), "value", value); n < need {
		p.violates("published", fmt.Sprintf("%s, term %d with value %q is recorded on %d masters, of %d needed (token %s)", when, lk.Fence(), value, n, need, lk.token))
	}
}

// checkKeys: a lock on one key (a mutex's, fenced or not, or an
// election's), just acquired or extended, has its token on a majority of
// the masters until at least its deadline plus the SafetyMargin, the last
// instant its holder may act (docs/design.md §2: each counted key outlives
// start + TTL on its master's clock, which the drift and the margin
// cover; §14.3 for a handed lock, whose start is since(G)). The masters'
// keyspaces are read, not asked: the check sends nothing.
func (p *simProc) checkKeys(lk *Lock, when string) {
	p.checkKeysOn(lk, when, p.w.Masters()/2+1)
}

// checkKeysOn is checkKeys asking need masters.
func (p *simProc) checkKeysOn(lk *Lock, when string, need int) {
	if lk.mode != 0 || lk.permits > 0 {
		return
	}
	end := lk.Deadline().Add(lk.budget.SafetyMargin)
	if !p.now().Before(end) {
		return
	}
	until := p.w.Global(p.id, end.Sub(simEpoch))
	keys := lk.keys // a lock on several resources: each of its keys
	if keys == nil {
		keys = []string{lk.key}
	}
	for _, key := range keys {
		if n := p.w.Holding(key, lk.token, until); n < need {
			p.violates("keys", fmt.Sprintf("%s, its token is on %d masters for %s until its deadline and margin %v from now, of %d needed (token %s, queue member %q)",
				when, n, key, end.Sub(p.now()), need, lk.token, lk.queueID))
		}
	}
}

// checkPast: past deadline (the lock's, read before), a Context made now
// is done on return, and Keep fails.
func (p *simProc) checkPast(lk *Lock, deadline time.Time, when string) {
	if p.now().Before(deadline) {
		return
	}
	if !ended(lk.Context()) {
		p.breaks(fmt.Sprintf("a context made %v past the deadline, %s, is live (token %s)", p.now().Sub(deadline), when, lk.token))
	}
	if lk.Keep() == nil {
		p.breaks(fmt.Sprintf("Keep %v past the deadline, %s, returned nil (token %s)", p.now().Sub(deadline), when, lk.token))
	}
}

// checkReleased: after Unlock (or Do's end), a Context made now is done
// on return, Keep fails and Valid is false.
func (p *simProc) checkReleased(lk *Lock) {
	if !ended(lk.Context()) || lk.Keep() == nil || lk.Valid() {
		p.breaks("a released lock's Context, Keep or Valid says it is held (token " + lk.token + ")")
	}
}

// checkDo: Do returns ErrLost when its lock was lost while fn ran, and
// nothing wrapping ErrUnlocked.
func (p *simProc) checkDo(lk *Lock, err error) {
	if errors.Is(err, ErrUnlocked) {
		p.breaks(fmt.Sprintf("Do returned %v", err))
	}
	if lost := errors.Is(context.Cause(lk.Context()), ErrLost); lost != errors.Is(err, ErrLost) {
		p.breaks(fmt.Sprintf("Do returned %v for a lock lost=%v", err, lost))
	}
}

func (p *simProc) breaks(what string) { p.violates("lifecycle", what) }

// violates records a violation of check that the process found.
func (p *simProc) violates(check, what string) {
	if len(p.broken) < 10 {
		p.broken = append(p.broken, world.Violation{Check: check, At: p.w.Now(), What: fmt.Sprintf("process %d: %s", p.id, what)})
	}
}

// lead is an election's section: the leader reads who leads (it must be
// itself while it counts on its lock), may publish a new value halfway,
// and resigns.
func (p *simProc) lead(ctx context.Context, c *simCaller, call uint64, res string, lk *Lock) {
	e := p.elects[c][res]
	p.checkPublished(lk, "p"+strconv.Itoa(p.id), "Campaign returned")
	h := p.draw(p.cfg.hold)
	c.pause(h / 2)
	if p.rng.IntN(2) == 0 && e.Proclaim(ctx, "again") == nil {
		p.checkPublished(lk, "again", "Proclaim returned")
	}
	if l, err := e.Leader(ctx); err == nil {
		p.record(world.Note{Kind: world.Read, Call: call, Fence: l.Term})
	}
	c.pause(h - h/2)
	p.record(world.Note{Kind: world.Exit, Call: call})
	_ = e.Resign(context.Background())
	c.pause(p.draw(p.cfg.think))
}

// lock is one call of c for resource: Lock or TryLock of a mutex, an
// RWMutex or a Semaphore, or a Campaign, as the row says.
func (p *simProc) lock(ctx context.Context, c *simCaller, res string) (*Lock, world.Mode, error) {
	cfg := p.cfg
	switch {
	case cfg.election:
		e, err := p.election(c, res)
		if err != nil {
			return nil, 0, err
		}
		lk, err := e.campaign(ctx, "p"+strconv.Itoa(p.id), false, nil)
		return lk, world.Exclusive, err
	case cfg.permits > 0:
		sem, err := p.semaphore(res)
		if err != nil {
			return nil, 0, err
		}
		if c.try {
			lk, err := sem.TryAcquire(ctx)
			return lk, world.Permit, err
		}
		lk, err := sem.Acquire(ctx)
		return lk, world.Permit, err
	case cfg.readers > 0:
		rw := p.rws[res]
		if rw == nil {
			var err error
			if rw, err = p.l.RWMutex(res); err != nil {
				return nil, 0, err
			}
			p.rws[res] = rw
		}
		read := p.rng.Float64() < cfg.readers
		var lk *Lock
		var err error
		switch {
		case read && c.try:
			lk, err = rw.TryRLock(ctx)
		case read:
			lk, err = rw.RLock(ctx)
		case c.try:
			lk, err = rw.TryLock(ctx)
		default:
			lk, err = rw.Lock(ctx)
		}
		if read {
			return lk, world.Shared, err
		}
		return lk, world.Exclusive, err
	case c.try:
		lk, err := p.l.TryLock(ctx, res)
		return lk, world.Exclusive, err
	}
	lk, err := p.l.Lock(ctx, res)
	return lk, world.Exclusive, err
}

// until is when the holder of lk stops counting on it: its deadline plus
// the SafetyMargin, or with acts, never before it exits (0).
func (p *simProc) until(lk *Lock) time.Duration {
	if p.cfg.acts {
		return 0
	}
	return lk.Deadline().Add(lk.budget.SafetyMargin).Sub(simEpoch)
}

// draw is a uniform draw from [0, d].
func (p *simProc) draw(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(p.rng.Int64N(int64(d) + 1))
}

func (p *simProc) record(n world.Note) {
	if n.Kind == world.Exit && p.held != nil {
		delete(p.held, n.Call)
	}
	p.out = append(p.out, world.Action{Kind: world.Record, Note: n})
}

// acquired records n, the acquisition of lk, and with a closer
// (simConfig.shut) keeps lk until its section's Exit.
func (p *simProc) acquired(n world.Note, lk *Lock) {
	if p.held != nil {
		p.held[n.Call] = lk
	}
	p.record(n)
}

// settle runs what the event made ready, in a fixed order, until nothing
// is: the work handed to later (streams flushing), the subscriptions'
// changes and announcements, then the first caller ready, again and
// again. Once stopped and idle, it closes the Locker.
func (p *simProc) settle() {
	for {
		if len(p.pending) > 0 {
			f := p.pending[0]
			p.pending = p.pending[1:]
			f()
			continue
		}
		if f := p.ended(); f != nil {
			f()
			continue
		}
		if !p.closed {
			p.l.wake.pump()
		}
		if len(p.pending) > 0 {
			continue
		}
		var next *simCaller
		for _, c := range p.callers {
			if !c.done && c.ready() {
				next = c
				break
			}
		}
		if next == nil {
			p.spawned = slices.DeleteFunc(p.spawned, func(c *simCaller) bool { return c.done })
			for _, c := range p.spawned {
				if c.ready() {
					next = c
					break
				}
			}
		}
		if next == nil {
			break
		}
		p.resume(next)
	}
	p.maybeClose()
}

func (p *simProc) resume(c *simCaller) {
	c.wait = waitNone
	p.cur = c
	_, ok := c.next()
	p.cur = nil
	if !ok {
		c.done = true
	}
}

// maybeClose closes the Locker once the process has stopped, its callers
// have returned, and its streams have nothing queued, unanswered or
// parked (or a minute has passed since Stop: a master that never comes
// back keeps its parked releases, and their keys expire with their TTL;
// or at once, for a process that closes early).
func (p *simProc) maybeClose() {
	if !p.stopping || p.closed {
		return
	}
	for _, c := range p.callers {
		if !c.done {
			return
		}
	}
	for _, c := range p.spawned {
		if !c.done {
			return // the keeper: Close would wait for its rounds
		}
	}
	if !p.early && p.clock-p.stopped < time.Minute {
		for _, sp := range p.paths {
			if sp.busy() {
				if !sp.retry {
					// Nothing else may come to wake the process: look
					// again on the stream's probe period.
					sp.retry = true
					p.afterFunc(transport.ProbeEvery, func() { sp.retry = false })
				}
				return
			}
		}
	}
	p.closed = true
	p.l.Close()
}

// The world's events.

func (p *simProc) Start(now time.Duration) []world.Action {
	p.clock = now
	p.out = p.out[:0]
	for i := range p.cfg.callers + p.cfg.pollers {
		c := &simCaller{p: p, wait: waitStart, try: i >= p.cfg.callers}
		c.next, c.stop = iter.Pull(c.run)
		p.callers = append(p.callers, c)
	}
	if p.cfg.shut > 0 && p.rng.Float64() < p.cfg.shut {
		p.held = map[uint64]*Lock{}
		c := &simCaller{p: p, wait: waitStart}
		at, shutdown := p.draw(p.shared.span), p.rng.IntN(2) == 0
		c.body = func() { p.closer(c, at, shutdown) }
		c.next, c.stop = iter.Pull(c.run)
		p.callers = append(p.callers, c)
	}
	if p.cfg.adopt > 0 {
		c := &simCaller{p: p, wait: waitStart}
		c.body = func() { p.adopter(c) }
		c.next, c.stop = iter.Pull(c.run)
		p.callers = append(p.callers, c)
	}
	if p.cfg.observe {
		res := p.cfg.resources[p.rng.IntN(len(p.cfg.resources))]
		c := &simCaller{p: p, wait: waitStart}
		id := uint64(len(p.callers) + 1)
		c.body = func() { p.observe(res, id) }
		c.next, c.stop = iter.Pull(c.run)
		p.callers = append(p.callers, c)
	}
	p.settle()
	return p.out
}

func (p *simProc) event(now time.Duration) {
	p.clock = now
	p.out = p.out[:0]
}

func (p *simProc) Reply(now time.Duration, m int, tag uint64, r sim.Reply) []world.Action {
	p.event(now)
	sp := p.paths[m]
	if k := sp.link; k != nil && k.gen == tag && !k.dead {
		sp.s.Answer(k, transport.RawOf(driver.Reply{Kind: driver.ReplyKind(r.Kind), Int: r.Int, Text: r.Text}), p.now())
	}
	p.settle()
	return p.out
}

func (p *simProc) Lost(now time.Duration, m int, tag uint64) []world.Action {
	p.event(now)
	sp := p.paths[m]
	if k := sp.link; k != nil && k.gen == tag && !k.dead {
		k.dead = true
		sp.s.Broken(k, errSimLost)
	}
	p.settle()
	return p.out
}

func (p *simProc) Message(now time.Duration, m int, channel, payload string) []world.Action {
	p.event(now)
	if s := p.subs[m]; s != nil {
		s.deliver(channel, payload)
	}
	p.settle()
	return p.out
}

func (p *simProc) Subscribed(now time.Duration, _ int, _ string, _ bool) []world.Action {
	p.event(now)
	p.settle()
	return p.out
}

func (p *simProc) Resubscribe(now time.Duration, m int) []world.Action {
	p.event(now)
	if s := p.subs[m]; s != nil {
		s.resubscribe()
	}
	p.settle()
	return p.out
}

func (p *simProc) Timer(now time.Duration, id uint64) []world.Action {
	p.event(now)
	if t := p.timers[id]; t != nil {
		delete(p.timers, id)
		switch {
		case t.c != nil:
			if t.c.gen == t.gen {
				t.c.fired = true
			}
		case !t.stopped:
			t.fired = true
			t.f()
		}
	}
	p.settle()
	return p.out
}

func (p *simProc) Stop(now time.Duration) []world.Action {
	p.event(now)
	p.stopping, p.stopped = true, now
	p.cancelObs()
	if p.early {
		p.cancelBase()
	}
	p.settle()
	return p.out
}

var (
	errSimLost    = errors.New("sim: connection lost")
	errSimRefused = errors.New("sim: connection refused")
)

// simPath is the process's path to one master: a real stream, over
// simLinks.
type simPath struct {
	p     *simProc
	m     int
	s     *transport.Stream
	link  *simLink
	gen   uint64
	retry bool // maybeClose looks again on a timer
}

// dial connects when the world lets the process reach the master.
func (sp *simPath) dial() (transport.Link, string, error) {
	p := sp.p
	if !p.w.Reachable(p.id, sp.m) {
		return nil, "", errSimRefused
	}
	sp.gen++
	sp.link = &simLink{sp: sp, gen: sp.gen}
	return sp.link, p.w.Master(sp.m).RunID(), nil
}

// busy reports whether the stream has commands queued, unanswered or
// parked.
func (sp *simPath) busy() bool { return sp.s.Busy() }

// simLink is one connection: each command a world Send, tagged with the
// connection's generation (a reply to an earlier one is dropped).
type simLink struct {
	sp   *simPath
	gen  uint64
	dead bool
	buf  []arg // a command's arguments, reused: the stream writes one batch at a time
}

func (k *simLink) Direct() bool { return true }

func (k *simLink) Write(batch []transport.Command) error {
	if k.dead {
		return errSimLost
	}
	p := k.sp.p
	for _, c := range batch {
		// A stack array would escape through the interface call and
		// cost an allocation per batch.
		k.buf = c.Args(k.buf[:0])
		args := make([]string, len(k.buf))
		for i, a := range k.buf {
			args[i] = a.String()
		}
		p.out = append(p.out, world.Action{Kind: world.Send, Master: k.sp.m, Tag: k.gen, Args: args})
	}
	return nil
}

// Close ends the connection; its reader would then tell the stream.
func (k *simLink) Close() {
	if k.dead {
		return
	}
	k.dead = true
	s := k.sp.s
	k.sp.p.later(func() { s.Broken(k, errSimLost) })
}

// simMaster is a master as the Locker is given it: a Subscriber, whose
// subscription is the world's pub/sub connection. Its commands go by the
// simPath, never by Do.
type simMaster struct {
	p *simProc
	i int
}

func (m *simMaster) Do(context.Context, [][]string) ([]driver.Reply, error) {
	return nil, errors.New("sim: Do is not the simulator's path")
}

func (m *simMaster) Addr() string { return fmt.Sprintf("sim-%d", m.i) }

func (m *simMaster) Subscribe(_ context.Context, deliver func(channel, payload string)) (driver.Subscription, error) {
	p := m.p
	if !p.w.SubReachable(p.id, m.i) {
		return nil, errSimRefused
	}
	s := &simSub{p: p, m: m.i, deliver: deliver, on: map[string]bool{}}
	p.subs[m.i] = s
	return s, nil
}

// simSub is one pub/sub connection. It keeps its channels in the order
// subscribed, to subscribe them again (as go-redis does) when the
// connection comes back.
type simSub struct {
	p       *simProc
	m       int
	deliver func(channel, payload string)
	on      map[string]bool
	order   []string
}

func (s *simSub) send(kind world.ActionKind, channel string) {
	s.p.out = append(s.p.out, world.Action{Kind: kind, Master: s.m, Channel: channel})
}

func (s *simSub) Subscribe(_ context.Context, channels ...string) error {
	for _, c := range channels {
		if !s.on[c] {
			s.on[c] = true
			s.order = append(s.order, c)
		}
		s.send(world.Subscribe, c)
	}
	return nil
}

func (s *simSub) Unsubscribe(_ context.Context, channels ...string) error {
	for _, c := range channels {
		if s.on[c] {
			delete(s.on, c)
			s.send(world.Unsubscribe, c)
		}
	}
	kept := s.order[:0]
	for _, c := range s.order {
		if s.on[c] {
			kept = append(kept, c)
		}
	}
	s.order = kept
	return nil
}

func (s *simSub) resubscribe() {
	for _, c := range s.order {
		s.send(world.Subscribe, c)
	}
}

func (s *simSub) Close() error {
	for _, c := range s.order {
		s.send(world.Unsubscribe, c)
	}
	s.order, s.on = nil, nil
	if s.p.subs[s.m] == s {
		s.p.subs[s.m] = nil
	}
	return nil
}
