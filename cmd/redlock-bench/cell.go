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
	// -lockers: that many instances, each with its own clients and
	// connections, as that many processes would have.
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
			return Result{}, fmt.Errorf("%s: opening: %w", c.label(), err)
		}
		ims[i] = im
	}
	base := fmt.Sprintf("%s/c%d", env.run, env.index)
	var warm sync.WaitGroup
	for i, im := range ims {
		warm.Go(func() { warmUp(ctx, im, fmt.Sprintf("%s/l%d", base, i), c.workers) })
	}
	warm.Wait()

	// What the masters do is read through the admin clients: commands
	// executed from just before the workers start to after the
	// implementation is closed (so its last calls are in), before the keys
	// are deleted; the PING round trip just outside that window, on both
	// sides.
	//
	// An implementation on servers of its own (openIn: etcd) leaves the
	// masters alone: its cell reads none of their stats, and its server
	// CPU is its servers' (serverCPU).
	var statNotes []string
	external := c.impl.openIn != nil
	var (
		rtt        pingSamples
		loaded     *loadedPings
		cpu        *cpuMeter
		ext        *externalCPU
		cmdsBefore []commandCounts
		cmdsErr    error
	)
	if external {
		statNotes = append(statNotes, "not on the Redis masters: no command counts or PING round trips; server CPU is the etcd members' (/proc)")
		ext = startExternalCPU(env.etcd)
	} else {
		rtt = make(pingSamples, len(env.ms.admin))
		if err := rtt.measure(ctx, env.ms.admin); err != nil {
			statNotes = append(statNotes, "PING round trip before the cell not measured: "+err.Error())
		}
		var err error
		loaded, err = openLoadedPings(ctx, env.ms.admin)
		if err != nil {
			statNotes = append(statNotes, "PING round trip during the cell not measured: "+err.Error())
		}
		// The CPU readings are outside the commands' window (their INFO
		// calls are not counted) and around it.
		cpu = startCPU(ctx, env.ms.admin)
		cmdsBefore, cmdsErr = readCommandstats(ctx, env.ms.admin)
	}

	start := time.Now()
	end := start.Add(env.duration)
	runCtx, cancel := context.WithDeadline(ctx, end)
	defer cancel()

	if loaded != nil {
		loaded.run(runCtx)
	}

	var ops atomic.Int64
	stopProgress := env.progress.cell(env.index, fmt.Sprintf("%s × %s × %dw", c.sc.name, c.impl.name, c.workers), start, env.duration, &ops)

	// Faults and workers are one errgroup: one goroutine walks the phases
	// and stops/resumes masters (resuming everything before it returns);
	// a fault that fails ends the cell at once, since what the workers
	// would measure is no longer the scenario.
	phases := c.sc.phaseList()
	g, gctx := errgroup.WithContext(runCtx)
	var faultErrs []error
	g.Go(func() error {
		faultErrs = drivePhases(gctx, env.ms, c.sc.fault(env.ms), phases, start, env.duration)
		return errors.Join(faultErrs...)
	})

	var lastUnlock atomic.Int64 // shared resource: offset of the latest Unlock call
	recs := make([]*recorder, c.workers*len(ims))
	for w := range recs {
		rec := &recorder{}
		recs[w] = rec
		resource := fmt.Sprintf("%s/w%d", base, w)
		if c.sc.shared {
			resource = base + "/shared"
		}
		im := ims[w/c.workers]
		g.Go(func() error { work(gctx, im, resource, c.sc.shared, start, rec, &lastUnlock, &ops); return nil })
	}

	<-gctx.Done()
	if loaded != nil {
		loaded.wait()
	}
	wdone := make(chan struct{})
	var faultErr error
	go func() { faultErr = g.Wait(); close(wdone) }()
	var drainErr error
	select {
	case <-wdone:
	case <-time.After(drainBound):
		drainErr = fmt.Errorf("%s: workers still blocked %v after the end with every master resumed", c.label(), drainBound)
	}
	stopProgress()
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
	var cmds *commandWindow
	if external {
		cmdsErr = errNoCommandstats
	}
	if cmdsErr == nil {
		var after []commandCounts
		if after, cmdsErr = readCommandstats(ctx, env.ms.admin); cmdsErr == nil {
			var w commandWindow
			if w, cmdsErr = diffCommandstats(cmdsBefore, after); cmdsErr == nil {
				if loaded != nil {
					loaded.discount(&w)
				}
				cmds = &w
			}
		}
	}
	if cmdsErr != nil && !errors.Is(cmdsErr, errNoCommandstats) {
		statNotes = append(statNotes, "commands not counted: "+cmdsErr.Error())
	}
	var cpuUsed cpuWindow
	var cpuErr error
	if external {
		cpuUsed, cpuErr = ext.stop()
	} else {
		cpuUsed, cpuErr = cpu.stop(ctx, env.ms.admin)
	}
	if cpuErr != nil && !errors.Is(cpuErr, errNoCPUInfo) {
		statNotes = append(statNotes, "CPU not measured: "+cpuErr.Error())
	}
	if !external {
		if err := rtt.measure(ctx, env.ms.admin); err != nil {
			statNotes = append(statNotes, "PING round trip after the cell not measured: "+err.Error())
		}
	}
	cleanCtx, cleanCancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cleanCancel()
	delErr := env.ms.deleteKeys(cleanCtx, keyPrefix+"{"+base+"/*")

	res := summarise(c, env, phases, recs)
	if len(ims) > 1 {
		res.Lockers = len(ims)
		if c.sc.shared {
			res.Fairness = fairness(recs, c.workers)
		}
	}
	if !external {
		res.setMasterStats(rtt.medians(), cmds)
	}
	if cpuErr == nil {
		res.setCPU(cpuUsed)
		if external {
			res.ServerCommandUsPerAcquisition = nil // Redis's commandstats only
		}
	}
	if loaded != nil {
		res.PingRTTLoadedMs = loaded.median()
		loaded.close()
	}
	res.Notes = append(res.Notes, implNotes...)
	res.Notes = append(res.Notes, statNotes...)
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

// work is one worker: Lock, then Unlock, until the cell's time is up.
func work(ctx context.Context, im impl, resource string, shared bool, start time.Time, rec *recorder, lastUnlock, ops *atomic.Int64) {
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
		if shared {
			// Each acquisition of the one resource follows exactly one
			// Unlock call (the previous holder's), made before it.
			if u := lastUnlock.Load(); u > 0 {
				rec.handoff = append(rec.handoff, t1.Sub(start)-time.Duration(u))
			}
			lastUnlock.Store(int64(time.Since(start)))
		}
		if err := h.unlock(unlockCtx); err != nil {
			rec.fail("unlock_"+failureKind(err), err)
			continue
		}
		rec.done = append(rec.done, time.Since(start))
		ops.Add(1)
	}
}

// drivePhases stops and resumes masters at each phase's start, then waits
// for the end of the cell and resumes every master it stopped.
func drivePhases(ctx context.Context, ms *masters, f fault, phases []phase, start time.Time, d time.Duration) []error {
	var errs []error
	paused := map[int]bool{}
	defer func() {
		for _, i := range slices.Sorted(maps.Keys(paused)) {
			if err := f.resume(i); err != nil {
				errs = append(errs, fmt.Errorf("resuming master %d: %w", i, err))
			}
		}
	}()
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for pi, ph := range phases {
		if ph.from > 0 {
			timer.Reset(time.Until(start.Add(frac(d, ph.from))))
			select {
			case <-ctx.Done():
				return errs
			case <-timer.C:
			}
		}
		want := map[int]bool{}
		for _, i := range ph.paused {
			if i < ms.info.N {
				want[i] = true
			}
		}
		for _, i := range slices.Sorted(maps.Keys(paused)) {
			if !want[i] {
				delete(paused, i)
				if err := f.resume(i); err != nil {
					return append(errs, fmt.Errorf("resuming master %d: %w", i, err))
				}
			}
		}
		for _, i := range slices.Sorted(maps.Keys(want)) {
			if paused[i] {
				continue
			}
			// How long it stays stopped: through every following phase
			// that keeps it stopped.
			until := ph.to
			for _, next := range phases[pi+1:] {
				if !slices.Contains(next.paused, i) {
					break
				}
				until = next.to
			}
			if err := f.stop(ctx, i, frac(d, until-ph.from)); err != nil {
				return append(errs, fmt.Errorf("stopping master %d: %w", i, err))
			}
			paused[i] = true
		}
	}
	<-ctx.Done()
	return errs
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
