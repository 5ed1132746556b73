package redlock

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlab/redlock/driver"
	"github.com/quorumlab/redlock/internal/sim"
)

// A memWorld is several real Lockers over shared in-memory masters (the
// simulator's models of Redis, with their pub/sub), on one clock that
// moves only when the test moves it. A caller's sleep (a Lock's poll or
// backoff) lasts until a wake, its context, Close, or the test firing its
// timer: the test names each step of an interleaving (this waiter is
// asleep; the holder releases; this timer fires) instead of waiting for
// real time to pass. What each master publishes is delivered at once to
// the connections subscribed at that moment; a test may lose it instead.
type memWorld struct {
	t       *testing.T
	clk     *memClock
	masters []*worldMaster

	mu       sync.Mutex
	lockers  []*Locker
	sleepers []*sleeper
	holding  bool // what the masters publish waits in their outbox (hold)
}

// worldMaster is one master of a memWorld. Its mutex serialises the master
// and the delivery of what it publishes, so that each subscriber hears
// its messages in the order they were published.
type worldMaster struct {
	w    *memWorld
	i    int
	mu   sync.Mutex
	m    *sim.Master
	subs map[sim.Conn]*memSub
	next sim.Conn
	lose bool // what it publishes is lost

	pending []pendingMsg // published, not yet delivered (memWorld.hold)
}

// memConn is one Locker's connection to a worldMaster (its driver.Master
// and Subscriber); it records every command the Locker sent.
type memConn struct {
	mm   *worldMaster
	mu   sync.Mutex
	sent [][]string
	// before, when set, runs on the master before each command of the
	// Locker's, as something else happening there just then.
	before func(m *sim.Master, now time.Duration, args []string)
}

// memSub is one subscription connection of a Locker to a worldMaster.
type memSub struct {
	mm      *worldMaster
	from    *memConn
	conn    sim.Conn
	deliver func(channel, payload string)
}

// sleeper is one caller's sleep in a memWorld.
type sleeper struct {
	until time.Duration // on the world's clock
	delay time.Duration
	woken <-chan struct{}
	ctx   context.Context
	quit  context.Context
	fired chan struct{}
	ended chan wakeup // what ended the sleep, once it has
}

// newMemWorld is a world of n masters.
func newMemWorld(t *testing.T, n int) *memWorld {
	t.Helper()
	scripts, err := simScripts()
	if err != nil {
		t.Fatal(err)
	}
	w := &memWorld{t: t, clk: &memClock{base: time.Now()}}
	w.clk.settle = w.flush
	for i := range n {
		w.masters = append(w.masters, &worldMaster{w: w, i: i, m: sim.New(fmt.Sprintf("m%d", i), scripts), subs: map[sim.Conn]*memSub{}})
	}
	return w
}

// locker is a new Locker of the world's, closed when the test ends, with
// its connections.
func (w *memWorld) locker(o *Options) (*Locker, []*memConn) {
	w.t.Helper()
	conns := make([]*memConn, len(w.masters))
	dm := make([]driver.Master, len(w.masters))
	for i, mm := range w.masters {
		conns[i] = &memConn{mm: mm}
		dm[i] = conns[i]
	}
	l, err := newLocker(dm, o, stepEnv{memEnv{clk: w.clk}, w}, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	w.mu.Lock()
	w.lockers = append(w.lockers, l)
	w.mu.Unlock()
	w.t.Cleanup(func() { l.Close() })
	return l, conns
}

// flush returns once every master has run what every Locker sent it.
func (w *memWorld) flush() {
	w.mu.Lock()
	ls := slices.Clone(w.lockers)
	w.mu.Unlock()
	for _, l := range ls {
		flush(l)
	}
}

// run runs a command on master i, as a test reads or changes it.
func (w *memWorld) run(i int, args ...string) sim.Reply {
	mm := w.masters[i]
	mm.mu.Lock()
	defer mm.mu.Unlock()
	r := mm.m.Do(w.masterNow(), args)
	mm.publishLocked()
	return r
}

// get is key's value on each master ("" where absent).
func (w *memWorld) get(key string) []string {
	out := make([]string, len(w.masters))
	for i := range w.masters {
		out[i] = w.run(i, "GET", key).Text
	}
	return out
}

// queue is key's queue of waiters on master i, head first.
func (w *memWorld) queue(i int, key string) []string {
	var out []string
	for _, r := range w.run(i, "ZRANGE", key+queueSuffix, "0", "-1").Array {
		out = append(out, r.Text)
	}
	return out
}

// queued reports whether key's queue holds n members on every master.
func (w *memWorld) queued(key string, n int) bool {
	for i := range w.masters {
		if len(w.queue(i, key)) != n {
			return false
		}
	}
	return true
}

// state is what each master holds for key, for a failure's message.
func (w *memWorld) state(key string) string {
	var b strings.Builder
	for i := range w.masters {
		fmt.Fprintf(&b, "\n  master %d: GET %q, waiters %q", i, w.run(i, "GET", key).Text, w.queue(i, key))
	}
	return b.String()
}

// subscribed waits until l hears key's announcements and those naming its
// waiters on every master: a release published before would be lost.
func (w *memWorld) subscribed(l *Locker, key string) {
	w.t.Helper()
	eventually(w.t, "the waiter's subscriptions on every master", func() bool {
		for _, mm := range w.masters {
			mm.mu.Lock()
			n := min(mm.m.Subscribers(key), mm.m.Subscribers(WakeChannel(l, key)))
			mm.mu.Unlock()
			if n == 0 {
				return false
			}
		}
		return true
	})
}

// lose makes master i lose (or, with false, deliver) what it publishes.
func (w *memWorld) lose(i int, lost bool) {
	mm := w.masters[i]
	mm.mu.Lock()
	defer mm.mu.Unlock()
	mm.lose = lost
}

// masterNow is the masters' clock (they share the world's).
func (w *memWorld) masterNow() time.Duration {
	return time.Duration(w.clk.base.UnixNano()) + w.clk.now()
}

// asleep is how many callers sleep with nothing to end their sleep yet:
// no wake pending, context and Locker live.
func (w *memWorld) asleep() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, s := range w.sleepers {
		if s.idle() {
			n++
		}
	}
	return n
}

func (s *sleeper) idle() bool {
	select {
	case <-s.fired:
		return false
	default:
	}
	return len(s.woken) == 0 && s.ctx.Err() == nil && s.quit.Err() == nil
}

// sleeping waits until n callers are asleep (asleep), with what they sent
// run on the masters.
func (w *memWorld) sleeping(n int) {
	w.t.Helper()
	eventually(w.t, fmt.Sprintf("%d callers asleep", n), func() bool { return w.asleep() == n })
	w.flush()
}

// delays are the delays of the callers asleep, soonest end first.
func (w *memWorld) delays() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []time.Duration
	for _, s := range w.sortedLocked() {
		if s.idle() {
			out = append(out, s.delay)
		}
	}
	return out
}

func (w *memWorld) sortedLocked() []*sleeper {
	s := slices.Clone(w.sleepers)
	slices.SortStableFunc(s, func(a, b *sleeper) int { return cmp.Compare(a.until, b.until) })
	return s
}

// advance moves the clock by d, once every master has run what it was
// sent, and fires the timers of the sleeps that end by then.
func (w *memWorld) advance(d time.Duration) {
	w.flush()
	w.clk.pass(d)
	now := w.clk.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.sleepers {
		if s.until <= now && s.idle() {
			s.fire()
		}
	}
}

// fireNext fires the timer of the soonest sleep of a caller asleep, which
// moves the clock to its end (not backwards) as the sleep returns, and
// waits for the sleep to end. It reports the delay of that sleep, and
// whether its timer ended it (not a wake that came first); ok is false
// when no caller is asleep.
func (w *memWorld) fireNext() (delay time.Duration, timer, ok bool) {
	w.flush()
	w.mu.Lock()
	var s *sleeper
	for _, x := range w.sortedLocked() {
		if x.idle() {
			s = x
			break
		}
	}
	if s == nil {
		w.mu.Unlock()
		return 0, false, false
	}
	s.fire()
	w.mu.Unlock()
	select {
	case r := <-s.ended:
		return s.delay, r == wakeTimer, true
	case <-time.After(10 * time.Second):
		w.t.Fatal("a sleep whose timer fired did not end within 10s")
	}
	return 0, false, false
}

func (s *sleeper) fire() {
	select {
	case <-s.fired:
	default:
		close(s.fired)
	}
}

// until fires the callers' timers, one at a time and each once the
// callers are quiet (live() of them asleep: every caller still running),
// until done holds, at most max times.
func (w *memWorld) until(what string, live func() int, max int, done func() bool) {
	w.t.Helper()
	for range max {
		eventually(w.t, what+": the callers asleep, or done", func() bool { return done() || w.asleep() >= live() })
		if done() {
			return
		}
		w.fireNext() // none asleep any more: a wake came first; look again
	}
	w.t.Fatalf("%s: not done after %d timers fired", what, max)
}

// one is the live count of a single caller, for until.
func one() int { return 1 }

// hold keeps what the masters publish from now in their outboxes, in
// flight, until deliver.
func (w *memWorld) hold() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.holding = true
}

// deliver delivers what the masters published since hold, each master's
// messages in order, master by master, and delivers at once from now.
func (w *memWorld) deliver() {
	w.mu.Lock()
	w.holding = false
	w.mu.Unlock()
	for _, mm := range w.masters {
		mm.mu.Lock()
		mm.publishLocked()
		mm.mu.Unlock()
	}
}

// deliverTo delivers what the masters published since hold to the
// Locker of conns only, each master's messages in order; the world
// still holds the rest.
func (w *memWorld) deliverTo(conns []*memConn) {
	for i, mm := range w.masters {
		mm.mu.Lock()
		mm.sendLocked(conns[i])
		mm.mu.Unlock()
	}
}

// pendingMsg is a message published and not yet delivered to to.
type pendingMsg struct {
	channel, payload string
	to               []sim.Conn
}

// publishLocked takes what the master published, with the connections
// subscribed when it did, and delivers it unless the world holds it.
func (mm *worldMaster) publishLocked() {
	mm.m.Drain(func(msg sim.Message, to []sim.Conn) {
		if !mm.lose {
			mm.pending = append(mm.pending, pendingMsg{msg.Channel, msg.Payload, slices.Clone(to)})
		}
	})
	mm.w.mu.Lock()
	held := mm.w.holding
	mm.w.mu.Unlock()
	if !held {
		mm.sendLocked(nil)
	}
}

// sendLocked delivers the pending messages to their recipients that are
// subscriptions of only (nil: all).
func (mm *worldMaster) sendLocked(only *memConn) {
	for k := range mm.pending {
		p := &mm.pending[k]
		keep := p.to[:0]
		for _, c := range p.to {
			s := mm.subs[c]
			switch {
			case s == nil: // closed since
			case only == nil || s.from == only:
				s.deliver(p.channel, p.payload)
			default:
				keep = append(keep, c)
			}
		}
		p.to = keep
	}
	mm.pending = slices.DeleteFunc(mm.pending, func(p pendingMsg) bool { return len(p.to) == 0 })
}

func (c *memConn) Do(ctx context.Context, cmds [][]string) ([]driver.Reply, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	mm := c.mm
	mm.mu.Lock()
	defer mm.mu.Unlock()
	now := mm.w.masterNow()
	out := make([]driver.Reply, len(cmds))
	for i, args := range cmds {
		if len(args) != 2 || args[1] != flushKey {
			c.mu.Lock()
			c.sent = append(c.sent, slices.Clone(args))
			before := c.before
			c.mu.Unlock()
			if before != nil {
				before(mm.m, now, args)
			}
		}
		r := mm.m.Do(now, args)
		out[i] = driver.Reply{Kind: driver.ReplyKind(r.Kind), Int: r.Int, Text: r.Text}
		if r.Kind == sim.Array {
			out[i].Kind = driver.ReplyOther
		}
	}
	mm.publishLocked()
	return out, nil
}

func (c *memConn) Addr() string { return fmt.Sprintf("mem%d", c.mm.i) }

// count is how many commands c sent that match.
func (c *memConn) count(match func(args []string) bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, args := range c.sent {
		if match(args) {
			n++
		}
	}
	return n
}

// sentBy counts the commands of conns that match, on each master.
func sentBy(conns []*memConn, match func(args []string) bool) []int {
	out := make([]int, len(conns))
	for i, c := range conns {
		out[i] = c.count(match)
	}
	return out
}

func isSet(args []string) bool { return len(args) > 0 && strings.EqualFold(args[0], "SET") }

func (c *memConn) Subscribe(_ context.Context, deliver func(channel, payload string)) (driver.Subscription, error) {
	mm := c.mm
	mm.mu.Lock()
	defer mm.mu.Unlock()
	mm.next++
	s := &memSub{mm: mm, from: c, conn: mm.next, deliver: deliver}
	mm.subs[s.conn] = s
	return s, nil
}

func (s *memSub) Subscribe(_ context.Context, channels ...string) error {
	s.mm.mu.Lock()
	defer s.mm.mu.Unlock()
	s.mm.m.Subscribe(s.conn, channels...)
	return nil
}

func (s *memSub) Unsubscribe(_ context.Context, channels ...string) error {
	s.mm.mu.Lock()
	defer s.mm.mu.Unlock()
	s.mm.m.Unsubscribe(s.conn, channels...)
	return nil
}

func (s *memSub) Close() error {
	s.mm.mu.Lock()
	defer s.mm.mu.Unlock()
	s.mm.m.Disconnect(s.conn)
	delete(s.mm.subs, s.conn)
	return nil
}

// stepEnv is memEnv whose callers' sleeps last until the test fires their
// timer (memWorld.advance, fireNext), a wake, their context, or Close.
// The Locker's own sleeps are memEnv's.
type stepEnv struct {
	memEnv
	w *memWorld
}

func (e stepEnv) sleep(ctx, quit context.Context, delay time.Duration, woken <-chan struct{}, t **time.Timer) wakeup {
	if quit == context.Background() {
		return e.memEnv.sleep(ctx, quit, delay, woken, t)
	}
	if w, ended := endedBefore(ctx, quit, woken); ended {
		return w
	}
	s := &sleeper{until: e.clk.now() + delay, delay: delay, woken: woken, ctx: ctx, quit: quit, fired: make(chan struct{}), ended: make(chan wakeup, 1)}
	w := e.w
	w.mu.Lock()
	w.sleepers = append(w.sleepers, s)
	w.mu.Unlock()
	var r wakeup
	select {
	case <-ctx.Done():
		r = wakeCtx
	case <-quit.Done():
		r = wakeClosed
	case <-woken:
		r = wakeWoken
	case <-s.fired:
		r = wakeTimer
	}
	w.mu.Lock()
	w.sleepers = slices.DeleteFunc(w.sleepers, func(x *sleeper) bool { return x == s })
	if r == wakeTimer {
		if d := s.until - w.clk.now(); d > 0 {
			w.clk.pass(d) // fired by fireNext: the clock comes to the timer's end
		}
	}
	w.mu.Unlock()
	s.ended <- r
	return r
}
