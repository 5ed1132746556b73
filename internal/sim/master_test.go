package sim_test

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/quorumlab/redlock/internal/sim"
)

// at is a point on a master's clock: a fixed day plus d.
func at(d time.Duration) time.Duration { return 1_800_000_000*time.Second + d }

func do(t *testing.T, m *sim.Master, now time.Duration, args ...string) sim.Reply {
	t.Helper()
	return m.Do(now, args)
}

func wantReply(t *testing.T, got sim.Reply, want string) {
	t.Helper()
	if got.String() != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

// A key set with PX d is still there at exactly d, with a PTTL of 0, and
// gone one millisecond later (Redis: expired when now > when); time
// below a millisecond does not count.
func TestExpiryOnTheMastersClock(t *testing.T) {
	m := sim.New("m", nil)
	wantReply(t, do(t, m, at(0), "SET", "k", "v", "NX", "PX", "100"), "+OK")
	wantReply(t, do(t, m, at(40*time.Millisecond+900*time.Microsecond), "PTTL", "k"), "(integer) 60")
	wantReply(t, do(t, m, at(100*time.Millisecond+999*time.Microsecond), "PTTL", "k"), "(integer) 0")
	wantReply(t, do(t, m, at(100*time.Millisecond), "SET", "k", "w", "NX", "PX", "100"), "(nil)")
	if keys := m.Keys(at(100 * time.Millisecond)); !slices.Equal(keys, []string{"k"}) {
		t.Fatalf("Keys at the expiry: %q", keys)
	}
	if keys := m.Keys(at(101 * time.Millisecond)); len(keys) != 0 {
		t.Fatalf("Keys past the expiry: %q", keys)
	}
	wantReply(t, do(t, m, at(101*time.Millisecond), "GET", "k"), "(nil)")
	wantReply(t, do(t, m, at(101*time.Millisecond), "PTTL", "k"), "(integer) -2")
	// PEXPIRE to now or before deletes the key at once.
	wantReply(t, do(t, m, at(time.Second), "SET", "k", "v"), "+OK")
	wantReply(t, do(t, m, at(time.Second), "PEXPIRE", "k", "0"), "(integer) 1")
	wantReply(t, do(t, m, at(time.Second), "EXISTS", "k"), "(integer) 0")
}

// A restart empties the script cache (EVALSHA answers NOSCRIPT until the
// script is loaded again), ends the subscriptions, changes the run_id, and
// keeps the keyspace or not.
func TestRestart(t *testing.T) {
	_, scripts := loadScripts(t)
	srcs, _ := sim.ReadScripts(scriptsDir)
	m := sim.New("m", scripts)
	sha := do(t, m, at(0), "SCRIPT", "LOAD", srcs["release.lua"]).Text
	if sha != scripts.SHA("release.lua") {
		t.Fatalf("SCRIPT LOAD answered %s, want %s", sha, scripts.SHA("release.lua"))
	}
	do(t, m, at(0), "SET", "k", "tok", "NX", "PX", "10000")
	m.Subscribe(7, "k")
	run := m.RunID()
	m.Restart(true)
	if m.RunID() == run {
		t.Error("the run_id did not change")
	}
	if n := m.Subscribers("k"); n != 0 {
		t.Errorf("%d subscribers after a restart", n)
	}
	wantReply(t, do(t, m, at(1), "EVALSHA", sha, "1", "k", "tok"), "-NOSCRIPT No matching script. Please use EVAL.")
	wantReply(t, do(t, m, at(1), "GET", "k"), `"tok"`)
	do(t, m, at(1), "SCRIPT", "LOAD", srcs["release.lua"])
	wantReply(t, do(t, m, at(1), "EVALSHA", sha, "1", "k", "tok"), "(integer) 1")
	do(t, m, at(2), "SET", "k", "tok")
	m.Restart(false)
	wantReply(t, do(t, m, at(2), "GET", "k"), "(nil)")
}

// A script loaded with no model fails loudly.
func TestScriptWithoutModel(t *testing.T) {
	_, scripts := loadScripts(t)
	m := sim.New("m", scripts)
	sha := do(t, m, at(0), "SCRIPT", "LOAD", "return 1").Text
	got := do(t, m, at(0), "EVALSHA", sha, "0")
	if got.Kind != sim.Error {
		t.Fatalf("EVALSHA of a script without a model: %s", got)
	}
	if _, err := sim.NewScripts(map[string]string{"new.lua": "return 1"}); err == nil {
		t.Error("NewScripts bound a script it has no model for")
	}
}

// Members of a sorted set with equal scores come in bytewise order,
// whatever the order they were added in, as in Redis.
func TestSortedSetOrder(t *testing.T) {
	m := sim.New("m", nil)
	do(t, m, at(0), "ZADD", "q", "1", "b", "1", "ab", "0", "z", "1", "a", "1", "B")
	wantReply(t, do(t, m, at(0), "ZRANGE", "q", "0", "-1", "WITHSCORES"),
		`["z", "0", "B", "1", "a", "1", "ab", "1", "b", "1"]`)
	wantReply(t, do(t, m, at(0), "ZRANK", "q", "ab"), "(integer) 3")
	wantReply(t, do(t, m, at(0), "ZADD", "q", "NX", "5", "ab"), "(integer) 0")
	wantReply(t, do(t, m, at(0), "ZPOPMIN", "q"), `["z", "0"]`)
}

// PUBLISH counts the subscribed connections and leaves the message in
// the outbox, with them, for the simulator to deliver.
func TestPublish(t *testing.T) {
	m := sim.New("m", nil)
	m.Subscribe(2, "ch", "other")
	m.Subscribe(1, "ch")
	wantReply(t, do(t, m, at(0), "PUBLISH", "ch", "hello"), "(integer) 2")
	wantReply(t, do(t, m, at(0), "PUBSUB", "NUMSUB", "ch", "none"), `["ch", (integer) 2, "none", (integer) 0]`)
	m.Disconnect(2)
	m.Subscribe(3, "ch")
	m.Unsubscribe(3, "ch")
	wantReply(t, do(t, m, at(0), "PUBLISH", "ch", "again"), "(integer) 1")
	wantReply(t, do(t, m, at(0), "PUBLISH", "none", "lost"), "(integer) 0")
	var got []string
	m.Drain(func(msg sim.Message, to []sim.Conn) {
		got = append(got, fmt.Sprintf("%s %s %v", msg.Channel, msg.Payload, to))
	})
	want := []string{"ch hello [1 2]", "ch again [1]", "none lost []"}
	if !slices.Equal(got, want) {
		t.Fatalf("outbox %q, want %q", got, want)
	}
	if m.Pending() != 0 {
		t.Fatal("Drain left messages")
	}
}

// Dump is the same for the same history, whatever Go's map order: a hash
// by field, a sorted set in its order, keys sorted.
func TestDumpIsDeterministic(t *testing.T) {
	dump := func() string {
		m := sim.New("m", nil)
		for i := range 50 {
			do(t, m, at(0), "HSET", "h", "f"+strconv.Itoa(i), "v")
			do(t, m, at(0), "SET", "k"+strconv.Itoa(i), "v", "PX", "1000")
		}
		return fmt.Sprint(m.Dump(at(10 * time.Millisecond)))
	}
	first := dump()
	for range 5 {
		if d := dump(); d != first {
			t.Fatalf("two dumps of one history differ:\n%s\n%s", first, d)
		}
	}
}

// ExampleMaster takes a lock key as the library does, and releases it
// with the library's own release.lua, run by its model.
func ExampleMaster() {
	srcs, err := sim.ReadScripts("../../redlock/scripts")
	if err != nil {
		panic(err)
	}
	scripts, err := sim.NewScripts(srcs)
	if err != nil {
		panic(err)
	}
	m := sim.New("master-0", scripts)
	now := 1_800_000_000 * time.Second
	m.Subscribe(1, "lock")
	fmt.Println(m.Do(now, []string{"SCRIPT", "LOAD", srcs["release.lua"]}).Text == scripts.SHA("release.lua"))
	fmt.Println(m.Do(now, []string{"SET", "lock", "token", "NX", "PX", "30000"}))
	fmt.Println(m.Do(now+time.Second, []string{"PTTL", "lock"}))
	fmt.Println(m.Do(now+time.Second, []string{"EVALSHA", scripts.SHA("release.lua"), "1", "lock", "token"}))
	m.Drain(func(msg sim.Message, to []sim.Conn) { fmt.Println(msg.Channel, msg.Payload, to) })
	// Output:
	// true
	// +OK
	// (integer) 29000
	// (integer) 1
	// lock ee977806d7286510da8b9a7492ba58e2484c0ecc [1]
}
