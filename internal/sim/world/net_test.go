package world_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/quorumlab/redlock/internal/sim"
	"github.com/quorumlab/redlock/internal/sim/world"
)

// scripted is a client that sends what it is given and records what it
// is told, with the global time.
type scripted struct {
	w      *world.World
	start  []world.Action
	timer  func(id uint64) []world.Action
	got    []got
	resubs int
}

type got struct {
	kind             string
	at               time.Duration
	master           int
	tag              uint64
	r                sim.Reply
	channel, payload string
}

var _ world.Client = (*scripted)(nil)

func (s *scripted) Start(time.Duration) []world.Action { return s.start }
func (s *scripted) Reply(_ time.Duration, m int, tag uint64, r sim.Reply) []world.Action {
	s.got = append(s.got, got{kind: "reply", at: s.w.Now(), master: m, tag: tag, r: r})
	return nil
}
func (s *scripted) Lost(_ time.Duration, m int, tag uint64) []world.Action {
	s.got = append(s.got, got{kind: "lost", at: s.w.Now(), master: m, tag: tag})
	return nil
}
func (s *scripted) Message(_ time.Duration, m int, ch, payload string) []world.Action {
	s.got = append(s.got, got{kind: "message", at: s.w.Now(), master: m, channel: ch, payload: payload})
	return nil
}
func (s *scripted) Subscribed(_ time.Duration, m int, ch string, on bool) []world.Action {
	kind := "unsubscribed"
	if on {
		kind = "subscribed"
	}
	s.got = append(s.got, got{kind: kind, at: s.w.Now(), master: m, channel: ch})
	return nil
}
func (s *scripted) Resubscribe(time.Duration, int) []world.Action { s.resubs++; return nil }
func (s *scripted) Timer(_ time.Duration, id uint64) []world.Action {
	if s.timer != nil {
		return s.timer(id)
	}
	return nil
}
func (s *scripted) Stop(time.Duration) []world.Action { return nil }

func newWorld(t *testing.T, opts world.Options) *world.World {
	t.Helper()
	w, err := world.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func send(m int, tag uint64, args ...string) world.Action {
	return world.Action{Kind: world.Send, Master: m, Tag: tag, Args: args}
}

// incrs is n INCRs of key on master m, tagged 1..n.
func incrs(m, n int, key string) []world.Action {
	var acts []world.Action
	for i := 1; i <= n; i++ {
		acts = append(acts, send(m, uint64(i), "INCR", key))
	}
	return acts
}

// wantInOrder checks that the replies are INCR's 1..n, in order, tagged
// so: each connection is FIFO, both ways.
func wantInOrder(t *testing.T, gs []got, n int) {
	t.Helper()
	if len(gs) != n {
		t.Fatalf("%d replies, want %d", len(gs), n)
	}
	for i, g := range gs {
		if g.kind != "reply" || g.tag != uint64(i+1) || g.r.Int != int64(i+1) {
			t.Fatalf("event %d: %+v, want the reply to #%d, %d", i, g, i+1, i+1)
		}
	}
}

// Commands on one connection run and come back in the order sent, even
// with delays that vary by a factor of 100.
func TestConnectionIsFIFO(t *testing.T) {
	w := newWorld(t, world.Options{Seed: 1, Masters: 1, Delay: world.Dist{Min: 10 * time.Microsecond, Mean: 500 * time.Microsecond, Max: 10 * ms}})
	c := &scripted{w: w, start: incrs(0, 200, "k")}
	w.Add(c)
	w.Drain(1e6)
	wantInOrder(t, c.got, 200)
}

// A stalled connection delivers nothing until it ends, then everything,
// in order.
func TestStallConnKeepsOrder(t *testing.T) {
	w := newWorld(t, world.Options{Seed: 2, Masters: 1})
	c := &scripted{w: w, start: incrs(0, 50, "k")}
	w.Add(c)
	if err := w.Inject(world.Fault{Kind: world.StallConn, Client: 0, Master: 0, At: 0, For: 20 * ms}); err != nil {
		t.Fatal(err)
	}
	w.Drain(1e6)
	wantInOrder(t, c.got, 50)
	if c.got[0].at < 20*ms {
		t.Fatalf("a reply at %v, inside the stall", c.got[0].at)
	}
}

// A cut loses what is in flight both ways: the client is told Lost for
// each, in order; some of them ran (the master counted them). What is
// sent while the connection is down is lost too; after it, commands run
// again.
func TestCutConnLosesInFlight(t *testing.T) {
	w := newWorld(t, world.Options{Seed: 3, Masters: 1, Delay: world.Dist{Min: ms, Mean: 2 * ms, Max: 5 * ms}})
	c := &scripted{w: w, start: incrs(0, 20, "k")}
	c.timer = func(id uint64) []world.Action { return []world.Action{send(0, 100+id, "INCR", "k")} }
	c.start = append(c.start, world.Action{Kind: world.After, Tag: 1, Delay: 5 * ms}, world.Action{Kind: world.After, Tag: 2, Delay: 50 * ms})
	w.Add(c)
	if err := w.Inject(world.Fault{Kind: world.CutConn, Client: 0, Master: 0, At: 2 * ms, For: 10 * ms}); err != nil {
		t.Fatal(err)
	}
	w.Drain(1e6)
	var replies, lost []got
	for _, g := range c.got {
		if g.kind == "reply" {
			replies = append(replies, g)
		} else {
			lost = append(lost, g)
		}
	}
	// 20 in flight, one sent while down: all lost; one sent after: runs.
	if len(lost) != 21 || len(replies) != 1 || replies[0].tag != 102 {
		t.Fatalf("%d lost and %d replies (%+v), want 21 lost and the reply to #102", len(lost), len(replies), replies)
	}
	for i, g := range lost[:20] {
		if g.tag != uint64(i+1) {
			t.Fatalf("lost #%d in place %d: not in order", g.tag, i)
		}
	}
	if lost[20].tag != 101 {
		t.Fatalf("the last lost is #%d, want #101", lost[20].tag)
	}
	ran := replies[0].r.Int - 1
	if ran == 0 {
		t.Fatal("no lost command ran: the cut came before any arrived (the test's delays are off)")
	}
	t.Logf("of 20 lost, %d ran on the master", ran)
}

// A stalled master runs nothing until it resumes; then the commands run,
// each connection's in order.
func TestStallMasterQueues(t *testing.T) {
	w := newWorld(t, world.Options{Seed: 4, Masters: 1})
	var cs []*scripted
	for i := range 3 {
		c := &scripted{w: w, start: incrs(0, 10, "k"+strconv.Itoa(i))}
		cs = append(cs, c)
		w.Add(c)
	}
	if err := w.Inject(world.Fault{Kind: world.StallMaster, Master: 0, At: 0, For: 30 * ms}); err != nil {
		t.Fatal(err)
	}
	w.Drain(1e6)
	for i, c := range cs {
		wantInOrder(t, c.got, 10)
		for j, g := range c.got {
			if g.at < 30*ms || g.tag != uint64(j+1) {
				t.Fatalf("client %d reply %d: %+v: before the stall ended, or out of order", i, j, g)
			}
		}
	}
}

// A master restarted empty forgets its keys and its script cache, one
// restarted with its data keeps its keys; both break every connection
// and the subscriptions, which the client is told of when it is back.
func TestRestartMaster(t *testing.T) {
	_, scripts := loadScripts(t)
	for _, keep := range []bool{false, true} {
		w := newWorld(t, world.Options{Seed: 5, Masters: 1, Scripts: scripts})
		c := &scripted{w: w, start: []world.Action{
			send(0, 1, "SET", "k", "v"),
			{Kind: world.Subscribe, Master: 0, Channel: "ch"},
			{Kind: world.After, Tag: 1, Delay: 15 * ms},
			{Kind: world.After, Tag: 2, Delay: 40 * ms},
		}}
		c.timer = func(id uint64) []world.Action { return []world.Action{send(0, 10+id, "GET", "k")} }
		w.Add(c)
		if err := w.Inject(world.Fault{Kind: world.RestartMaster, Master: 0, At: 10 * ms, For: 20 * ms, Keep: keep}); err != nil {
			t.Fatal(err)
		}
		w.Drain(1e6)
		want := `"v"`
		if !keep {
			want = "(nil)"
		}
		if len(c.got) != 4 || c.got[1].kind != "subscribed" || c.got[2].kind != "lost" || c.got[2].tag != 11 || c.got[3].r.String() != want {
			t.Fatalf("keep %v: %+v, want the SET's reply, the subscription, the GET sent while down lost, and GET = %s", keep, c.got, want)
		}
		if c.resubs != 1 || w.Master(0).Subscribers("ch") != 0 {
			t.Fatalf("keep %v: told %d times to resubscribe, %d subscribers left", keep, c.resubs, w.Master(0).Subscribers("ch"))
		}
	}
}

// Pub/sub messages reach the subscribers in the order published, with
// the losses and duplicates asked for.
func TestPubSubLossAndDuplication(t *testing.T) {
	w := newWorld(t, world.Options{Seed: 6, Masters: 1, PubSubLoss: 0.2, PubSubDup: 0.25})
	sub := &scripted{w: w, start: []world.Action{{Kind: world.Subscribe, Master: 0, Channel: "ch"}, {Kind: world.After, Tag: 1, Delay: 10 * ms}}}
	sub.timer = func(uint64) []world.Action { return nil }
	pub := &scripted{w: w, start: []world.Action{{Kind: world.After, Tag: 1, Delay: 5 * ms}}}
	const n = 2000
	pub.timer = func(uint64) []world.Action {
		var acts []world.Action
		for i := range n {
			acts = append(acts, send(0, uint64(i), "PUBLISH", "ch", strconv.Itoa(i)))
		}
		return acts
	}
	w.Add(sub)
	w.Add(pub)
	w.Drain(1e6)
	if len(sub.got) == 0 || sub.got[0].kind != "subscribed" || sub.got[0].channel != "ch" {
		t.Fatalf("the first event is not the subscription's confirmation: %+v", sub.got[:1])
	}
	seen := map[string]int{}
	last := -1
	for _, g := range sub.got[1:] {
		i, _ := strconv.Atoi(g.payload)
		if i < last {
			t.Fatalf("message %d after %d: out of order", i, last)
		}
		last = i
		seen[g.payload]++
	}
	dups := 0
	for _, k := range seen {
		dups += k - 1
	}
	// Expected: 1600 delivered, 400 of them twice.
	if len(seen) < 1450 || len(seen) > 1750 || dups < 300 || dups > 500 {
		t.Fatalf("%d of %d messages came, %d twice; want about 1600 and 400", len(seen), n, dups)
	}
}

// A paused client is told nothing until it resumes, then everything in
// order, timers included.
func TestPauseClient(t *testing.T) {
	w := newWorld(t, world.Options{Seed: 7, Masters: 1})
	var fired []time.Duration
	c := &scripted{w: w, start: append(incrs(0, 5, "k"), world.Action{Kind: world.After, Tag: 1, Delay: 3 * ms})}
	c.timer = func(uint64) []world.Action { fired = append(fired, w.Now()); return nil }
	w.Add(c)
	if err := w.Inject(world.Fault{Kind: world.PauseClient, Client: 0, At: 0, For: 10 * ms}); err != nil {
		t.Fatal(err)
	}
	w.Drain(1e6)
	wantInOrder(t, c.got, 5)
	if c.got[0].at != 10*ms || len(fired) != 1 || fired[0] != 10*ms {
		t.Fatalf("first reply at %v, timer at %v: want both at the pause's end, 10ms", c.got[0].at, fired)
	}
}
