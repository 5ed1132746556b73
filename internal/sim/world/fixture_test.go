package world_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/quorumlab/redlock/internal/sim"
	"github.com/quorumlab/redlock/internal/sim/world"
	"github.com/quorumlab/redlock/quorum"
	"github.com/quorumlab/redlock/validity"
)

// This file is a TEST FIXTURE, not the library's client: a small Redlock
// TryLock loop, just enough to give the world a history of critical
// sections. It counts each round with internal/quorum's Round and takes
// the lock's deadline from validity.Budget; it acquires with SET NX PX
// and releases with the library's release.lua (EVALSHA, and EVAL with
// its source after NOSCRIPT, as go-redis falls back). The library's own
// sans-I/O client replaces it.

// scriptsDir is the library's scripts, from this package's directory.
const scriptsDir = "../../../redlock/scripts"

func loadScripts(t testing.TB) (map[string]string, *sim.Scripts) {
	t.Helper()
	srcs, s, err := sim.LoadScripts(scriptsDir)
	if err != nil {
		t.Fatal(err)
	}
	return srcs, s
}

// lockerConfig is what the fixture's clients share.
type lockerConfig struct {
	masters     int
	budget      validity.Budget
	nodeTimeout time.Duration
	resources   []string
	own         bool          // client i locks resources[i] only: no contention
	subscribe   bool          // hear releases (release.lua publishes on the key's name) and retry at once
	attempts    int           // rounds per call
	backoff     time.Duration // the retry's jitter, up to
	hold        time.Duration // a section lasts up to (and ends before its deadline)
	think       time.Duration // between calls, up to
	releaseSHA  string
	releaseSrc  string
}

type phase uint8

const (
	idle phase = iota
	acquiring
	holding
	backingOff
	thinking
	stopped
)

// Timer kinds, in an id's low bits; the rest is the generation the
// timer was set in (a timer of an earlier phase is stale).
const (
	tRound = iota
	tHold
	tBackoff
	tThink
	tRetry
	timerBits = 3
)

// Command kinds, in a tag's low bit; then the master; the rest is the
// round's number, or the release's.
const (
	cSet = iota
	cRelease
)

type release struct {
	tag        uint64
	master     int
	key, token string
	eval       bool // NOSCRIPT was answered: send the source
	lost       bool // to resend on the retry timer
}

type tryLocker struct {
	cfg *lockerConfig
	id  int
	rng *rand.Rand
	out []world.Action

	phase    phase
	gen      uint64 // timers' generation
	stopping bool

	call     uint64
	res      string
	token    string
	attempt  int
	roundNo  uint64
	round    *quorum.Round
	start    time.Duration
	answered uint64 // bit per master
	ok, no   int
	setArgs  []string
	deadline time.Duration

	relNo      uint64
	rels       []release
	retryArmed bool
}

var _ world.Client = (*tryLocker)(nil)

// epoch turns the client's clock into the time.Time quorum.Round counts
// from; Round reads no clock when every reply carries its latency.
var epoch = time.Unix(0, 0)

func newTryLocker(cfg *lockerConfig, id int, rng *rand.Rand) *tryLocker {
	return &tryLocker{cfg: cfg, id: id, rng: rng}
}

func (c *tryLocker) timer(kind int, d time.Duration) {
	c.out = append(c.out, world.Action{Kind: world.After, Tag: c.gen<<timerBits | uint64(kind), Delay: d})
}

func (c *tryLocker) note(n world.Note) {
	c.out = append(c.out, world.Action{Kind: world.Record, Note: n})
}

func (c *tryLocker) Start(now time.Duration) []world.Action {
	c.out = c.out[:0]
	// Load the script where it connects, as the library does (a release
	// number 0: its reply is ignored). A master restarted since answers
	// NOSCRIPT, and the release falls back to EVAL.
	for m := range c.cfg.masters {
		c.out = append(c.out, world.Action{Kind: world.Send, Master: m, Tag: uint64(m)<<1 | cRelease,
			Args: []string{"SCRIPT", "LOAD", c.cfg.releaseSrc}})
		c.subscribeAll(m)
	}
	c.begin(now)
	return c.out
}

func (c *tryLocker) begin(now time.Duration) {
	c.call++
	if c.cfg.own {
		c.res = c.cfg.resources[c.id]
	} else {
		c.res = c.cfg.resources[c.rng.IntN(len(c.cfg.resources))]
	}
	c.attempt = 0
	c.note(world.Note{Kind: world.Begin, Call: c.call, Resource: c.res})
	c.tryRound(now)
}

func (c *tryLocker) tryRound(now time.Duration) {
	c.attempt++
	c.roundNo++
	c.gen++
	c.phase = acquiring
	n := c.cfg.masters
	r, err := quorum.NewRound(n, validity.Majority(n), false, epoch.Add(now))
	if err != nil {
		panic(err)
	}
	c.round, c.start, c.answered, c.ok, c.no = r, now, 0, 0, 0
	// A token per round, not per call: a release of a failed round, lost
	// and resent later, must not delete what a later round set.
	c.token = strconv.Itoa(c.id) + "-" + strconv.FormatUint(c.rng.Uint64(), 36)
	c.setArgs = []string{"SET", c.res, c.token, "NX", "PX", strconv.FormatInt(c.cfg.budget.TTL.Milliseconds(), 10)}
	for m := range n {
		c.out = append(c.out, world.Action{Kind: world.Send, Master: m, Tag: c.roundNo<<8 | uint64(m)<<1 | cSet, Args: c.setArgs})
	}
	c.timer(tRound, c.cfg.nodeTimeout)
}

// deliver hands a master's outcome to the round; the round is decided
// once a majority said yes or so many did not that the rest cannot make
// it up (quorum.Round's own rule, whose decided channel is not
// exported: the fixture then calls Wait, which returns at once).
func (c *tryLocker) deliver(now time.Duration, m int, o quorum.Outcome) {
	if c.answered&(1<<m) != 0 {
		return
	}
	c.answered |= 1 << m
	c.round.Deliver(m, quorum.Reply{Outcome: o, Latency: max(now-c.start, 1)})
	if o == quorum.OK {
		c.ok++
	} else {
		c.no++
	}
	need := validity.Majority(c.cfg.masters)
	if c.ok >= need || c.no > c.cfg.masters-need {
		c.decide(now)
	}
}

func (c *tryLocker) decide(now time.Duration) {
	res := c.round.Wait(context.Background(), c.cfg.nodeTimeout)
	c.round = nil
	c.gen++
	left := c.cfg.budget.Validity(now - c.start)
	if res.Reached && left > 0 {
		c.deadline = c.start + c.cfg.budget.Window()
		c.note(world.Note{Kind: world.Acquired, Call: c.call, Mode: world.Exclusive, Deadline: c.deadline})
		c.phase = holding
		// A correct holder leaves before its deadline.
		hold := time.Duration(c.rng.Int64N(int64(c.cfg.hold) + 1))
		hold = min(hold, left*9/10)
		c.timer(tHold, hold)
		return
	}
	c.releaseAll()
	if c.attempt < c.cfg.attempts && !c.stopping {
		c.phase = backingOff
		c.timer(tBackoff, time.Duration(c.rng.Int64N(int64(c.cfg.backoff)+1)))
		return
	}
	c.note(world.Note{Kind: world.Failed, Call: c.call})
	c.next()
}

// next is what follows a call: another after a while, or nothing once
// stopping.
func (c *tryLocker) next() {
	if c.stopping {
		c.phase = stopped
		return
	}
	c.phase = thinking
	c.timer(tThink, time.Duration(c.rng.Int64N(int64(c.cfg.think)+1)))
}

func (c *tryLocker) releaseAll() {
	c.relNo++
	for m := range c.cfg.masters {
		r := release{tag: c.relNo<<8 | uint64(m)<<1 | cRelease, master: m, key: c.res, token: c.token}
		c.rels = append(c.rels, r)
		c.sendRelease(&r)
	}
}

func (c *tryLocker) sendRelease(r *release) {
	args := []string{"EVALSHA", c.cfg.releaseSHA, "1", r.key, r.token}
	if r.eval {
		args[0], args[1] = "EVAL", c.cfg.releaseSrc
	}
	c.out = append(c.out, world.Action{Kind: world.Send, Master: r.master, Tag: r.tag, Args: args})
}

func (c *tryLocker) findRelease(tag uint64) int {
	for i := range c.rels {
		if c.rels[i].tag == tag {
			return i
		}
	}
	return -1
}

func (c *tryLocker) Reply(now time.Duration, m int, tag uint64, r sim.Reply) []world.Action {
	c.out = c.out[:0]
	if tag&1 == cRelease {
		i := c.findRelease(tag)
		if i < 0 {
			return c.out
		}
		if r.Kind == sim.Error && len(r.Text) >= 8 && r.Text[:8] == "NOSCRIPT" && !c.rels[i].eval {
			c.rels[i].eval = true
			c.sendRelease(&c.rels[i])
			return c.out
		}
		c.rels = append(c.rels[:i], c.rels[i+1:]...)
		return c.out
	}
	if tag>>8 != c.roundNo || c.phase != acquiring {
		return c.out // late: the round was decided
	}
	o := quorum.Failed
	switch {
	case r.Kind == sim.Status:
		o = quorum.OK
	case r.Kind == sim.Nil:
		o = quorum.Refused
	}
	c.deliver(now, m, o)
	return c.out
}

func (c *tryLocker) Lost(now time.Duration, m int, tag uint64) []world.Action {
	c.out = c.out[:0]
	if tag&1 == cRelease {
		if i := c.findRelease(tag); i >= 0 {
			c.rels[i].lost = true
			if !c.retryArmed {
				c.retryArmed = true
				c.out = append(c.out, world.Action{Kind: world.After, Tag: tRetry, Delay: c.cfg.nodeTimeout})
			}
		}
		return c.out
	}
	if tag>>8 == c.roundNo && c.phase == acquiring {
		c.deliver(now, m, quorum.Failed)
	}
	return c.out
}

func (c *tryLocker) subscribeAll(m int) {
	if !c.cfg.subscribe {
		return
	}
	for _, res := range c.cfg.resources {
		c.out = append(c.out, world.Action{Kind: world.Subscribe, Master: m, Channel: res})
	}
}

// Message: a release of the resource it backs off from: retry now.
func (c *tryLocker) Message(now time.Duration, _ int, channel, _ string) []world.Action {
	c.out = c.out[:0]
	if c.phase == backingOff && channel == c.res && !c.stopping {
		c.tryRound(now)
	}
	return c.out
}

func (c *tryLocker) Subscribed(time.Duration, int, string, bool) []world.Action { return nil }

func (c *tryLocker) Resubscribe(_ time.Duration, m int) []world.Action {
	c.out = c.out[:0]
	c.subscribeAll(m)
	return c.out
}

func (c *tryLocker) Timer(now time.Duration, id uint64) []world.Action {
	c.out = c.out[:0]
	kind := int(id & (1<<timerBits - 1))
	if kind == tRetry {
		c.retryArmed = false
		for i := range c.rels {
			if c.rels[i].lost {
				c.rels[i].lost = false
				c.sendRelease(&c.rels[i])
			}
		}
		return c.out
	}
	if id>>timerBits != c.gen {
		return c.out
	}
	switch kind {
	case tRound:
		if c.phase == acquiring {
			for m := range c.cfg.masters {
				if c.answered&(1<<m) == 0 {
					c.deliver(now, m, quorum.TimedOut)
					if c.phase != acquiring {
						break
					}
				}
			}
		}
	case tHold:
		c.note(world.Note{Kind: world.Exit, Call: c.call})
		c.releaseAll()
		c.next()
	case tBackoff:
		if c.stopping {
			c.note(world.Note{Kind: world.Failed, Call: c.call})
			c.phase = stopped
			return c.out
		}
		c.tryRound(now)
	case tThink:
		c.begin(now)
	}
	return c.out
}

func (c *tryLocker) Stop(now time.Duration) []world.Action {
	c.out = c.out[:0]
	c.stopping = true
	switch c.phase {
	case thinking:
		c.gen++
		c.phase = stopped
	case backingOff:
		c.gen++
		c.note(world.Note{Kind: world.Failed, Call: c.call})
		c.phase = stopped
	}
	return c.out
}
