package chaos

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/internal/faultproxy"
	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/labdocker"
	"github.com/quorumlab/redlock/redlock"
	"github.com/quorumlab/redlock/validity"
)

// The election scenario: campaigners (in-process, and subprocesses that
// the schedule freezes, kills and cuts off while they lead) loop
// Campaign → lead → Resign in one election (redlock.Election), writing
// through redlock.WriteFenced with their term into the resource Redis,
// while observers record every leader Observe delivers.
//
// A leader-section is a leadership as its campaigner saw it: enter after
// Campaign returned and the lock was Valid; then steps, each one checking
// lk.Err() == nil before a fenced write; exit before Resign (or before
// the Locker is closed to let the leadership lapse). Exit is clipped at
// the lock's deadline as read at the exit (CLOCK_MONOTONIC, from
// lk.Deadline()): Redlock promises one leader before its deadline at any
// instant, not that a frozen process stops acting, so a leader frozen past
// its deadline ends there (Section.Late) and what it does on waking is the
// fenced resource's to reject. A killed leader's section ends at the
// deadline it reported at its last step, or when the parent reaped it if
// that came first; a write it was killed during has an unknown outcome
// (Write.Unknown).
//
// CheckElection then checks: (a) no two leader-sections overlap in real
// time (Check: the sweep and porcupine's mutex model); (b) terms strictly
// increase from leader to leader in order of entry (the fenced-mutex
// model), and no two Campaigns got one term; (c) each observer's terms
// never go back, it is never delivered the same leader twice in a row,
// and every delivery is a value a campaigner set out to publish under
// that term, delivered after it set out; (d) the fenced resource accepted
// no stale write (Check's write-log checks).

// deadlineMono converts lk's deadline to the monoNow clock. Go's
// monotonic readings are CLOCK_MONOTONIC on Linux too; reading monoNow
// after time.Until errs late by the gap between them, so a clipped section
// is, if anything, longer than the truth.
func deadlineMono(lk *redlock.Lock) int64 {
	u := time.Until(lk.Deadline())
	return monoNow() + int64(u)
}

// runCampaigner loops Campaign → lead → Resign until ctx ends. open makes
// its Locker: a new one after each leadership it lets lapse (it closes the
// Locker, whose keeper then stops, and waits for Done).
func runCampaigner(ctx context.Context, open func() (*redlock.Locker, error), db redis.Scripter, cfg ClientConfig, out sink) error {
	r := rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.ID)))
	var l *redlock.Locker
	var e *redlock.Election
	start := func() error {
		var err error
		if l, err = open(); err != nil {
			return err
		}
		if e, err = l.Election(cfg.Election); err != nil {
			l.Close()
			return err
		}
		return nil
	}
	if err := start(); err != nil {
		return err
	}
	defer func() { l.Close() }()
	var seq int64
	for n := 0; ctx.Err() == nil; n++ {
		value := fmt.Sprintf("c%d-%d", cfg.ID, n)
		t0, begin := time.Now(), monoNow()
		out.publication(Publication{Client: cfg.ID, Value: value, At: begin})
		actx, cancel := context.WithTimeout(ctx, cfg.AcquireTimeout)
		lk, err := e.Campaign(actx, value)
		cancel()
		lat := time.Since(t0)
		if ctx.Err() != nil {
			// The run ended during Campaign: neither a success nor a failure.
			if err == nil {
				resign(e)
			}
			return nil
		}
		if err != nil {
			out.acquire(Acquire{Client: cfg.ID, Latency: lat, Start: begin, Err: err.Error(), Lost: errors.Is(err, redlock.ErrLost)})
			continue
		}
		out.acquire(Acquire{Client: cfg.ID, OK: true, Latency: lat, Start: begin})
		seq++
		out.leadership(Leadership{Client: cfg.ID, Seq: seq, Term: lk.Fence(), Value: value, At: monoNow()})
		lapse := cfg.LapseEvery > 0 && r.IntN(cfg.LapseEvery) == 0
		if lk.Valid() {
			lead(ctx, r, e, lk, db, cfg, seq, value, lapse, out)
		}
		if lapse {
			// Let it lapse: nothing extends it, nothing releases it.
			l.Close()
			<-lk.Done()
			if err := start(); err != nil {
				return err
			}
			continue
		}
		resign(e)
	}
	return nil
}

func resign(e *redlock.Election) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = e.Resign(ctx)
}

// lead is one leader-section (see the top of this file).
func lead(ctx context.Context, r *rand.Rand, e *redlock.Election, lk *redlock.Lock, db redis.Scripter, cfg ClientConfig, seq int64, value string, lapse bool, out sink) {
	term, token := lk.Fence(), lk.Token()
	enter := monoNow()
	if deadlineMono(lk) <= enter {
		return // lapsed before it entered (a pause right after Valid)
	}
	steps := 1 + r.IntN(max(cfg.Steps, 1))
	for k := range steps {
		if ctx.Err() != nil || lk.Err() != nil {
			break
		}
		out.step(Step{Client: cfg.ID, Seq: seq, Term: term, Owner: token, Enter: enter, At: monoNow(), Dead: deadlineMono(lk)})
		if k == 0 {
			out.entered(cfg.ID) // a leader fault lands here: before the first write
		}
		fencedWrite(db, cfg.ID, seq, cfg.Election, term, token, out)
		if k == 0 && cfg.ProclaimEvery > 0 && r.IntN(cfg.ProclaimEvery) == 0 {
			v := value + "-p"
			out.publication(Publication{Client: cfg.ID, Value: v, Term: term, At: monoNow()})
			_ = e.Proclaim(ctx, v)
		}
		hold := cfg.HoldMin
		if cfg.HoldMax > cfg.HoldMin {
			hold += time.Duration(r.Int64N(int64(cfg.HoldMax - cfg.HoldMin)))
		}
		sleepCtx(ctx, hold)
	}
	exit := monoNow()
	dl := deadlineMono(lk)
	out.section(Section{Client: cfg.ID, Seq: seq, Resource: cfg.Election, Enter: enter, Exit: min(exit, dl), Fence: term, Late: exit > dl, Lapsed: lapse})
}

// runObserver records every leader Observe delivers until ctx ends.
func runObserver(ctx context.Context, l *redlock.Locker, cfg ClientConfig, out sink) error {
	e, err := l.Election(cfg.Election)
	if err != nil {
		return err
	}
	for ld := range e.Observe(ctx) {
		out.delivery(Delivery{Observer: cfg.ID, Term: ld.Term, Value: ld.Value, At: monoNow()})
	}
	return nil
}

// ElectionWorkload is the election scenario: campaigners and observers in
// one election on N masters while a seeded schedule injects faults on
// masters (Plan.Kinds as the mutex rows) and on leaders (FreezeLeader,
// KillLeader, CutLeader on the Subprocess campaigners).
type ElectionWorkload struct {
	Name   string
	Inside bool
	Plan   Plan
	// Campaigners in the test process and in subprocesses; observers
	// likewise.
	InProcess, Subprocess       int
	Observers, SubprocObservers int
	HoldMin, HoldMax            time.Duration
	Steps                       int
	ProclaimEvery, LapseEvery   int
	// The run lasts at least Duration and goes on until MinTerms
	// leaderships are recorded, up to MaxDuration.
	Duration, MaxDuration time.Duration
	MinTerms              int
}

// electionName is the scenario's election; its resource key is
// "resource:" + electionName.
const electionName = "leader"

func (w ElectionWorkload) options() *redlock.Options {
	return &redlock.Options{TTL: w.Plan.TTL, MasterTimeout: w.Plan.MasterTimeout, Fencing: true}
}

func (w ElectionWorkload) clientConfig(id int, role string, seed uint64) ClientConfig {
	return ClientConfig{
		ID: id, Role: role, Election: electionName, HoldMin: w.HoldMin, HoldMax: w.HoldMax,
		AcquireTimeout: 4 * w.Plan.TTL, Seed: seed, Steps: w.Steps,
		ProclaimEvery: w.ProclaimEvery, LapseEvery: w.LapseEvery,
	}
}

// electionRun is one RunElection: what the leader faults act on.
type electionRun struct {
	tb      testing.TB
	h       *History
	w       ElectionWorkload
	seed    uint64
	masters []string
	db      string
	// Per subprocess campaigner slot: its client (replaced when killed)
	// and the proxies it reaches the masters through (cut for CutLeader).
	subs                 []*subClient
	proxies              [][]*faultproxy.Proxy
	nextID               int
	kills, freezes, cuts atomic.Int64
	eps                  episodes

	cancel  context.CancelFunc // ends the run's context
	wg      sync.WaitGroup     // the in-process campaigners and observers
	lockers []*redlock.Locker  // the in-process observers'
	obs     []*subClient       // the subprocess observers
}

// RunElection runs w on fresh masters with the fault schedule drawn from
// seed and returns the checked result. It leaves no master, proxy,
// subprocess or goroutine running.
func RunElection(tb testing.TB, w ElectionWorkload, seed uint64, backend string) Result {
	tb.Helper()
	sched := NewSchedule(ScheduleRand(seed, w.Name), w.Plan)
	var c *lab.Masters
	if backend == "docker" {
		c = labdocker.ForTest(tb, w.Plan.Masters, nil)
	} else {
		c = lab.ForTest(tb, w.Plan.Masters, &lab.Options{Proxy: true})
	}
	dbm := lab.ForTest(tb, 1, nil)
	db := dbm.Client(0)
	h := &History{}
	er := &electionRun{tb: tb, h: h, w: w, seed: seed, masters: c.Addrs(), db: db.Options().Addr, nextID: 1000}

	ctx, cancel := context.WithCancel(tb.Context())
	defer cancel()
	er.cancel = cancel
	started := time.Now()

	defer er.closeLockers()
	er.startInProcess(ctx, c, db)
	er.startSubprocesses(c)

	reach := startProber(ctx, c.Addrs(), w.Plan.MasterTimeout)
	heapStart, gorStart := footprint()
	var applied atomic.Int64
	var faults sync.WaitGroup
	faults.Go(func() { er.runFaults(ctx, c, sched, started, &applied) })
	runFor(tb.Context(), started, w.Duration, w.MaxDuration, func() bool { return h.Terms() >= w.MinTerms })
	heapEnd, gorEnd := footprint()
	cancel()
	reach.close()
	faults.Wait() // every fault undone
	c.ResumeAll()
	er.wg.Wait()
	for _, sc := range append(er.subs, er.obs...) {
		if err := sc.stop(); err != nil {
			tb.Errorf("chaos: subprocess client %d: %v", sc.id, err)
		}
	}
	er.closeLockers()
	wall := time.Since(started)

	r := Result{Scenario: w.Name, Faults: describeKinds(w.Plan.Kinds), Inside: w.Inside, Seed: seed, Wall: wall, FaultsRun: int(applied.Load()),
		HeapStart: heapStart, HeapEnd: heapEnd, GoroutineStart: gorStart, GoroutineEnd: gorEnd}
	if backend != "process" {
		r.Backend = backend
	}
	er.check(&r, reach)
	return r
}

// startInProcess starts the in-process campaigners and observers, on
// clients of c's masters, writing to the resource Redis db.
func (er *electionRun) startInProcess(ctx context.Context, c *lab.Masters, db redis.Scripter) {
	tb, w, h := er.tb, er.w, er.h
	for i := range w.InProcess {
		cfg := w.clientConfig(i, "campaign", er.seed)
		clients := c.Clients()
		ping(clients)
		er.wg.Go(func() {
			open := func() (*redlock.Locker, error) { return redlock.New(clients, w.options()) }
			if err := runCampaigner(ctx, open, db, cfg, historySink{h}); err != nil {
				tb.Errorf("chaos: campaigner %d: %v", cfg.ID, err)
			}
		})
	}
	for k := range w.Observers {
		cfg := w.clientConfig(100+k, "observe", er.seed)
		l := newLocker(tb, c.Clients(), w.options())
		er.lockers = append(er.lockers, l)
		er.wg.Go(func() {
			if err := runObserver(ctx, l, cfg, historySink{h}); err != nil {
				tb.Errorf("chaos: observer %d: %v", cfg.ID, err)
			}
		})
	}
}

// closeLockers closes the in-process observers' Lockers, once.
func (er *electionRun) closeLockers() {
	for _, l := range er.lockers {
		_ = l.Close()
	}
	er.lockers = nil
}

// fatalf ends the run (its context, then the in-process goroutines) and
// fails the test at once.
func (er *electionRun) fatalf(format string, args ...any) {
	er.cancel()
	er.wg.Wait()
	er.tb.Fatalf(format, args...)
}

// startSubprocesses starts the subprocess campaigners, each behind proxies
// of its own to c's masters, and the subprocess observers.
func (er *electionRun) startSubprocesses(c *lab.Masters) {
	w := er.w
	for k := range w.Subprocess {
		var ps []*faultproxy.Proxy
		for _, a := range c.Addrs() {
			p, err := faultproxy.Start(a)
			if err != nil {
				er.fatalf("chaos: proxy for campaigner %d: %v", k, err)
			}
			er.tb.Cleanup(p.Close)
			ps = append(ps, p)
		}
		er.proxies = append(er.proxies, ps)
		sc, err := er.startCampaigner(k, w.InProcess+k)
		if err != nil {
			er.fatalf("chaos: starting subprocess campaigner: %v", err)
		}
		er.subs = append(er.subs, sc)
	}
	for k := range w.SubprocObservers {
		cfg := w.clientConfig(100+w.Observers+k, "observe", er.seed)
		cfg.Masters, cfg.ResourceDB = c.Addrs(), er.db
		cfg.TTL, cfg.MasterTimeout = w.Plan.TTL, w.Plan.MasterTimeout
		cfg.Run = w.MaxDuration + time.Minute
		sc, err := startSubClient(cfg, er.h)
		if err != nil {
			er.fatalf("chaos: starting subprocess observer: %v", err)
		}
		er.tb.Cleanup(sc.kill)
		er.obs = append(er.obs, sc)
	}
}

// runFaults applies the schedule's faults at their times, on c's masters
// or (leader faults) on a subprocess campaigner, recording each as an
// episode and counting those applied; it stops at the first that fails or
// when ctx ends.
func (er *electionRun) runFaults(ctx context.Context, c *lab.Masters, sched []Fault, started time.Time, applied *atomic.Int64) {
	for _, f := range sched {
		if !sleepUntil(ctx, started.Add(f.At)) {
			return
		}
		var err error
		ep := Episode{Fault: f, From: monoNow()}
		if f.Kind.onClient() {
			err = er.applyLeader(ctx, f, &ep.From, &ep.Leader)
		} else {
			err = apply(ctx, c, nil, f)
		}
		ep.To = monoNow()
		er.eps.add(ep)
		if err != nil {
			er.tb.Errorf("chaos: %s: %v", f, err)
			return
		}
		applied.Add(1)
	}
}

// check checks the run's history (CheckElection) into r, with the leader
// faults run, the masters' reachability, and why campaigns failed.
func (er *electionRun) check(r *Result, reach *prober) {
	w, h := er.w, er.h
	v, ev := CheckElection(h)
	r.Verdict = v
	ev.Kills, ev.Freezes, ev.Cuts = int(er.kills.Load()), int(er.freezes.Load()), int(er.cuts.Load())
	r.Election = &ev
	acquires := h.Acquires()
	r.fillAcquires(acquires)
	reach.fill(r, validity.Majority(w.Plan.Masters), acquires)
	ev.FailedCampaigns = explainFailures(h, er.eps.all(), reach, w.Plan.TTL, validity.Majority(w.Plan.Masters))
	for _, fc := range ev.FailedCampaigns {
		switch {
		case fc.Lost:
			ev.LostInPublish++
		case fc.Premise:
			ev.LivenessViolations++
		}
	}
}

// ping dials each client once (a cold client's first call also handshakes
// and could overrun MasterTimeout).
func ping(clients []redis.UniversalClient) {
	for _, cl := range clients {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = cl.Ping(ctx).Err()
		cancel()
	}
}

// startCampaigner starts a subprocess campaigner with id in slot k
// (through the slot's proxies).
func (er *electionRun) startCampaigner(k, id int) (*subClient, error) {
	cfg := er.w.clientConfig(id, "campaign", er.seed)
	for _, p := range er.proxies[k] {
		cfg.Masters = append(cfg.Masters, p.Addr())
	}
	cfg.ResourceDB = er.db
	cfg.TTL, cfg.MasterTimeout = er.w.Plan.TTL, er.w.Plan.MasterTimeout
	cfg.Run = er.w.MaxDuration + time.Minute // a cap; the parent stops it first
	sc, err := startSubClient(cfg, er.h)
	if err != nil {
		return nil, err
	}
	er.tb.Cleanup(sc.kill) // no process left behind, even on Fatal
	return sc, nil
}

// applyLeader runs one leader fault on subprocess campaigner f.Client, at
// its next entry into leadership (or wherever it is after 5 s), and sets
// *landed to when it landed and *leader to the campaigner's id.
func (er *electionRun) applyLeader(ctx context.Context, f Fault, landed *int64, leader *int) error {
	if f.Client >= len(er.subs) {
		return fmt.Errorf("no subprocess campaigner %d", f.Client)
	}
	sc := er.subs[f.Client]
	if !sc.awaitEntry(ctx) {
		return nil
	}
	*landed, *leader = monoNow(), sc.id
	switch f.Kind {
	case FreezeLeader:
		er.freezes.Add(1)
		return sc.pauseFor(ctx, f.Dur)
	case KillLeader:
		er.kills.Add(1)
		sc.killLeader(er.h, electionName)
		er.nextID++
		nsc, err := er.startCampaigner(f.Client, er.nextID)
		if err != nil {
			return err
		}
		er.subs[f.Client] = nsc
		return nil
	case CutLeader:
		er.cuts.Add(1)
		for _, p := range er.proxies[f.Client] {
			p.Cut()
		}
		sleepCtx(ctx, f.Dur)
		for _, p := range er.proxies[f.Client] {
			p.Heal()
		}
		return nil
	}
	return fmt.Errorf("%s is not a leader fault", f.Kind)
}

// killLeader SIGKILLs the campaigner, waits until it is gone (its stdout
// at EOF, then reaped), and completes its leadership in progress: the
// section, ended at the deadline its last step reported or at its death
// if earlier, and the fenced write it was killed during, if any, with an
// unknown outcome.
func (sc *subClient) killLeader(h *History, resource string) {
	_ = syscall.Kill(sc.cmd.Process.Pid, syscall.SIGKILL)
	sc.read.Wait()
	dead := monoNow()
	sc.once.Do(func() { _ = sc.cmd.Wait() })
	sc.mu.Lock()
	defer sc.mu.Unlock()
	s := sc.lastStep
	if s == nil {
		return
	}
	if sc.pending {
		h.addWrite(Write{Client: s.Client, Seq: s.Seq, Resource: resource, Fence: s.Term, Owner: s.Owner,
			Call: s.At, Return: math.MaxInt64, Unknown: true, Err: "killed during the write"})
	}
	if exit := min(dead, s.Dead); exit > s.Enter {
		h.addSection(Section{Client: s.Client, Seq: s.Seq, Resource: resource, Enter: s.Enter, Exit: exit, Fence: s.Term, Late: dead > s.Dead})
	}
	sc.lastStep, sc.pending = nil, false
}
