package sim_test

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlab/redlock/internal/sim"
	"github.com/quorumlab/redlock/lab"
)

var (
	diffSeed = flag.Uint64("sim.seed", 1, "differential test: the first sequence's seed (0: one from the clock, printed)")
	diffSeqs = flag.Int("sim.sequences", 1000, "differential test: how many generated sequences")
	diffLen  = flag.Int("sim.length", 100, "differential test: commands per sequence")
)

// tolerance bounds how far a PTTL, or a reader's expiry score (from
// TIME), may differ between the real server and the simulated master,
// whose clock is read just before each command is sent.
const tolerance = 1000 // ms

// scriptsDir is the library's scripts, from this package's directory.
const scriptsDir = "../../redlock/scripts"

func loadScripts(t testing.TB) (map[string]string, *sim.Scripts) {
	t.Helper()
	srcs, s, err := sim.LoadScripts(scriptsDir)
	if err != nil {
		t.Fatal(err)
	}
	return srcs, s
}

// The keyspace the generator draws from: small, so that commands meet
// each other's keys, with each role's keys named as the library names
// them (redlock/cmd.go, primitives.go).
var (
	lockKeys  = []string{"a", "b"}
	rwStem    = "r:"
	semMeta   = "s:m"
	semSlots  = []string{"s:1", "s:2", "s:3"}
	resource  = "res"
	subLocker = []string{"L1", "L2"} // Lockers listening on the real server; L9 is not
)

func allKeys() []string {
	var out []string
	for _, k := range lockKeys {
		out = append(out, k, k+":waiters", k+":fence")
	}
	out = append(out, rwStem+"w", rwStem+"w:fence", rwStem+"wi", rwStem+"r", rwStem+"wg", rwStem+"w:waiters")
	out = append(out, semMeta)
	out = append(out, semSlots...)
	return append(out, resource)
}

// waiterChannels are the channels of channels() that the subscriber
// leaves and joins during a sequence (it always keeps the others, so that
// it stays in subscribed mode).
func waiterChannels() []string {
	var out []string
	for _, ch := range channels() {
		if strings.Contains(ch, ":w:") {
			out = append(out, ch)
		}
	}
	return out
}

// channels are those the test's subscriber listens to on both sides.
func channels() []string {
	var out []string
	for _, k := range append(slices.Clone(lockKeys), rwStem+"w") {
		out = append(out, k)
		for _, l := range subLocker {
			out = append(out, k+":w:"+l)
		}
	}
	return out
}

// gen draws commands from one seed.
type gen struct {
	next [][]string // commands drawn ahead, sent first
	r    *rand.Rand
	shas map[string]string // script name -> SHA1
	keys []string
}

func (g *gen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }
func (g *gen) chance(p float64) bool    { return g.r.Float64() < p }

// key is a key of the role asked for, or now and then any key at all.
func (g *gen) key(k string) string {
	if g.chance(0.04) {
		return g.pick(g.keys...)
	}
	return k
}

func (g *gen) lock() string  { return g.key(g.pick(lockKeys...)) }
func (g *gen) token() string { return g.pick("t1", "t2", "t3", "t1", "t2", "t3", "t1", "") }

func (g *gen) ttl() string {
	if g.chance(0.9) {
		return g.pick("30000", "60000", "90000")
	}
	return g.pick("0", "-5", "abc", "", "1.5", "007", "99999999999999999999", "9223372036854775807")
}

// rwTTL is a TTL for the read-write scripts, which read it with tonumber
// too; it leaves out the small positive values whose expiry would fall
// inside the clocks' difference.
func (g *gen) rwTTL() string {
	if g.chance(0.9) {
		return g.pick("30000", "60000", "90000")
	}
	return g.pick("0", "-5", "abc", "")
}

// life is a queue's life for join.lua and release.lua, as PEXPIRE reads
// it; as rwTTL, without small positive values.
func (g *gen) life() string {
	if g.chance(0.9) {
		return g.pick("30000", "60000", "90000")
	}
	return g.pick("0", "-5", "abc", "", "30000.5")
}

// join is a waiter's join.lua.
func (g *gen) join(q, member string) []string {
	age := g.age()
	return g.evalsha("join.lua", []string{q}, []string{age, member, g.life(), g.began(age), g.slack()})
}

// began is the instant a waiter of that age began, in µs of its own
// clock: the server's reckoning (its TIME less the age), or 20 s before
// or after it, so that a slack either keeps it or moves it by far more
// than the two clocks differ; or not a number.
func (g *gen) began(age string) string {
	a, err := strconv.ParseInt(age, 10, 64)
	if err != nil || !g.chance(0.9) {
		return g.pick("abc", "", "1.5")
	}
	off := []int64{-20_000_000, 0, 0, 20_000_000}[g.r.IntN(4)]
	return strconv.FormatInt(time.Now().UnixMicro()-a+off, 10)
}

// slack is how far a master may move a waiter's instant, in µs: none,
// less or more than began's 20 s; or not a number.
func (g *gen) slack() string {
	if g.chance(0.9) {
		return g.pick("0", "5000000", "30000000")
	}
	return g.pick("abc", "", "-5")
}

// age is a join's age of its waiter, in µs: whole seconds apart, so that
// members joined in one sequence differ by far more than the real
// server's and the simulated master's clocks do; or not a number.
func (g *gen) age() string {
	if g.chance(0.9) {
		return strconv.Itoa(g.r.IntN(9) * 1_000_000)
	}
	return g.pick("abc", "", "1.5")
}

func (g *gen) fence() string {
	return g.pick("0", "1", "5", "10", "5", "10", "007", "18446744073709551615", "18446744073709551616", "abc", "")
}

func (g *gen) waiterID() string { return g.pick("L1.1", "L1.2", "L2.1", "L9.1", "L1") }

// member is a queue member: an id, or the "<id> <TTL ms> <token>" of a
// waiter that asks to be handed the key, or something malformed.
func (g *gen) member() string {
	switch x := g.r.Float64(); {
	case x < 0.45:
		return g.waiterID()
	case x < 0.9:
		return g.waiterID() + " " + g.pick("30000", "60000", "30000", "0", "007", "99999999999999999999") + " " + g.pick("t1", "t2", "t3")
	}
	return g.pick("x y", " lead", "L1.1 30000 ", "L2.1 30000 t2 extra", "L1.1\t30000 t1", "L2.1 3a t2")
}

func (g *gen) score() string {
	if g.chance(0.9) {
		return strconv.Itoa(g.r.IntN(9) + 1)
	}
	return g.pick("1.5", "abc", "inf", "-inf", "0x10", " 1")
}

// evalsha lays out an EVALSHA of the named script; now and then an
// argument goes missing from the end.
func (g *gen) evalsha(name string, keys, argv []string) []string {
	if len(argv) > 0 && g.chance(0.04) {
		argv = argv[:len(argv)-1]
	} else if len(keys) > 1 && g.chance(0.02) {
		keys = keys[:len(keys)-1]
	}
	cmd := []string{"EVALSHA", g.shas[name], strconv.Itoa(len(keys))}
	cmd = append(cmd, keys...)
	return append(cmd, argv...)
}

func (g *gen) script() []string {
	lk := g.lock()
	q := g.key(lk + ":waiters")
	f := g.key(lk + ":fence")
	w, wf, wi, rr, wg, wq := g.key(rwStem+"w"), g.key(rwStem+"w:fence"), g.key(rwStem+"wi"), g.key(rwStem+"r"),
		g.key(rwStem+"wg"), g.key(rwStem+"w:waiters")
	multi := func() []string {
		if g.chance(0.5) {
			return []string{g.lock()}
		}
		return []string{g.key("a"), g.key("b")}
	}
	fences := func(ks []string) []string {
		out := make([]string, len(ks))
		for i, k := range ks {
			out[i] = g.key(k + ":fence")
		}
		return out
	}
	count := func(n int) string {
		if g.chance(0.05) {
			return g.pick("abc", "3", "1.5", "0", "")
		}
		return strconv.Itoa(n)
	}
	queue := []string{lk, q}
	switch g.r.IntN(20) {
	case 0:
		return g.evalsha("extend.lua", []string{lk}, []string{g.token(), g.ttl()})
	case 1, 2:
		switch g.r.IntN(4) {
		case 0:
			return g.evalsha("release.lua", []string{lk}, []string{g.token()})
		case 1:
			return g.evalsha("release.lua", queue, []string{g.token()})
		case 2:
			return g.evalsha("release.lua", queue, []string{g.token(), g.member()})
		}
		own := ""
		if g.chance(0.5) {
			own = g.member()
		}
		argv := []string{g.token(), own, g.pick("h", "h", "h", "x")}
		if g.chance(0.7) {
			argv = append(argv, g.life())
		}
		return g.evalsha("release.lua", queue, argv)
	case 17, 18:
		return g.join(q, g.member())
	case 3:
		return g.evalsha("probe_mine.lua", []string{lk}, []string{g.token()})
	case 4:
		return g.evalsha("acquire_fenced.lua", []string{lk, f}, []string{g.token(), g.ttl()})
	case 5:
		return g.evalsha("writeback.lua", []string{lk, f}, []string{g.token(), g.fence()})
	case 6:
		return g.evalsha("fenced_write.lua", []string{g.key(resource)}, []string{g.fence(), g.pick("o1", "o2"), g.pick("v1", "v2")})
	case 7:
		ks := multi()
		fenced := g.chance(0.5)
		keys := ks
		flag := "0"
		if fenced {
			keys, flag = append(slices.Clone(ks), fences(ks)...), "1"
		}
		return g.evalsha("acquire_multi.lua", keys, []string{g.token(), g.ttl(), count(len(ks)), flag})
	case 8:
		ks := multi()
		return g.evalsha("writeback_multi.lua", append(slices.Clone(ks), fences(ks)...), []string{g.token(), g.fence(), count(len(ks))})
	case 9:
		return g.evalsha("extend_multi.lua", multi(), []string{g.token(), g.ttl()})
	case 10:
		ks := multi()
		var argv []string
		for range ks {
			argv = append(argv, g.token(), g.ttl())
		}
		return g.evalsha("extend_batch.lua", ks, argv)
	case 11:
		return g.evalsha("release_multi.lua", multi(), []string{g.token()})
	case 12:
		if g.chance(0.5) {
			return g.evalsha("adopt.lua", []string{lk}, []string{g.token()})
		}
		return g.evalsha("adopt.lua", []string{lk, f}, []string{g.token()})
	case 13:
		slots := slices.Clone(semSlots[:1+g.r.IntN(len(semSlots))])
		g.r.Shuffle(len(slots), func(i, j int) { slots[i], slots[j] = slots[j], slots[i] })
		for i := range slots {
			slots[i] = g.key(slots[i])
		}
		switch {
		case g.chance(0.25):
			return g.evalsha("sem_holders.lua", slots, nil)
		case g.chance(0.3):
			// A permit's extension: its slot and the permits record.
			return g.evalsha("sem_extend.lua", []string{slots[0], g.key(semMeta)}, []string{g.token(), g.ttl(), g.pick("1", "2", "3")})
		}
		return g.evalsha("sem_acquire.lua", append([]string{g.key(semMeta)}, slots...), []string{g.token(), g.ttl()})
	case 14:
		keys := []string{w, wf, wi, rr, wg}
		argv := []string{g.token(), g.rwTTL(), g.pick("0", "1")}
		if g.chance(0.5) {
			keys = append(keys, wq)
			argv = append(argv, g.waiterID(), g.pick("0", "1"))
		}
		return g.evalsha("rw_write.lua", keys, argv)
	case 16:
		rec := g.key(lk + ":leader")
		if g.chance(0.4) {
			return g.evalsha("leader_read.lua", []string{lk, rec}, nil)
		}
		return g.evalsha("leader_write.lua", []string{lk, rec}, []string{g.token(), g.fence(), g.pick("v1", "v 2", "")})
	case 15:
		if g.chance(0.3) {
			return g.evalsha("rw_read.lua", []string{w, wi, rr}, []string{g.token(), g.rwTTL(), "e"})
		}
		return g.evalsha("rw_read.lua", []string{w, wi, rr, wg}, []string{g.token(), g.rwTTL(), "a", g.pick("0", "1", "2", "abc")})
	}
	return g.evalsha("rw_unread.lua", []string{rr, w, wi}, []string{g.token()})
}

// command draws one command: mostly scripts, the rest the plain
// commands the library and its scripts use, valid or not; now and then
// the steps of a hand-off, in order.
func (g *gen) command() []string {
	if len(g.next) > 0 {
		cmd := g.next[0]
		g.next = g.next[1:]
		return cmd
	}
	lk := g.lock()
	q := g.key(lk + ":waiters")
	if g.chance(0.03) {
		// A holder takes the key, a waiter (or two) asks to be handed
		// it, and the holder releases it, handing it on.
		tok, next := g.token(), g.token()
		first := []string{"ZADD", q, "NX", g.score(), g.waiterID() + " 30000 " + next}
		if g.chance(0.7) {
			first = g.join(q, g.waiterID()+" 30000 "+next)
		}
		g.next = append(g.next, first,
			g.evalsha("release.lua", []string{lk, q}, []string{tok, g.pick("", g.member()), "h", g.life()}))
		if g.chance(0.3) {
			second := []string{"ZADD", q, "NX", g.score(), g.member()}
			if g.chance(0.7) {
				second = g.join(q, g.member())
			}
			g.next = slices.Insert(g.next, 1, second)
		}
		return []string{"SET", lk, tok, "NX", "PX", g.ttl()}
	}
	switch x := g.r.IntN(100); {
	case x < 45:
		return g.script()
	case x < 53:
		return []string{"SET", lk, g.token(), "NX", "PX", g.ttl()}
	case x < 56:
		cmd := []string{"SET", g.key(g.pick(lk, semMeta, rwStem+"wg")), g.pick("t1", "t2", "3")}
		for range g.r.IntN(4) {
			switch g.r.IntN(8) {
			case 0:
				cmd = append(cmd, "NX")
			case 1:
				cmd = append(cmd, "XX")
			case 2:
				cmd = append(cmd, "GET")
			case 3:
				cmd = append(cmd, "KEEPTTL")
			case 4:
				cmd = append(cmd, "PX", g.ttl())
			case 5:
				cmd = append(cmd, "EX", g.pick("30", "0", "x"))
			case 6:
				cmd = append(cmd, "px")
			default:
				cmd = append(cmd, g.pick("nx", "FOO"))
			}
		}
		return cmd
	case x < 58:
		return []string{"GET", lk}
	case x < 60:
		return []string{"DEL", lk, g.lock()}
	case x < 61:
		return []string{"EXISTS", lk, lk, g.lock()}
	case x < 63:
		return []string{"PTTL", lk}
	case x < 64:
		return []string{"PEXPIRE", lk, g.ttl()}
	case x < 66:
		cmd := []string{"HSET", g.key(lk + ":fence"), "fence", g.fence()}
		if g.chance(0.5) {
			cmd = append(cmd, "owner", g.token())
		}
		return cmd
	case x < 67:
		return []string{"HGET", g.key(lk + ":fence"), g.pick("fence", "owner")}
	case x < 72:
		cmd := []string{"ZADD", q}
		if g.chance(0.8) {
			cmd = append(cmd, "NX")
		} else {
			for range g.r.IntN(3) {
				cmd = append(cmd, g.pick("NX", "XX", "GT", "LT", "CH"))
			}
		}
		cmd = append(cmd, g.score(), g.member())
		if g.chance(0.1) {
			cmd = append(cmd, g.score(), g.member())
		}
		return cmd
	case x < 74:
		return []string{"ZREM", q, g.member()}
	case x < 76:
		return []string{"ZRANK", q, g.member()}
	case x < 77:
		return []string{"ZSCORE", g.key(g.pick(q, rwStem+"r")), g.pick(g.member(), g.token())}
	case x < 78:
		return []string{"ZCARD", q}
	case x < 80:
		return []string{"ZRANGE", g.key(g.pick(q, rwStem+"r")), "0", "-1", "WITHSCORES"}
	case x < 81:
		return []string{"ZPOPMIN", q}
	case x < 82:
		return []string{"ZCOUNT", q, g.pick("-inf", "(1", "3", "abc", ""), g.pick("+inf", "(5", "5")}
	case x < 83:
		return []string{"PUBLISH", g.pick(channels()...), g.pick("m1", "m2")}
	case x < 84:
		if g.chance(0.5) {
			// The test's subscriber leaves or joins a waiters' channel
			// on both sides (not a command: do handles it).
			return []string{g.pick("~UNSUBSCRIBE", "~SUBSCRIBE"), g.pick(waiterChannels()...)}
		}
		return []string{"PUBSUB", "NUMSUB", g.pick(channels()...), lk + ":w:L9"}
	case x < 85:
		if g.chance(0.2) {
			return []string{"SCRIPT", "FLUSH"} // NOSCRIPT until loaded again
		}
		return []string{"ZADD", q, "NX", g.score(), g.waiterID() + " 30000 " + g.pick("t1", "t2")}
	case x < 90:
		names := make([]string, 0, len(g.shas))
		for n := range g.shas {
			names = append(names, n)
		}
		slices.Sort(names)
		return []string{"SCRIPT", "LOAD", g.pick(names...)} // the name: run replaces it with the source
	case x < 92:
		return []string{"PING"}
	case x < 93:
		return []string{"HMGET", g.key(resource), "value", "fence", "owner"}
	case x < 94:
		return []string{"TYPE", g.pick(g.keys...)}
	case x < 95:
		// EVAL with the source, as go-redis falls back to it.
		cmd := g.script()
		cmd[0] = "EVAL" // run replaces the SHA1 with the source
		return cmd
	}
	return g.script()
}

// differ runs commands against both sides and compares.
type differ struct {
	t       *testing.T
	real    *respConn
	sub     *respConn
	m       *sim.Master
	srcs    map[string]string
	names   map[string]string // SHA1 -> script name
	seed    uint64
	history []string
	sent    int
	seen    map[string]int // "<command or script> <reply>" -> how often, for -v
	inbox   []string       // messages the subscriber read while waiting for another reply
}

// resubscribe subscribes the real subscriber and the simulated one to
// every channel of channels() again.
func (d *differ) resubscribe() {
	d.t.Helper()
	for _, ch := range channels() {
		d.subscription("~SUBSCRIBE", ch)
	}
}

// subscription makes the test's subscriber join or leave channel on both
// sides, and waits for the real server's confirmation.
func (d *differ) subscription(op, channel string) {
	d.t.Helper()
	verb := strings.ToLower(strings.TrimPrefix(op, "~"))
	if verb == "subscribe" {
		d.m.Subscribe(subscriberConn, channel)
	} else {
		d.m.Unsubscribe(subscriberConn, channel)
	}
	if err := d.sub.send(strings.ToUpper(verb), channel); err != nil {
		d.t.Fatal(err)
	}
	for {
		r, err := d.sub.read()
		if err != nil || r.Kind != sim.Array || len(r.Array) < 3 {
			d.t.Fatalf("subscriber: %s, %v", r, err)
		}
		switch r.Array[0].Text {
		case "message":
			d.inbox = append(d.inbox, r.Array[1].Text+" "+r.Array[2].Text)
		case verb:
			return
		}
	}
}

func (d *differ) fail(format string, args ...any) {
	d.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "differential test: seed %d: ", d.seed)
	fmt.Fprintf(&b, format, args...)
	b.WriteString("\ncommands of the sequence, in order:\n")
	for i, h := range d.history {
		fmt.Fprintf(&b, "  %3d %s\n", i, h)
	}
	d.t.Fatal(b.String())
}

// do sends cmd to the real server and the simulated master, and fails
// the test when their replies differ.
func (d *differ) do(cmd []string) {
	d.t.Helper()
	if strings.HasPrefix(cmd[0], "~") {
		d.subscription(cmd[0], cmd[1])
		d.history = append(d.history, fmt.Sprintf("(the subscriber: %s %s)", cmd[0][1:], cmd[1]))
		return
	}
	show := slices.Clone(cmd)
	if len(cmd) == 3 && cmd[0] == "SCRIPT" && cmd[1] == "LOAD" {
		cmd[2] = d.srcs[cmd[2]]
	}
	switch cmd[0] {
	case "EVALSHA":
		show[1] = d.names[cmd[1]]
	case "EVAL":
		show[1] = d.names[cmd[1]]
		cmd[1] = d.srcs[d.names[cmd[1]]]
	}
	now := time.Duration(time.Now().UnixNano())
	want, err := d.real.do(cmd...)
	if err != nil {
		d.t.Fatalf("real server: %v", err)
	}
	got := d.m.Do(now, cmd)
	d.sent++
	if d.seen != nil {
		what := strings.ToUpper(show[0])
		if what == "EVALSHA" {
			what = show[1]
		}
		r := want.String()
		if want.Kind == sim.Int && want.Int > 1000 {
			r = "(integer) >1000"
		}
		if want.Kind == sim.Bulk && len(r) > 12 {
			r = "bulk"
		}
		d.seen[what+" "+errClass(r)]++
	}
	line := fmt.Sprintf("%q -> real %s", show, want)
	if !sameReply(kindOf(show), want, got) {
		d.history = append(d.history, line)
		d.fail("%q: real server %s, simulated master %s", show, want, got)
	}
	d.history = append(d.history, line)
}

// kindOf names the reply's tolerance (show names a script by its file):
// PTTL-like replies may differ by the clocks' difference.
func kindOf(show []string) string {
	switch strings.ToUpper(show[0]) {
	case "PTTL":
		return "pttl"
	case "EVALSHA", "EVAL":
		switch show[1] {
		case "probe_mine.lua":
			return "pttl"
		case "adopt.lua":
			return "adopt"
		case "leader_read.lua":
			return "leader"
		}
	}
	return ""
}

var scriptSuffix = regexp.MustCompile(` script: [0-9a-f]{40}, on @user_script:\d+\.$`)
var luaRuntime = regexp.MustCompile(`^ERR user_script:\d*:? ?`)

// errClass is an error reply as compared: the server's suffix naming the
// script and line cut; a Lua runtime error reduced to its class, as the
// models do not track line numbers.
func errClass(s string) string {
	s = scriptSuffix.ReplaceAllString(s, "")
	if luaRuntime.MatchString(s) {
		return "ERR user_script (a Lua runtime error)"
	}
	return s
}

func sameReply(kind string, want, got sim.Reply) bool {
	if want.Kind != got.Kind {
		return false
	}
	switch want.Kind {
	case sim.Error:
		return errClass(want.Text) == errClass(got.Text)
	case sim.Int:
		if kind == "pttl" && want.Int >= 0 && got.Int >= 0 {
			return abs(want.Int-got.Int) <= tolerance
		}
		return want.Int == got.Int
	case sim.Bulk, sim.Status:
		if kind == "adopt" {
			w, wrest, _ := strings.Cut(want.Text, " ")
			g, grest, _ := strings.Cut(got.Text, " ")
			wn, err1 := strconv.ParseInt(w, 10, 64)
			gn, err2 := strconv.ParseInt(g, 10, 64)
			return err1 == nil && err2 == nil && abs(wn-gn) <= tolerance && wrest == grest
		}
		if kind == "leader" {
			// "<state> <pttl> <rest>": the PTTL within the tolerance.
			wf, gf := strings.SplitN(want.Text, " ", 3), strings.SplitN(got.Text, " ", 3)
			if len(wf) != len(gf) || wf[0] != gf[0] || len(wf) == 1 {
				return len(wf) == len(gf) && want.Text == got.Text
			}
			wn, err1 := strconv.ParseInt(wf[1], 10, 64)
			gn, err2 := strconv.ParseInt(gf[1], 10, 64)
			same := err1 == nil && err2 == nil && (wn == gn || wn >= 0 && gn >= 0 && abs(wn-gn) <= tolerance)
			return same && (len(wf) == 2 || wf[2] == gf[2])
		}
		return sameText(want.Text, got.Text)
	case sim.Array:
		if len(want.Array) != len(got.Array) {
			return false
		}
		w, g := texts(want.Array), texts(got.Array)
		if w != nil && g != nil {
			return samePairs(w, g)
		}
		for i := range want.Array {
			if !sameReply(kind, want.Array[i], got.Array[i]) {
				return false
			}
		}
	}
	return true
}

// texts returns the bulk strings of an array of them, or nil.
func texts(rs []sim.Reply) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		if r.Kind != sim.Bulk {
			return nil
		}
		out[i] = r.Text
	}
	return out
}

// samePairs compares two lists (of members and scores, when a sorted
// set's): in order; or where the scores are times (a reader's expiry,
// from each side's own clock), which may order members differently, as
// pairs by member.
func samePairs(w, g []string) bool {
	if len(w) != len(g) {
		return false
	}
	inOrder := true
	for i := range w {
		inOrder = inOrder && sameText(w[i], g[i])
	}
	if inOrder || len(w)%2 != 0 {
		return inOrder
	}
	byMember := func(l []string) map[string]string {
		out := map[string]string{}
		for i := 0; i+1 < len(l); i += 2 {
			if s, err := strconv.ParseFloat(l[i+1], 64); err != nil || s < 1e12 {
				return nil // not times: the order must be the same
			}
			out[l[i]] = l[i+1]
		}
		return out
	}
	wm, gm := byMember(w), byMember(g)
	if wm == nil || gm == nil || len(wm) != len(gm) {
		return false
	}
	for k, v := range wm {
		if gv, ok := gm[k]; !ok || !sameText(v, gv) {
			return false
		}
	}
	return true
}

// sameText compares two strings, numbers of the size of a time in
// milliseconds (a reader's expiry score) within the tolerance, and of
// the size of a time in µs (a queue member's score, join.lua) within the
// tolerance in µs.
func sameText(a, b string) bool {
	if a == b {
		return true
	}
	x, err1 := strconv.ParseFloat(a, 64)
	y, err2 := strconv.ParseFloat(b, 64)
	if err1 != nil || err2 != nil || x <= 1e12 || y <= 1e12 {
		return false
	}
	if x > 1e14 && y > 1e14 {
		return math.Abs(x-y) <= tolerance*1000
	}
	return math.Abs(x-y) <= tolerance
}

func abs(n int64) int64 { return max(n, -n) }

// compareState compares the whole keyspace: every key, its type, PTTL and
// value.
func (d *differ) compareState() {
	d.t.Helper()
	now := time.Duration(time.Now().UnixNano())
	want := d.realDump()
	got := d.m.Dump(now)
	wk, gk := dumpKeys(want), dumpKeys(got)
	if !slices.Equal(wk, gk) {
		d.fail("keys differ after the sequence: real %q, simulated %q", wk, gk)
	}
	for i := range want {
		w, g := want[i], got[i]
		ttlOK := w.PTTL == g.PTTL || w.PTTL >= 0 && g.PTTL >= 0 && abs(w.PTTL-g.PTTL) <= tolerance
		same := w.Type == g.Type && ttlOK && samePairs(w.Value, g.Value)
		if !same {
			d.fail("key %q differs after the sequence: real %+v, simulated %+v", w.Key, w, g)
		}
	}
	// Every message the simulated master published to the channels the
	// test listens to, the real subscriber got too, in order.
	var sent []string
	d.m.Drain(func(msg sim.Message, to []sim.Conn) {
		if len(to) > 0 {
			sent = append(sent, msg.Channel+" "+msg.Payload)
		}
	})
	got2 := d.received()
	if !slices.Equal(sent, got2) {
		d.fail("published messages differ: real %q, simulated %q", got2, sent)
	}
}

func dumpKeys(ds []sim.KeyDump) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Key
	}
	return out
}

func (d *differ) realCmd(args ...string) sim.Reply {
	d.t.Helper()
	r, err := d.real.do(args...)
	if err != nil || r.Kind == sim.Error {
		d.t.Fatalf("real server %q: %v %s", args, err, r)
	}
	return r
}

// realDump reads the real server's keyspace as Dump shows the simulated
// one.
func (d *differ) realDump() []sim.KeyDump {
	d.t.Helper()
	var keys []string
	for _, k := range d.realCmd("KEYS", "*").Array {
		keys = append(keys, k.Text)
	}
	slices.Sort(keys)
	var out []sim.KeyDump
	for _, k := range keys {
		kd := sim.KeyDump{Key: k, Type: d.realCmd("TYPE", k).Text, PTTL: d.realCmd("PTTL", k).Int}
		switch kd.Type {
		case "string":
			kd.Value = []string{d.realCmd("GET", k).Text}
		case "hash":
			all := d.realCmd("HGETALL", k).Array
			type fv struct{ f, v string }
			var pairs []fv
			for i := 0; i+1 < len(all); i += 2 {
				pairs = append(pairs, fv{all[i].Text, all[i+1].Text})
			}
			slices.SortFunc(pairs, func(a, b fv) int { return strings.Compare(a.f, b.f) })
			for _, p := range pairs {
				kd.Value = append(kd.Value, p.f, p.v)
			}
		case "zset":
			for _, e := range d.realCmd("ZRANGE", k, "0", "-1", "WITHSCORES").Array {
				kd.Value = append(kd.Value, e.Text)
			}
		}
		out = append(out, kd)
	}
	return out
}

// received reads the real subscriber's messages up to the reply to a
// PING sent now: everything published before it.
func (d *differ) received() []string {
	d.t.Helper()
	if err := d.sub.send("PING"); err != nil {
		d.t.Fatal(err)
	}
	out := d.inbox
	d.inbox = nil
	for {
		r, err := d.sub.read()
		if err != nil {
			d.t.Fatalf("subscriber: %v", err)
		}
		if r.Kind != sim.Array || len(r.Array) == 0 {
			d.t.Fatalf("subscriber: unexpected %s", r)
		}
		switch r.Array[0].Text {
		case "pong":
			return out
		case "message":
			out = append(out, r.Array[1].Text+" "+r.Array[2].Text)
		}
	}
}

// startReal starts one real redis-server and opens the test's two
// connections to it: one for commands, one subscribed to channels().
func startReal(t *testing.T) (*respConn, *respConn) {
	t.Helper()
	ms := lab.ForTest(t, 1, &lab.Options{Backend: lab.Process})
	addr := ms.Addrs()[0]
	real, err := dialRESP(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(real.close)
	sub, err := dialRESP(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.close)
	chans := channels()
	if err := sub.send(append([]string{"SUBSCRIBE"}, chans...)...); err != nil {
		t.Fatal(err)
	}
	for range chans {
		if _, err := sub.read(); err != nil {
			t.Fatal(err)
		}
	}
	return real, sub
}

// subscriberConn is the simulated side's stand-in for the real
// subscriber connection.
const subscriberConn sim.Conn = 1

// scriptIndex is each script's file name by SHA1 (names) and SHA1 by file
// name (shas).
func scriptIndex(scripts *sim.Scripts) (names, shas map[string]string) {
	names, shas = map[string]string{}, map[string]string{}
	for _, n := range scripts.Names() {
		names[scripts.SHA(n)] = n
		shas[n] = scripts.SHA(n)
	}
	return names, shas
}

// TestDifferential sends generated command sequences, scripts included,
// to a real redis-server and to a simulated master, and requires the same
// reply to every command, the same keyspace after each sequence, and the
// same messages published to the subscribed channels.
func TestDifferential(t *testing.T) {
	srcs, scripts := loadScripts(t)
	real, sub := startReal(t)
	names, shas := scriptIndex(scripts)
	first := *diffSeed
	if first == 0 {
		first = uint64(time.Now().UnixNano())
	}
	t.Logf("first seed %d (-sim.seed replays)", first)
	start := time.Now()
	total := 0
	seen := map[string]int{}
	for s := range *diffSeqs {
		seed := first + uint64(s)
		m := sim.New("diff", scripts)
		d := &differ{t: t, real: real, sub: sub, m: m, srcs: srcs, names: names, seed: seed, seen: seen}
		d.realCmd("FLUSHALL")
		d.realCmd("SCRIPT", "FLUSH")
		d.resubscribe()
		g := &gen{r: rand.New(rand.NewPCG(seed, seed^0x5eed)), shas: shas, keys: allKeys()}
		// Most sequences start with every script loaded, as a
		// connection of the library's does.
		if g.chance(0.9) {
			for _, n := range scripts.Names() {
				d.do([]string{"SCRIPT", "LOAD", n})
			}
		}
		for range *diffLen {
			d.do(g.command())
		}
		d.compareState()
		total += d.sent
	}
	t.Logf("%d sequences, %d commands compared in %v", *diffSeqs, total, time.Since(start).Round(time.Millisecond))
	if testing.Verbose() {
		outcomes := make([]string, 0, len(seen))
		for k := range seen {
			outcomes = append(outcomes, k)
		}
		slices.Sort(outcomes)
		for _, k := range outcomes {
			t.Logf("%6d %s", seen[k], k)
		}
	}
}

// TestDifferentialExpiry holds the expiry of keys against the real server
// on real time: keys given a PEXPIRE of 1 ms are gone on both sides once
// the real server no longer has them, for every command that reads them.
func TestDifferentialExpiry(t *testing.T) {
	srcs, scripts := loadScripts(t)
	real, sub := startReal(t)
	names, shas := scriptIndex(scripts)
	for s := range 20 {
		seed := uint64(1000 + s)
		m := sim.New("expiry", scripts)
		d := &differ{t: t, real: real, sub: sub, m: m, srcs: srcs, names: names, seed: seed}
		d.realCmd("FLUSHALL")
		d.resubscribe()
		g := &gen{r: rand.New(rand.NewPCG(seed, 7)), shas: shas, keys: allKeys()}
		for _, n := range scripts.Names() {
			d.do([]string{"SCRIPT", "LOAD", n})
		}
		for range 30 {
			d.do(g.command())
		}
		// Expire a random half of the keys; wait on the real server.
		var expiring []string
		for _, k := range allKeys() {
			if g.chance(0.5) {
				d.do([]string{"PEXPIRE", k, "1"})
				expiring = append(expiring, k)
			}
		}
		deadline := time.Now().Add(5 * time.Second)
		for _, k := range expiring {
			for d.realCmd("PTTL", k).Int != -2 {
				if time.Now().After(deadline) {
					t.Fatalf("key %q did not expire on the real server", k)
				}
				time.Sleep(time.Millisecond)
			}
		}
		for range 30 {
			d.do(g.command())
		}
		d.compareState()
	}
}

// boundaryScript sets a key to expire at the real server's own current
// millisecond plus ARGV[1] (PXAT), and reads it back in the same script:
// the exact millisecond of an expiry, which real time outside a script
// cannot pin. It also returns how far into its millisecond the script
// read TIME, and whether the millisecond changed before it ended.
const boundaryScript = `local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('SET', KEYS[1], 'v', 'PXAT', ms + tonumber(ARGV[1]))
local r = {redis.call('EXISTS', KEYS[1]), redis.call('PTTL', KEYS[1])}
local u = redis.call('TIME')
local ms2 = tonumber(u[1]) * 1000 + math.floor(tonumber(u[2]) / 1000)
return {r[1], r[2], tonumber(t[2]) % 1000, ms2 - ms}`

// TestDifferentialExpiryBoundary holds the millisecond at which a key
// expires against the real server: a key whose expiry is now is still
// there with a PTTL of 0; one whose expiry was a millisecond ago is gone.
// A sample counts only when the script ran inside one millisecond, well
// after its start (the server's clock for expiry is read when the script
// starts).
func TestDifferentialExpiryBoundary(t *testing.T) {
	real, _ := startReal(t)
	m := sim.New("boundary", nil)
	for _, offset := range []int64{-1, 0, 1} {
		samples := 0
		for try := 0; samples < 20; try++ {
			if try == 2000 {
				t.Fatalf("offset %d: only %d clean samples in %d tries", offset, samples, try)
			}
			r, err := real.do("EVAL", boundaryScript, "1", "k", strconv.FormatInt(offset, 10))
			if err != nil || r.Kind != sim.Array || len(r.Array) != 4 {
				t.Fatalf("boundary script: %s, %v", r, err)
			}
			if r.Array[2].Int < 200 || r.Array[3].Int != 0 {
				continue
			}
			samples++
			want := sim.Reply{Kind: sim.Array, Array: r.Array[:2]}
			now := time.Duration(time.Now().UnixNano())
			ms := now.Milliseconds()
			m.Do(now, []string{"SET", "k", "v", "PXAT", strconv.FormatInt(ms+offset, 10)})
			got := sim.Reply{Kind: sim.Array, Array: []sim.Reply{m.Do(now, []string{"EXISTS", "k"}), m.Do(now, []string{"PTTL", "k"})}}
			if want.String() != got.String() {
				t.Fatalf("a key expiring %d ms from now: real server %s, simulated master %s", offset, want, got)
			}
		}
	}
}
