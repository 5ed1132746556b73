package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
)

// drainBound is how long a cell waits, after its time is up and every
// master has been resumed, for workers to finish the call they are in.
// go-redis's defaults bound a call to a resumed master well below this
// (ReadTimeout 3 s, 3 retries); a worker still stuck after it means a
// master did not come back, and the run stops with an error.
const drainBound = 20 * time.Second

// recorder is one worker's samples; merged after the workers are joined,
// so the hot path takes no lock.
type recorder struct {
	acquire  []time.Duration
	handoff  []time.Duration
	validity []validitySample
	done     []time.Duration // completion offsets from the cell's start
	failures map[string]int64
	example  map[string]string // the first error of each kind, for the notes
	// retaken counts acquisitions of the shared resource right after this
	// worker's own release (no other worker held it in between).
	retaken int64
}

// sharedMarks are what the workers on one shared resource note for each
// other: the latest Unlock call and the latest holder.
type sharedMarks struct {
	lastUnlock atomic.Int64 // offset from the cell's start
	lastHolder atomic.Int64 // worker index + 1
}

func (r *recorder) fail(kind string, err error) {
	if r.failures == nil {
		r.failures, r.example = map[string]int64{}, map[string]string{}
	}
	if r.failures[kind] == 0 {
		r.example[kind] = err.Error()
	}
	r.failures[kind]++
}

// cellEnv is what a cell needs besides its scenario and implementation.
type cellEnv struct {
	ms       *masters
	duration time.Duration
	ttl      time.Duration
	run      string // run id, part of every key
	index    int    // cell number, part of every key
	lockers  int    // instances of the implementation (-lockers; 0 means 1)
	progress *progress
	tel      *benchTelemetry
	etcd     *etcdServers // the etcd cluster, when -impls names etcd (etcd.go)
}

// runCell measures one implementation in one scenario with c.workers
// workers: it opens the implementation, runs the workers for the duration
// while stopping and resuming masters at phase boundaries, drains, closes,
// and deletes the cell's keys.
func runCell(ctx context.Context, c cell, env cellEnv) (Result, error) {
	ims, err := openImpls(c, env)
	if err != nil {
		return Result{}, err
	}
	r := &cellRun{c: c, env: env, ims: ims, base: fmt.Sprintf("%s/c%d", env.run, env.index), external: c.impl.openIn != nil}
	r.warmUp(ctx)
	r.startStats(ctx)

	r.start = time.Now()
	runCtx, cancel := context.WithDeadline(ctx, r.start.Add(env.duration))
	defer cancel()
	faultErr, drainErr := r.runWorkers(runCtx)
	if drainErr != nil {
		return Result{}, drainErr // the stuck goroutines end when the process does
	}
	var implNotes []string
	if n, ok := ims[0].(noter); ok {
		implNotes = n.notes() // before closing: it may ask the servers
	}
	var closeErrs []error
	for _, im := range ims {
		closeErrs = append(closeErrs, im.close())
	}
	closeErr := errors.Join(closeErrs...)
	if faultErr != nil {
		return Result{}, fmt.Errorf("%s: fault: %w", c.label(), faultErr)
	}
	r.stopStats(ctx)
	cleanCtx, cleanCancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cleanCancel()
	delErr := env.ms.deleteKeys(cleanCtx, keyPrefix+"{"+r.base+"/*")

	res := r.result()
	res.Notes = append(res.Notes, implNotes...)
	res.Notes = append(res.Notes, r.statNotes...)
	for _, e := range []error{closeErr, delErr} {
		if e != nil {
			res.Notes = append(res.Notes, e.Error())
		}
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	return res, nil
}

// cellRun is one cell while it runs: its implementation's instances, the
// workers' samples, and what the masters did around it.
type cellRun struct {
	c        cell
	env      cellEnv
	ims      []impl // -lockers instances of the implementation
	base     string // the cell's part of every key
	start    time.Time
	phases   []phase
	recs     []*recorder // one per worker, in groups of c.workers per instance
	external bool        // on servers of its own (openIn: etcd), not the masters

	// What the masters do, read through the admin clients (none when
	// external): see startStats.
	rtt        pingSamples
	loaded     *loadedPings
	cpu        *cpuMeter
	ext        *externalCPU
	cmdsBefore []commandCounts
	cmdsErr    error
	cmds       *commandWindow
	cpuUsed    cpuWindow
	cpuErr     error
	statNotes  []string
}

// openImpls opens -lockers instances of the cell's implementation, each
// with its own clients and connections, as that many processes would
// have; on error it closes those it opened.
func openImpls(c cell, env cellEnv) ([]impl, error) {
	ims := make([]impl, max(env.lockers, 1))
	for i := range ims {
		var im impl
		var err error
		if c.impl.openIn != nil {
			im, err = c.impl.openIn(c, env)
		} else {
			im, err = c.impl.open(env.ms.opts, env.ttl, env.tel)
		}
		if err != nil {
			for _, o := range ims[:i] {
				_ = o.close()
			}
			return nil, fmt.Errorf("%s: opening: %w", c.label(), err)
		}
		ims[i] = im
	}
	return ims, nil
}

// warmUp warms every instance up (warmUp), concurrently.
func (r *cellRun) warmUp(ctx context.Context) {
	var warm sync.WaitGroup
	for i, im := range r.ims {
		warm.Go(func() { warmUp(ctx, im, fmt.Sprintf("%s/l%d", r.base, i), r.c.workers) })
	}
	warm.Wait()
}

// startStats starts reading what the masters do: commands executed from
// just before the workers start to after the implementation is closed (so
// its last calls are in), before the keys are deleted; the PING round trip
// just outside that window, on both sides. An implementation on servers of
// its own (openIn: etcd) leaves the masters alone: its cell reads none of
// their stats, and its server CPU is its servers' (serverCPU).
func (r *cellRun) startStats(ctx context.Context) {
	env := r.env
	if r.external {
		r.statNotes = append(r.statNotes, "not on the Redis masters: no command counts or PING round trips; server CPU is the etcd members' (/proc)")
		r.ext = startExternalCPU(env.etcd)
		return
	}
	r.rtt = make(pingSamples, len(env.ms.admin))
	if err := r.rtt.measure(ctx, env.ms.admin); err != nil {
		r.statNotes = append(r.statNotes, "PING round trip before the cell not measured: "+err.Error())
	}
	var err error
	r.loaded, err = openLoadedPings(ctx, env.ms.admin)
	if err != nil {
		r.statNotes = append(r.statNotes, "PING round trip during the cell not measured: "+err.Error())
	}
	// The CPU readings are outside the commands' window (their INFO
	// calls are not counted) and around it.
	r.cpu = startCPU(ctx, env.ms)
	r.cmdsBefore, r.cmdsErr = readCommandstats(ctx, env.ms.admin)
}

// runWorkers runs the workers and the scenario's faults until runCtx ends
// and waits for them: faultErr is a fault that failed, drainErr workers
// still blocked drainBound after the end.
func (r *cellRun) runWorkers(runCtx context.Context) (faultErr, drainErr error) {
	c, env, start := r.c, r.env, r.start
	if r.loaded != nil {
		r.loaded.run(runCtx)
	}
	var ops atomic.Int64
	stopProgress := env.progress.cell(env.index, fmt.Sprintf("%s × %s × %dw", c.sc.name, c.impl.name, c.workers), start, env.duration, &ops)

	// Faults and workers are one errgroup: one goroutine walks the phases
	// and stops/resumes masters (resuming everything before it returns);
	// a fault that fails ends the cell at once, since what the workers
	// would measure is no longer the scenario.
	r.phases = c.sc.phaseList()
	g, gctx := errgroup.WithContext(runCtx)
	g.Go(func() error {
		return errors.Join(drivePhases(gctx, env.ms, c.sc.fault(env.ms), r.phases, start, env.duration)...)
	})

	var marks *sharedMarks
	if c.sc.shared {
		marks = &sharedMarks{}
	}
	r.recs = make([]*recorder, c.workers*len(r.ims))
	for w := range r.recs {
		rec := &recorder{}
		r.recs[w] = rec
		resource := fmt.Sprintf("%s/w%d", r.base, w)
		if c.sc.shared {
			resource = r.base + "/shared"
		}
		im := r.ims[w/c.workers]
		g.Go(func() error { work(gctx, im, resource, worker{w, start, rec, marks}, &ops); return nil })
	}

	<-gctx.Done()
	if r.loaded != nil {
		r.loaded.wait()
	}
	wdone := make(chan struct{})
	var waitErr error // read only once wdone is closed
	go func() { waitErr = g.Wait(); close(wdone) }()
	select {
	case <-wdone:
		faultErr = waitErr
	case <-time.After(drainBound):
		drainErr = fmt.Errorf("%s: workers still blocked %v after the end with every master resumed", c.label(), drainBound)
	}
	stopProgress()
	return faultErr, drainErr
}

// stopStats ends what startStats started, once the implementation is
// closed: the commands' window, the CPU used and the PING round trip
// after the cell; what it could not read goes in the notes.
func (r *cellRun) stopStats(ctx context.Context) {
	admin := r.env.ms.admin
	if r.external {
		r.cmdsErr = errNoCommandstats
	}
	if r.cmdsErr == nil {
		var after []commandCounts
		if after, r.cmdsErr = readCommandstats(ctx, admin); r.cmdsErr == nil {
			var w commandWindow
			if w, r.cmdsErr = diffCommandstats(r.cmdsBefore, after); r.cmdsErr == nil {
				if r.loaded != nil {
					r.loaded.discount(&w)
				}
				r.cmds = &w
			}
		}
	}
	if r.cmdsErr != nil && !errors.Is(r.cmdsErr, errNoCommandstats) {
		r.statNotes = append(r.statNotes, "commands not counted: "+r.cmdsErr.Error())
	}
	if r.external {
		r.cpuUsed, r.cpuErr = r.ext.stop()
	} else {
		r.cpuUsed, r.cpuErr = r.cpu.stop(ctx, admin)
	}
	if r.cpuErr != nil && !errors.Is(r.cpuErr, errNoCPUInfo) {
		r.statNotes = append(r.statNotes, "CPU not measured: "+r.cpuErr.Error())
	}
	if !r.external {
		if err := r.rtt.measure(ctx, admin); err != nil {
			r.statNotes = append(r.statNotes, "PING round trip after the cell not measured: "+err.Error())
		}
	}
}

// result is the cell's Result: the workers' samples (summarise), the
// fairness across -lockers instances, and the masters' stats.
func (r *cellRun) result() Result {
	c := r.c
	res := summarise(c, r.env, r.phases, r.recs)
	if len(r.ims) > 1 {
		res.Lockers = len(r.ims)
		if c.sc.shared {
			res.Fairness = fairness(r.recs, c.workers)
		}
	}
	if c.sc.shared {
		res.WorkerFairness = fairness(r.recs, 1)
		res.RetakenShare = retakenShare(r.recs)
	}
	if !r.external {
		res.setMasterStats(r.rtt.medians(), r.cmds)
	}
	if r.cpuErr == nil {
		res.setCPU(r.cpuUsed)
		if r.external || r.env.ms.cpu != nil {
			res.ServerCommandUsPerAcquisition = nil // Redis's commandstats only
		}
	}
	if r.loaded != nil {
		res.PingRTTLoadedMs = r.loaded.median()
		r.loaded.close()
	}
	return res
}

// noter is an implementation with something to say in its cell's notes
// (etcd: the lease TTL it ran with).
type noter interface{ notes() []string }

// warmUpBound caps the warm-up; a master that does not answer makes it
// end early rather than hang.
const warmUpBound = 5 * time.Second

// warmUp makes one Lock+Unlock per worker, concurrently and unrecorded, so
// every implementation starts measuring with its connections dialled (the
// first phase of the stall scenario is the healthy baseline).
func warmUp(ctx context.Context, im impl, base string, workers int) {
	ctx, cancel := context.WithTimeout(ctx, warmUpBound)
	defer cancel()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			if h, err := im.lock(ctx, fmt.Sprintf("%s/warm%d", base, w)); err == nil {
				_ = h.unlock(ctx)
			}
		})
	}
	wg.Wait()
}

// worker is one worker's identity and where it records: its index, the
// cell's start, its samples, and the shared resource's marks (nil when
// each worker has its own resource).
type worker struct {
	id    int
	start time.Time
	rec   *recorder
	marks *sharedMarks
}

// work is one worker: Lock, then Unlock, until the cell's time is up.
func work(ctx context.Context, im impl, resource string, wk worker, ops *atomic.Int64) {
	start, rec := wk.start, wk.rec
	// Unlock must not be cut short by the end of the cell: a lock left
	// behind would only expire.
	unlockCtx := context.WithoutCancel(ctx)
	for ctx.Err() == nil {
		t0 := time.Now()
		h, err := im.lock(ctx, resource)
		t1 := time.Now()
		if err != nil {
			if ctx.Err() == nil {
				rec.fail(failureKind(err), err)
			}
			continue
		}
		rec.acquire = append(rec.acquire, t1.Sub(t0))
		rec.validity = append(rec.validity, h.validity())
		if m := wk.marks; m != nil {
			// Each acquisition of the one resource follows exactly one
			// Unlock call (the previous holder's), made before it.
			if u := m.lastUnlock.Load(); u > 0 {
				rec.handoff = append(rec.handoff, t1.Sub(start)-time.Duration(u))
			}
			if m.lastHolder.Swap(int64(wk.id+1)) == int64(wk.id+1) {
				rec.retaken++
			}
			m.lastUnlock.Store(int64(time.Since(start)))
		}
		if err := h.unlock(unlockCtx); err != nil {
			rec.fail("unlock_"+failureKind(err), err)
			continue
		}
		rec.done = append(rec.done, time.Since(start))
		ops.Add(1)
	}
}

func frac(d time.Duration, f float64) time.Duration { return time.Duration(float64(d) * f) }

// summarise turns the workers' samples into a Result.
func summarise(c cell, env cellEnv, phases []phase, recs []*recorder) Result {
	var all recorder
	all.failures, all.example = map[string]int64{}, map[string]string{}
	for _, r := range recs {
		for k, e := range r.example {
			if _, ok := all.example[k]; !ok {
				all.example[k] = e
			}
		}
		all.acquire = append(all.acquire, r.acquire...)
		all.handoff = append(all.handoff, r.handoff...)
		all.validity = append(all.validity, r.validity...)
		all.done = append(all.done, r.done...)
		for k, v := range r.failures {
			all.failures[k] += v
		}
	}
	res := Result{
		Scenario:        c.sc.name,
		Impl:            c.impl.name,
		Workers:         c.workers,
		DurationSeconds: env.duration.Seconds(),
		Failures:        all.failures,
		Notes:           []string{},
	}
	for _, k := range slices.Sorted(maps.Keys(all.example)) {
		res.Notes = append(res.Notes, fmt.Sprintf("first %s: %s", k, all.example[k]))
	}
	res.acquireSorted = durationsMs(all.acquire)
	res.AcquireMs = distOf(res.acquireSorted)
	if c.sc.shared {
		d := distOf(durationsMs(all.handoff))
		res.HandoffMs = &d
	}
	for _, p := range phases {
		lo, hi := frac(env.duration, p.from), frac(env.duration, p.to)
		var n int64
		for _, t := range all.done {
			if t >= lo && (t < hi || (p.to >= 1 && t <= env.duration)) {
				n++
			}
		}
		res.Phases = append(res.Phases, PhaseResult{Name: p.name, Seconds: (hi - lo).Seconds(), Ops: n, OpsPerSec: perSecond(n, hi-lo)})
	}
	for _, t := range all.done {
		if t <= env.duration {
			res.Ops++
		} else {
			res.LateOps++
		}
	}
	res.OpsPerSec = perSecond(res.Ops, env.duration)
	if c.impl.source == sourceNone {
		all.validity = nil // the implementation says nothing of it
	}
	res.Validity, res.validitySorted = validityOf(c.impl.source, env.ttl, all.validity)
	return res
}

// validityOf summarises validity samples as fractions of ttl.
func validityOf(source string, ttl time.Duration, vs []validitySample) (Validity, []float64) {
	v := Validity{Source: source, Count: len(vs)}
	if len(vs) == 0 {
		return v, nil
	}
	fr := make([]float64, len(vs))
	el := make([]float64, len(vs))
	dr := make([]float64, len(vs))
	mg := make([]float64, len(vs))
	for i, s := range vs {
		fr[i] = float64(s.left) / float64(ttl)
		el[i], dr[i], mg[i] = ms(s.elapsed), ms(s.drift), ms(s.margin)
	}
	for _, s := range [][]float64{fr, el, dr, mg} {
		slices.Sort(s)
	}
	v.Min = fr[0]
	v.P1 = percentile(fr, 1)
	v.P50 = percentile(fr, 50)
	v.ElapsedMsP50 = percentile(el, 50)
	v.DriftMs = percentile(dr, 50)
	v.SafetyMarginMs = percentile(mg, 50)
	return v, fr
}

// fairness is the fewest acquisitions made through one Locker ÷ the most,
// where workers are recs in groups of perLocker; nil when none made any.
func fairness(recs []*recorder, perLocker int) *float64 {
	lo, hi := -1, 0
	for i := 0; i < len(recs); i += perLocker {
		n := 0
		for _, r := range recs[i : i+perLocker] {
			n += len(r.acquire)
		}
		if lo < 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	return ratio(float64(lo), float64(hi))
}

// retakenShare is the share of the shared resource's acquisitions made by
// the worker that had just released it; nil when there were none.
func retakenShare(recs []*recorder) *float64 {
	var n, retaken int64
	for _, r := range recs {
		n += int64(len(r.acquire))
		retaken += r.retaken
	}
	return ratio(float64(retaken), float64(n))
}
