package sim_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/quorumlab/redlock/internal/sim"
)

// batch is how many keys a benchmark prepares while its timer is
// stopped, so that stopping it costs little per operation.
const batch = 4096

// BenchmarkSetNXPX is one acquisition on one master: SET key token NX PX
// ttl on a key that is free.
func BenchmarkSetNXPX(b *testing.B) {
	m := sim.New("bench", nil)
	cmds := make([][]string, batch)
	for i := range cmds {
		cmds[i] = []string{"SET", "{res" + strconv.Itoa(i) + "}", "token-0123456789abcdef", "NX", "PX", "30000"}
	}
	now := at(0)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i == batch {
			b.StopTimer()
			m.Do(now, []string{"FLUSHALL"})
			i = 0
			b.StartTimer()
		}
		if r := m.Do(now, cmds[i]); r.Kind != sim.Status {
			b.Fatal(r)
		}
		i++
	}
}

// BenchmarkRelease is one release on one master: EVALSHA release.lua
// with the key's queue, as a Locker sends it, on a key that holds the
// token and an empty queue: GET, DEL, PUBLISH of the token's SHA-1.
func BenchmarkRelease(b *testing.B) {
	srcs, scripts := loadScripts(b)
	m := sim.New("bench", scripts)
	m.Do(at(0), []string{"SCRIPT", "LOAD", srcs["release.lua"]})
	sha := scripts.SHA("release.lua")
	sets := make([][]string, batch)
	cmds := make([][]string, batch)
	for i := range cmds {
		key := "{res" + strconv.Itoa(i) + "}"
		sets[i] = []string{"SET", key, "token-0123456789abcdef", "NX", "PX", "30000"}
		cmds[i] = []string{"EVALSHA", sha, "2", key, key + ":waiters", "token-0123456789abcdef"}
	}
	now := at(0)
	fill := func() {
		m.Drain(func(sim.Message, []sim.Conn) {})
		for _, s := range sets {
			m.Do(now, s)
		}
	}
	fill()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i == batch {
			b.StopTimer()
			fill()
			i = 0
			b.StartTimer()
		}
		if r := m.Do(now, cmds[i]); r.Kind != sim.Int || r.Int != 1 {
			b.Fatal(r)
		}
		i++
	}
}

// BenchmarkSection is one uncontended critical section on five masters,
// as the simulator will drive it: a SET NX PX and a release on each, the
// clock moving on.
func BenchmarkSection(b *testing.B) {
	srcs, scripts := loadScripts(b)
	var ms []*sim.Master
	for i := range 5 {
		m := sim.New("m"+strconv.Itoa(i), scripts)
		m.Do(at(0), []string{"SCRIPT", "LOAD", srcs["release.lua"]})
		ms = append(ms, m)
	}
	sha := scripts.SHA("release.lua")
	set := []string{"SET", "{res}", "token-0123456789abcdef", "NX", "PX", "30000"}
	rel := []string{"EVALSHA", sha, "2", "{res}", "{res}:waiters", "token-0123456789abcdef"}
	now := at(0)
	b.ReportAllocs()
	for b.Loop() {
		for _, m := range ms {
			if r := m.Do(now, set); r.Kind != sim.Status {
				b.Fatal(r)
			}
		}
		now += time.Millisecond
		for _, m := range ms {
			if r := m.Do(now, rel); r.Int != 1 {
				b.Fatal(r)
			}
			m.Drain(func(sim.Message, []sim.Conn) {})
		}
	}
}

// BenchmarkHandOff is the contended path on one master: a waiter joins
// the queue asking to be handed the key (ZADD NX), and the holder's
// release hands it over (ZPOPMIN, PUBSUB NUMSUB, SET PX, PUBLISH of the
// grant); the two tokens take turns.
func BenchmarkHandOff(b *testing.B) {
	srcs, scripts := loadScripts(b)
	m := sim.New("bench", scripts)
	m.Do(at(0), []string{"SCRIPT", "LOAD", srcs["release.lua"]})
	m.Subscribe(1, "{res}:w:L1")
	sha := scripts.SHA("release.lua")
	toks := []string{"token-A-0123456789abc", "token-B-0123456789abc"}
	var joins, rels [2][]string
	for i, tok := range toks {
		joins[i] = []string{"ZADD", "{res}:waiters", "NX", "1", "L1." + strconv.Itoa(i) + " 30000 " + toks[1-i]}
		rels[i] = []string{"EVALSHA", sha, "2", "{res}", "{res}:waiters", tok, "", "h"}
	}
	now := at(0)
	m.Do(now, []string{"SET", "{res}", toks[0], "NX", "PX", "30000"})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if r := m.Do(now, joins[i]); r.Int != 1 {
			b.Fatal(r)
		}
		if r := m.Do(now, rels[i]); r.Int != 3 {
			b.Fatal(r)
		}
		m.Drain(func(sim.Message, []sim.Conn) {})
		i = 1 - i
	}
}
