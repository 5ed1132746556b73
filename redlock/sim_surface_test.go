package redlock

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/quorumlab/redlock/internal/sim/world"
)

// The rest of the public surface in the simulator (docs/design.md §20):
// locks handed over by their token and adopted by another process
// (Adopt), locks on several resources (LockAll, TryLockAll), readings
// of a semaphore's holders (Holders) and of an election's leader (Leader,
// Observe), each drawn into a section by simConfig's chances.

// simShared is what the processes of one run share: the locks handed
// over, for another process to adopt.
type simShared struct {
	span   time.Duration // the run's
	handed []simHandover
	nextLn uint64
	count  [numSurface]int // what the run exercised, for TestSim's report
}

// The parts of the surface a run counts.
const (
	cAdopt = iota // Adopt calls
	cAdopted
	cMulti // LockAll and TryLockAll calls
	cMultiHeld
	cHolders // readings of Holders, Leader, Observe deliveries
	cLeader
	cObserved
	cShutdown // Shutdown and Close calls
	cClose
	numSurface
)

var surfaceNames = [numSurface]string{"Adopt", "adopted", "LockAll", "held all", "Holders", "Leader", "Observe deliveries", "Shutdown", "Close"}

// simHandover is a lock its holder handed over by its token, as a
// process persists its token before a restart (Adopt's use).
type simHandover struct {
	from     int // the process that handed it
	resource string
	token    string
	fence    uint64
	lineage  uint64
}

// surface runs what the row draws before an ordinary section: a reading
// (Holders, Leader), then a lock on several resources instead of the
// section. It reports whether it ran a section.
func (p *simProc) surface(ctx context.Context, c *simCaller, res string) bool {
	cfg := p.cfg
	if cfg.watch > 0 && p.rng.Float64() < cfg.watch {
		p.watchOnce(ctx, c, res)
	}
	if cfg.multi > 0 && len(cfg.resources) > 1 && p.rng.Float64() < cfg.multi {
		p.multiSection(ctx, c)
		return true
	}
	return false
}

// watchOnce is one reading of who holds res: a semaphore's Holders, or
// an election's Leader, recorded when it succeeds. The reader is c (its
// readings are one sequence).
func (p *simProc) watchOnce(ctx context.Context, c *simCaller, res string) {
	since := p.now()
	n := world.Note{Kind: world.Observed, Call: c.observer(), Resource: res, Since: since.Sub(simEpoch)}
	switch {
	case p.cfg.permits > 0:
		sem, err := p.semaphore(res)
		if err != nil {
			return
		}
		k, err := sem.Holders(ctx)
		if err != nil {
			return
		}
		n.Mode, n.Fence = world.Permit, uint64(k)
		p.shared.count[cHolders]++
	case p.cfg.election:
		e, err := p.election(c, res)
		if err != nil {
			return
		}
		l, err := e.Leader(ctx)
		if err != nil {
			return
		}
		n.Mode, n.Fence = world.Exclusive, l.Term
		p.shared.count[cLeader]++
	default:
		return
	}
	p.record(n)
}

// observer names c's readings: its index among the process's callers,
// from 1.
func (c *simCaller) observer() uint64 {
	return uint64(slices.Index(c.p.callers, c) + 1)
}

// observe is an observer's life (a caller of its own, simConfig.observe):
// Observe's loop on one election until the process stops, each delivery
// recorded with when its reading began.
func (p *simProc) observe(res string, id uint64) {
	e, err := p.l.Election(res)
	if err != nil {
		return
	}
	ctx := p.obsCtx
	e.observe(ctx, p.l.watch(e.t.key, e.t.key+leaderSuffix), func(l Leader, asked time.Time) bool {
		p.shared.count[cObserved]++
		p.record(world.Note{Kind: world.Observed, Call: id, Resource: res, Mode: world.Exclusive, Fence: l.Term, Since: asked.Sub(simEpoch)})
		return true
	})
}

// handOver: with the row's chance, the holder of lk (a lock on one key
// of a mutex) hands it over instead of unlocking it: it stops counting on
// it (Exit) and leaves its token for another process to adopt. Its Locker
// forgets the lock, as a process that restarts does (Shutdown would
// release it otherwise). It reports whether it did.
func (p *simProc) handOver(lk *Lock, call uint64, lineage uint64) bool {
	cfg := p.cfg
	if cfg.adopt == 0 || lk.mode != 0 || lk.permits > 0 || lk.resources != nil || cfg.election || p.rng.Float64() >= cfg.adopt {
		return false
	}
	if p.closing {
		// The closer stopped this section (its Exit is recorded) and its
		// Shutdown releases the lock: a holder that has let go hands
		// nothing over.
		return false
	}
	if lineage == 0 {
		p.shared.nextLn++
		lineage = p.shared.nextLn
	}
	p.record(world.Note{Kind: world.Exit, Call: call, Lineage: lineage})
	p.checkPast(lk, lk.Deadline(), "at its exit")
	p.l.live.remove(lk)
	p.shared.handed = append(p.shared.handed, simHandover{from: p.id, resource: lk.resource, token: lk.token, fence: lk.fence, lineage: lineage})
	return true
}

// adopterPoll is how often an adopter looks for a lock handed over: at
// first, doubling while it finds none, up to 32 times that.
const adopterPoll = time.Millisecond

// adopter is the life of a process's adopter (a caller of its own, with
// simConfig.adopt): it adopts each lock another process handed over, as
// a process that restarts adopts the locks it persisted, until the
// process stops.
func (p *simProc) adopter(c *simCaller) {
	poll := adopterPoll
	for !p.stopping {
		i := slices.IndexFunc(p.shared.handed, func(h simHandover) bool { return h.from != p.id })
		if i < 0 {
			c.pause(poll)
			poll = min(2*poll, 32*adopterPoll)
			continue
		}
		poll = adopterPoll
		h := p.shared.handed[i]
		p.shared.handed = slices.Delete(p.shared.handed, i, i+1)
		ctx, cancel := context.WithCancel(p.base)
		p.adoptSection(ctx, c, h)
		cancel()
	}
}

// adoptSection is a section on a lock adopted by its token (Adopt): the
// adopted holder excludes every other, its fence is the one the lock was
// granted, and its keys keep every other token from a majority until its
// deadline (checkAdopted).
func (p *simProc) adoptSection(ctx context.Context, c *simCaller, h simHandover) {
	p.calls++
	call := p.calls
	// An adoption is one round and no wait: liveness does not judge it.
	p.record(world.Note{Kind: world.Begin, Call: call, Resource: h.resource, Limit: time.Nanosecond})
	p.shared.count[cAdopt]++
	lk, err := p.l.Adopt(ctx, h.resource, h.token)
	if err != nil {
		p.failed(call)
		c.pause(p.draw(p.cfg.think))
		return
	}
	p.shared.count[cAdopted]++
	p.acquired(world.Note{Kind: world.Acquired, Call: call, Mode: world.Exclusive, Fence: lk.Fence(), Deadline: p.until(lk), Lineage: h.lineage}, lk)
	p.checkAdopted(lk)
	if lk.Fence() != h.fence {
		p.violates("adopt", fmt.Sprintf("adopted token %s with fence %d, granted %d", h.token, lk.Fence(), h.fence))
	}
	p.hold(ctx, c, lk, []uint64{call})
	p.release(c, lk, []uint64{call}, h.lineage)
}

// multiSection is a section on several resources at once (LockAll, or
// TryLockAll for a poller): all or none, each resource its own interval
// with the lock's fence and deadline, so that exclusion and fences hold
// it against every other holder of any of them.
func (p *simProc) multiSection(ctx context.Context, c *simCaller) {
	cfg := p.cfg
	perm := p.rng.Perm(len(cfg.resources))
	rs := make([]string, 2+p.rng.IntN(len(cfg.resources)-1))
	calls := make([]uint64, len(rs))
	for i := range rs {
		rs[i] = cfg.resources[perm[i]]
		p.calls++
		calls[i] = p.calls
		// Liveness's bound counts the callers of one resource: a call on
		// several is not judged.
		p.record(world.Note{Kind: world.Begin, Call: calls[i], Resource: rs[i], Limit: time.Nanosecond})
	}
	p.shared.count[cMulti]++
	var lk *Lock
	var err error
	if c.try {
		lk, err = p.l.TryLockAll(ctx, rs)
	} else {
		lk, err = p.l.LockAll(ctx, rs)
	}
	if err != nil {
		for _, call := range calls {
			p.failed(call)
		}
		c.pause(p.draw(cfg.think))
		return
	}
	p.shared.count[cMultiHeld]++
	for _, call := range calls {
		p.acquired(world.Note{Kind: world.Acquired, Call: call, Mode: world.Exclusive, Fence: lk.Fence(), Deadline: p.until(lk)}, lk)
	}
	p.checkAcquired(lk)
	if got := lk.Resources(); len(got) != len(rs) {
		p.breaks(fmt.Sprintf("LockAll of %v returned a lock on %v", rs, got))
	}
	p.hold(ctx, c, lk, calls)
	p.release(c, lk, calls, 0)
}

// hold is a section's work on lk, recorded for each of calls: to the
// deadline, extending halfway, or for a drawn time, as the row says.
func (p *simProc) hold(ctx context.Context, c *simCaller, lk *Lock, calls []uint64) {
	cfg := p.cfg
	extended := func() {
		// An extension succeeds only if its new deadline is still ahead
		// when it is decided (docs/design.md §6 item 4); nothing moves the
		// process's clock between the decision and the return.
		if !p.now().Before(lk.Deadline()) {
			p.breaks(fmt.Sprintf("an Extend returned nil %v past its new deadline (token %s)", p.now().Sub(lk.Deadline()), lk.token))
		}
		for _, call := range calls {
			p.record(world.Note{Kind: world.Extended, Call: call, Deadline: p.until(lk)})
		}
		p.checkKeys(lk, "extended")
	}
	switch {
	case cfg.toDeadline:
		if lo, hi := cfg.extendTTL[0], cfg.extendTTL[1]; hi > 0 {
			c.pause(lk.Deadline().Sub(p.now()) - p.l.opts.MasterTimeout)
			ttl := lo + p.draw(hi-lo)/time.Millisecond*time.Millisecond
			if p.now().Before(lk.Deadline()) && lk.Extend(ctx, WithTTL(ttl)) == nil {
				extended()
				c.pause(cfg.stall)
			}
		}
		c.pause(lk.Deadline().Sub(p.now()) - 100*time.Microsecond)
		if p.now().Before(lk.Deadline()) {
			c.pause(cfg.stall)
		}
	case cfg.extend:
		h := p.draw(cfg.hold)
		c.pause(h / 2)
		if p.extend(ctx, lk) == nil {
			extended()
		}
		c.pause(h - h/2)
	default:
		c.pause(p.draw(cfg.hold))
	}
}

// extendDrawnMax is the longest TTL an Extend draws (simConfig.extendDrawn),
// in lock TTLs.
const extendDrawnMax = 3

// extend is a section's Extend (simConfig.extend), its TTL and context
// drawn with extendDrawn.
func (p *simProc) extend(ctx context.Context, lk *Lock) error {
	if !p.cfg.extendDrawn {
		return lk.Extend(ctx)
	}
	var opts []LockOption
	if p.rng.IntN(2) == 0 {
		ttl := lk.ttl/2 + p.draw(extendDrawnMax*lk.ttl-lk.ttl/2)
		opts = append(opts, WithTTL(max(ttl.Truncate(time.Millisecond), time.Millisecond)))
	}
	if p.rng.IntN(2) == 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		p.afterFunc(p.draw(2*p.l.opts.MasterTimeout), cancel)
	}
	return lk.Extend(ctx, opts...)
}

// release ends a section: the holder hands its lock over (handOver) or
// exits and unlocks it; then it thinks.
func (p *simProc) release(c *simCaller, lk *Lock, calls []uint64, lineage uint64) {
	if len(calls) == 1 && p.handOver(lk, calls[0], lineage) {
		c.pause(p.draw(p.cfg.think))
		return
	}
	for _, call := range calls {
		p.record(world.Note{Kind: world.Exit, Call: call})
	}
	p.checkPast(lk, lk.Deadline(), "at its exit")
	_ = lk.Unlock(context.Background())
	p.checkReleased(lk)
	c.pause(p.draw(p.cfg.think))
}

// closer is the life of a process's closer (simConfig.shut): at at, it
// stops the process's calls and shuts its Locker down (Shutdown, or
// Close), while its callers are in whatever state they are: waiting,
// in a round, holding, keeping, in Do. Before Shutdown the process stops
// the work of every section it has open (Exit): Shutdown releases their
// locks. Once it returned, every lock the process held then is over
// (Valid false, its Context ended, Keep failing); the world checks that no
// call is running and that nothing more is sent (world.Closings).
func (p *simProc) closer(c *simCaller, at time.Duration, shutdown bool) {
	c.pause(at)
	if p.stopping {
		return // the world's Stop came first: the process closes as usual
	}
	p.stopping, p.closing = true, true
	var held []*Lock
	var err error
	if shutdown {
		calls := slices.Sorted(maps.Keys(p.held))
		for _, call := range calls {
			lk := p.held[call]
			held = append(held, lk)
			// Its deadline as it stands (a keeper may have moved it),
			// as its holder would note it on waking.
			p.record(world.Note{Kind: world.Extended, Call: call, Deadline: p.until(lk)})
			p.record(world.Note{Kind: world.Exit, Call: call})
		}
		ctx, cancel := context.WithCancel(context.Background())
		if p.rng.IntN(3) == 0 { // a Shutdown whose ctx ends before the releases do
			defer p.afterFunc(p.draw(p.l.opts.MasterTimeout), cancel).Stop()
		}
		p.shared.count[cShutdown]++
		err = p.l.Shutdown(ctx)
		cancel()
	} else {
		p.shared.count[cClose]++
		err = p.l.Close()
	}
	p.closed = true
	n := world.Note{Kind: world.Closed}
	if shutdown {
		n.Limit = 1
		if err == nil {
			n.Fence = 1
		}
	}
	p.record(n)
	for _, lk := range held {
		if lk.Valid() || !ended(lk.Context()) || lk.Keep() == nil {
			p.violates("closing", fmt.Sprintf("a lock held when Shutdown began is held after it returned (token %s)", lk.token))
		}
	}
}

// semaphore is the process's Semaphore for res.
func (p *simProc) semaphore(res string) (*Semaphore, error) {
	if sem := p.sems[res]; sem != nil {
		return sem, nil
	}
	sem, err := p.l.Semaphore(res, p.cfg.permits)
	if err != nil {
		return nil, err
	}
	p.sems[res] = sem
	return sem, nil
}

// election is c's Election for res (each caller campaigns on its own).
func (p *simProc) election(c *simCaller, res string) (*Election, error) {
	if p.elects[c] == nil {
		p.elects[c] = map[string]*Election{}
	}
	if e := p.elects[c][res]; e != nil {
		return e, nil
	}
	e, err := p.l.Election(res)
	if err != nil {
		return nil, err
	}
	p.elects[c][res] = e
	return e, nil
}
