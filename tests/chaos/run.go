package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/labdocker"
	"github.com/quorumlab/redlock/redlock"
	"github.com/quorumlab/redlock/validity"
	"github.com/redis/go-redis/v9"
)

// HelperEnv carries a subprocess client's ClientConfig (JSON). The test
// binary re-executes itself with -test.run=^TestHelperClient$ and this set.
const HelperEnv = "REDLOCK_CHAOS_CLIENT"

// Workload is a randomized scenario: clients looping over a few resources
// on N masters while a seeded schedule injects faults.
type Workload struct {
	Name string
	// Inside says whether every fault stays within Redlock's assumptions;
	// then the run must show 0 violations.
	Inside bool
	Plan   Plan
	// InProcess and Subprocess are how many clients of each kind run.
	InProcess, Subprocess int
	Resources             []string
	HoldMin, HoldMax      time.Duration
	// Duration is the shortest run; the run goes on until MinSections
	// critical sections are recorded, up to MaxDuration.
	Duration, MaxDuration time.Duration
	MinSections           int
	// Unfenced runs the clients without Options.Fencing, and without the
	// resource's fenced writes: then a Lock waiting across Lockers is
	// handed the key by the release (redlock's docs/design.md §14.3),
	// which fenced acquisitions never are.
	Unfenced bool
}

// options returns the Locker options every workload client uses.
func (w Workload) options() *redlock.Options {
	return &redlock.Options{TTL: w.Plan.TTL, MasterTimeout: w.Plan.MasterTimeout, Fencing: !w.Unfenced}
}

// acquireTimeout bounds each Lock call in a workload: long enough to ride
// out a fault episode's start, short enough that availability means
// something.
func (w Workload) acquireTimeout() time.Duration { return 4 * w.Plan.TTL }

// Result is one row of the results table.
type Result struct {
	Scenario     string        `json:"scenario"`
	Faults       string        `json:"faults"`
	Inside       bool          `json:"inside_assumptions"`
	Seed         uint64        `json:"seed"`
	Wall         time.Duration `json:"wall_ns"`
	FaultsRun    int           `json:"faults_applied"`
	Acquires     int           `json:"acquires"`
	AcquireOK    int           `json:"acquires_ok"`
	Availability float64       `json:"availability_pct"`
	P99Acquire   time.Duration `json:"p99_acquire_ns"`
	// MinorityExceeded is how long fewer than a majority of the masters
	// answered a prober outside the Lockers (reach.go), and
	// FailedWithoutMajority how many failed Lock calls waited through such
	// a time: a call that had no majority to win fails inside the
	// schedule's assumptions only on paper.
	MinorityExceeded      time.Duration `json:"minority_exceeded_ns,omitempty"`
	FailedWithoutMajority int           `json:"failed_without_majority,omitempty"`
	Verdict
	// Election is the election scenario's part (election.go); nil in
	// the mutex's rows.
	Election *ElectionVerdict `json:"election,omitempty"`
	// Notes say what a scenario showed in words (constructed scenarios).
	Notes string `json:"notes,omitempty"`
	// Backend runs the faulted masters: "" (process) or "docker".
	Backend string `json:"backend,omitempty"`
	// The test process's live heap (after a GC) and goroutines, with every
	// in-process Locker running, once the clients have started and just
	// before they stop: flat over a long run, or a leak.
	HeapStart      uint64 `json:"heap_start_bytes,omitempty"`
	HeapEnd        uint64 `json:"heap_end_bytes,omitempty"`
	GoroutineStart int    `json:"goroutines_start,omitempty"`
	GoroutineEnd   int    `json:"goroutines_end,omitempty"`
}

// footprint is the live heap after a GC and the goroutine count.
func footprint() (uint64, int) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, runtime.NumGoroutine()
}

// Run runs w on fresh masters with the fault schedule drawn from seed and
// returns the checked result. It leaves no master, subprocess or goroutine
// running.
func Run(tb testing.TB, w Workload, seed uint64, backend string) Result {
	tb.Helper()
	sched := NewSchedule(ScheduleRand(seed, w.Name), w.Plan)
	var c *lab.Masters
	if backend == "docker" {
		// No proxy: Cut is docker network disconnect, Pause docker pause,
		// Kill and Restart remove the container and start a new one.
		c = labdocker.ForTest(tb, w.Plan.Masters, nil)
	} else {
		c = lab.ForTest(tb, w.Plan.Masters, &lab.Options{Proxy: true})
	}
	db := newResource(tb) // the resource: never faulted
	h := &History{}

	ctx, cancel := context.WithCancel(tb.Context())
	defer cancel()
	started := time.Now()

	var wg sync.WaitGroup
	var lockers []*redlock.Locker
	closeLockers := func() {
		for _, l := range lockers {
			_ = l.Close()
		}
		lockers = nil
	}
	defer closeLockers()
	for i := range w.InProcess {
		l := newLocker(tb, c.Clients(), w.options())
		lockers = append(lockers, l)
		cfg := w.clientConfig(i, seed)
		wg.Go(func() { runClient(ctx, l, db, cfg, historySink{h}) })
	}
	var subs []*subClient
	for k := range w.Subprocess {
		cfg := w.clientConfig(w.InProcess+k, seed)
		cfg.Masters = c.Addrs()
		setResource(&cfg, db)
		cfg.TTL, cfg.MasterTimeout = w.Plan.TTL, w.Plan.MasterTimeout
		cfg.Run = w.MaxDuration + time.Minute // a cap; the parent stops it first
		sc, err := startSubClient(cfg, h)
		if err != nil {
			cancel()
			wg.Wait()
			tb.Fatalf("chaos: starting subprocess client: %v", err)
		}
		tb.Cleanup(sc.kill) // no process left behind, even on Fatal
		subs = append(subs, sc)
	}

	reach := startProber(ctx, c.Addrs(), w.Plan.MasterTimeout)
	heapStart, gorStart := footprint()
	// The run ends at Duration once MinSections are in, or at MaxDuration.
	var applied atomic.Int64
	var faults sync.WaitGroup
	faults.Go(func() {
		for _, f := range sched {
			if !sleepUntil(ctx, started.Add(f.At)) {
				return
			}
			if err := apply(ctx, c, subs, f); err != nil {
				tb.Errorf("chaos: %s: %v", f, err)
				return
			}
			applied.Add(1)
		}
	})
	runFor(tb.Context(), started, w.Duration, w.MaxDuration, func() bool { return h.Len() >= w.MinSections })
	heapEnd, gorEnd := footprint()
	cancel()
	reach.close()
	faults.Wait() // every fault undone
	c.ResumeAll()
	wg.Wait()
	for _, sc := range subs {
		if err := sc.stop(); err != nil {
			tb.Errorf("chaos: subprocess client %d: %v", sc.id, err)
		}
	}
	closeLockers()
	wall := time.Since(started)

	r := Result{Scenario: w.Name, Faults: describeKinds(w.Plan.Kinds), Inside: w.Inside, Seed: seed, Wall: wall, FaultsRun: int(applied.Load()),
		HeapStart: heapStart, HeapEnd: heapEnd, GoroutineStart: gorStart, GoroutineEnd: gorEnd}
	if backend != "process" {
		r.Backend = backend
	}
	r.Verdict = Check(h.Sections(), h.Writes())
	r.Notes = resourceNotes(tb, db, r.Notes)
	acquires := h.Acquires()
	r.fillAcquires(acquires)
	reach.fill(&r, validity.Majority(w.Plan.Masters), acquires)
	if w.Unfenced {
		r.Notes = fmt.Sprintf("hand-offs: %d (release scripts that handed the key to a waiting Locker, or skipped a gone one: their PUBSUB NUMSUB calls, summed over the masters since each one's last start)", handOffs(tb, c))
	}
	return r
}

// handOffs sums, over c's masters, the PUBSUB NUMSUB calls release.lua
// made: one per waiter it handed the key to, or skipped because its
// Locker no longer listened (redlock's docs/design.md §14.3). A master
// restarted during the run counts from its restart.
func handOffs(tb testing.TB, c *lab.Masters) int64 {
	var n int64
	for i := range c.N() {
		info, err := c.Client(i).Info(tb.Context(), "commandstats").Result()
		if err != nil {
			tb.Errorf("chaos: master %d: INFO commandstats: %v", i, err)
			continue
		}
		for line := range strings.SplitSeq(info, "\n") {
			if rest, ok := strings.CutPrefix(line, "cmdstat_pubsub|numsub:calls="); ok {
				v, _, _ := strings.Cut(rest, ",")
				var k int64
				fmt.Sscan(v, &k)
				n += k
			}
		}
	}
	return n
}

func (w Workload) clientConfig(id int, seed uint64) ClientConfig {
	return ClientConfig{
		ID: id, Resources: w.Resources, HoldMin: w.HoldMin, HoldMax: w.HoldMax,
		AcquireTimeout: w.acquireTimeout(), Seed: seed, Unfenced: w.Unfenced,
	}
}

func describeKinds(ks []Kind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

func (r *Result) fillAcquires(as []Acquire) {
	var lats []time.Duration
	for _, a := range as {
		r.Acquires++
		if a.OK {
			r.AcquireOK++
			lats = append(lats, a.Latency)
		}
	}
	if r.Acquires > 0 {
		r.Availability = 100 * float64(r.AcquireOK) / float64(r.Acquires)
	}
	r.P99Acquire = percentile(lats, 0.99)
}

// newLocker builds a Locker over clients after dialling each (a cold
// client's first call also handshakes and could overrun MasterTimeout).
// Masters that do not answer are left to fail inside the Locker.
func newLocker(tb testing.TB, clients []redis.UniversalClient, opts *redlock.Options) *redlock.Locker {
	tb.Helper()
	for _, cl := range clients {
		ctx, cancel := context.WithTimeout(tb.Context(), time.Second)
		_ = cl.Ping(ctx).Err()
		cancel()
	}
	l, err := redlock.New(clients, opts)
	if err != nil {
		tb.Fatalf("chaos: redlock.New: %v", err)
	}
	return l
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	sleepCtx(ctx, time.Until(t))
	return ctx.Err() == nil
}

// apply runs one fault episode and undoes it (always, even when ctx ends
// during it: a cut or paused master must not outlive the run).
func apply(ctx context.Context, c *lab.Masters, subs []*subClient, f Fault) error {
	each := func(fn func(i int) error) error {
		var errs []error
		for _, i := range f.Masters {
			errs = append(errs, fn(i))
		}
		return errors.Join(errs...)
	}
	// Undo with a context that outlives the run's.
	undo := context.WithoutCancel(ctx)
	switch f.Kind {
	case PauseMasters:
		if err := each(c.Pause); err != nil {
			return err
		}
		sleepCtx(ctx, f.Dur)
		return each(c.Resume)
	case Cut:
		if err := each(c.Cut); err != nil {
			return err
		}
		sleepCtx(ctx, f.Dur)
		return each(c.Heal)
	case Latency:
		if err := each(func(i int) error { return c.Latency(i, f.Delta) }); err != nil {
			return err
		}
		sleepCtx(ctx, f.Dur)
		return each(func(i int) error { return c.Latency(i, 0) })
	case KillDelayed:
		if err := each(c.Kill); err != nil {
			return err
		}
		sleepCtx(ctx, f.Dur)
		return each(func(i int) error { return c.Restart(undo, i) })
	case RestartEmpty:
		return each(func(i int) error { return c.Restart(undo, i) })
	case JumpClock:
		return each(func(i int) error { _, err := c.JumpClock(undo, i, f.Delta); return err })
	case PauseClient:
		if f.Client >= len(subs) {
			return fmt.Errorf("no subprocess client %d", f.Client)
		}
		return subs[f.Client].pauseInSection(ctx, f.Dur)
	}
	return fmt.Errorf("unknown fault kind %q", f.Kind)
}

// subClient is a workload client in a subprocess of the test binary, so
// that it can be SIGSTOPped like a process in a long GC pause.
type subClient struct {
	id     int
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr bytes.Buffer
	read   sync.WaitGroup
	want   atomic.Bool   // the next "enter" should be reported on entered
	enters chan struct{} // buffered 1
	once   sync.Once

	// A campaigner's leadership in progress (election.go): its last step,
	// until the section that closes it arrives, and whether that step's
	// fenced write is still unreported. A killed leader's section and
	// write are completed from them (killLeader).
	mu       sync.Mutex
	lastStep *Step
	pending  bool
}

func startSubClient(cfg ClientConfig, h *History) (*subClient, error) {
	js, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	sc := &subClient{id: cfg.ID, enters: make(chan struct{}, 1)}
	sc.cmd = exec.Command(os.Args[0], "-test.run=^TestHelperClient$", "-test.count=1")
	sc.cmd.Env = append(os.Environ(), HelperEnv+"="+string(js))
	sc.cmd.Stderr = &sc.stderr
	if sc.stdin, err = sc.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := sc.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := sc.cmd.Start(); err != nil {
		return nil, err
	}
	sc.read.Go(func() {
		s := bufio.NewScanner(out)
		s.Buffer(make([]byte, 64<<10), 1<<20)
		for s.Scan() {
			var l line
			if json.Unmarshal(s.Bytes(), &l) != nil {
				continue // the testing package's own output
			}
			switch {
			case l.T == "enter":
				if sc.want.CompareAndSwap(true, false) {
					select {
					case sc.enters <- struct{}{}:
					default:
					}
				}
			case l.Section != nil:
				h.addSection(*l.Section)
				sc.mu.Lock()
				if sc.lastStep != nil && sc.lastStep.Seq == l.Section.Seq {
					sc.lastStep, sc.pending = nil, false
				}
				sc.mu.Unlock()
			case l.Write != nil:
				h.addWrite(*l.Write)
				sc.mu.Lock()
				sc.pending = false
				sc.mu.Unlock()
			case l.Acquire != nil:
				h.addAcquire(*l.Acquire)
			case l.Pub != nil:
				h.addPublication(*l.Pub)
			case l.Lead != nil:
				h.addLeadership(*l.Lead)
			case l.Step != nil:
				sc.mu.Lock()
				sc.lastStep, sc.pending = l.Step, true
				sc.mu.Unlock()
			case l.Delivery != nil:
				h.addDelivery(*l.Delivery)
			}
		}
		_, _ = io.Copy(io.Discard, out)
	})
	return sc, nil
}

// pauseInSection waits for the client's next entry into a critical
// section, SIGSTOPs it there for d, and SIGCONTs it. A client that enters
// no section within 5 s is paused wherever it is.
func (sc *subClient) pauseInSection(ctx context.Context, d time.Duration) error {
	if !sc.awaitEntry(ctx) {
		return nil
	}
	return sc.pauseFor(ctx, d)
}

// pauseFor SIGSTOPs the client for d, then SIGCONTs it.
func (sc *subClient) pauseFor(ctx context.Context, d time.Duration) error {
	pid := sc.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return err
	}
	sleepCtx(ctx, d)
	return syscall.Kill(pid, syscall.SIGCONT)
}

// awaitEntry waits for the client's next entry into a critical section
// (or leadership), at most 5 s; false when ctx ended first.
func (sc *subClient) awaitEntry(ctx context.Context) bool {
	sc.want.Store(true)
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-sc.enters:
	case <-t.C:
	case <-ctx.Done():
		return false
	}
	return true
}

// stop asks the client to finish (EOF on stdin) and waits for it, killing
// it after 20 s.
func (sc *subClient) stop() error {
	_ = syscall.Kill(sc.cmd.Process.Pid, syscall.SIGCONT)
	_ = sc.stdin.Close()
	done := make(chan struct{})
	go func() { sc.read.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		sc.kill()
		<-done
	}
	var err error
	sc.once.Do(func() { err = sc.cmd.Wait() })
	if err != nil {
		return fmt.Errorf("%w; stderr: %s", err, sc.stderr.String())
	}
	return nil
}

// kill is the cleanup of last resort.
func (sc *subClient) kill() {
	_ = sc.cmd.Process.Kill()
	sc.once.Do(func() { _ = sc.cmd.Wait() })
}

// RunHelper is a subprocess client's main: it runs the workload client
// described by $REDLOCK_CHAOS_CLIENT, printing records as JSON lines on
// stdout, until stdin closes or cfg.Run passes.
func RunHelper(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	var cfg ClientConfig
	if err := json.Unmarshal([]byte(os.Getenv(HelperEnv)), &cfg); err != nil {
		return fmt.Errorf("chaos helper: bad %s: %w", HelperEnv, err)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Run)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	// stdin's EOF (the parent closing it) stops the client.
	wg.Go(func() {
		_, _ = io.Copy(io.Discard, stdin)
		cancel()
	})
	clients := make([]redis.UniversalClient, len(cfg.Masters))
	for i, a := range cfg.Masters {
		cl := redis.NewClient(&redis.Options{Addr: a})
		defer cl.Close()
		clients[i] = cl
	}
	db := redis.NewClient(&redis.Options{Addr: cfg.ResourceDB})
	defer db.Close()
	opts := &redlock.Options{TTL: cfg.TTL, MasterTimeout: cfg.MasterTimeout, Fencing: !cfg.Unfenced}
	open := func() (*redlock.Locker, error) { return redlock.New(clients, opts) }
	if cfg.Role == "campaign" { // a Locker at a time, of its own (a leadership left to lapse closes one)
		return runCampaigner(ctx, open, db, cfg, newJSONSink(stdout))
	}
	l, err := open()
	if err != nil {
		return err
	}
	defer l.Close()
	if cfg.Role == "observe" {
		return runObserver(ctx, l, cfg, newJSONSink(stdout))
	}
	res, closeRes, err := helperResource(ctx, cfg, db)
	if err != nil {
		return err
	}
	defer closeRes()
	runClient(ctx, l, res, cfg, newJSONSink(stdout))
	return nil
}

// runFor returns once atLeast has passed since started and enough
// reports true, or atMost has passed, or ctx ended: how long a workload
// runs.
func runFor(ctx context.Context, started time.Time, atLeast, atMost time.Duration, enough func() bool) {
	for {
		el := time.Since(started)
		if el >= atMost || (el >= atLeast && enough()) {
			return
		}
		sleepCtx(ctx, 100*time.Millisecond)
		if ctx.Err() != nil {
			return
		}
	}
}
