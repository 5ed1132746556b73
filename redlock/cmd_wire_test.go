package redlock

import (
	"bufio"
	"bytes"
	"fmt"
	"testing"
	"unsafe"

	"github.com/quorumlab/redlock/internal/transport"
	"github.com/quorumlab/redlock/quorum"
)

// TestCommandWire pins each command kind's bytes on the fast path: the
// arguments cmd.args lays out, as the RESP codec writes them (the same
// bytes the per-kind encoders wrote before issue 19).
func TestCommandWire(t *testing.T) {
	keys := []string{"{r}a", "{r}b"}
	ev := func(sc *script, rest ...string) []string { return append([]string{"EVALSHA", sc.sha}, rest...) }
	cases := []struct {
		c    cmd
		want []string
	}{
		{cmd{kind: cmdSetNX, key: "k", token: "t", n: 30000}, []string{"SET", "k", "t", "NX", "PX", "30000"}},
		{cmd{kind: cmdAcquireFenced, key: "k", token: "t", n: 30000}, ev(acquireFencedScript, "2", "k", "k:fence", "t", "30000")},
		{cmd{kind: cmdWriteback, key: "k", token: "t", n: 7}, ev(writebackScript, "2", "k", "k:fence", "t", "7")},
		{cmd{kind: cmdExtend, key: "k", token: "t", n: 30000}, ev(extendScript, "1", "k", "t", "30000")},
		{cmd{kind: cmdRelease, key: "k", token: "t"}, ev(releaseScript, "1", "k", "t")},
		{cmd{kind: cmdRelease, key: "k", token: "t", pop: releasePop}, ev(releaseScript, "2", "k", "k:waiters", "t")},
		{cmd{kind: cmdRelease, key: "k", token: "t", pop: releaseHand, pass: 3000, more: &cmdMore{waiter: "w"}}, ev(releaseScript, "2", "k", "k:waiters", "t", "w", "h", "3000")},
		{cmd{kind: cmdLoad, more: &cmdMore{script: releaseScript}}, []string{"SCRIPT", "LOAD", releaseScript.src}},
		{cmd{kind: cmdAcquireMulti, key: keys[0], token: "t", n: 30000, more: &cmdMore{keys: keys}}, ev(acquireMultiScript, "2", "{r}a", "{r}b", "t", "30000", "2", "0")},
		{cmd{kind: cmdAcquireMulti, key: keys[0], token: "t", n: 30000, fenced: true, more: &cmdMore{keys: keys}}, ev(acquireMultiScript, "4", "{r}a", "{r}b", "{r}a:fence", "{r}b:fence", "t", "30000", "2", "1")},
		{cmd{kind: cmdWritebackMulti, key: keys[0], token: "t", n: 9, more: &cmdMore{keys: keys}}, ev(writebackMultiScript, "4", "{r}a", "{r}b", "{r}a:fence", "{r}b:fence", "t", "9", "2")},
		{cmd{kind: cmdExtendMulti, key: keys[0], token: "t", n: 30000, more: &cmdMore{keys: keys}}, ev(extendMultiScript, "2", "{r}a", "{r}b", "t", "30000")},
		{cmd{kind: cmdReleaseMulti, key: keys[0], token: "t", more: &cmdMore{keys: keys}}, ev(releaseMultiScript, "2", "{r}a", "{r}b", "t")},
		{cmd{kind: cmdJoin, key: "k", token: "w", n: 12, pass: 3000, more: &cmdMore{wall: 1800000000000000, slack: 50000}}, ev(joinScript, "1", "k:waiters", "12", "w", "3000", "1800000000000000", "50000")},
		{cmd{kind: cmdLeave, key: "k", token: "w"}, []string{"ZREM", "k:waiters", "w"}},
		{cmd{kind: cmdProbe, key: "k"}, []string{"PTTL", "k"}},
		{cmd{kind: cmdRank, key: "k", token: "w"}, []string{"ZRANK", "k:waiters", "w"}},
		// The semaphore's and the read-write lock's (primitives.go).
		{cmd{kind: cmdSemAcquire, key: "{s}", token: "t", n: 30000, more: &cmdMore{keys: []string{"{s}:s:2", "{s}:s:1"}}},
			ev(semAcquireScript, "3", "{s}:meta", "{s}:s:2", "{s}:s:1", "t", "30000")},
		{cmd{kind: cmdSemHolders, key: "{s}", more: &cmdMore{keys: []string{"{s}:s:1", "{s}:s:2"}}}, ev(semHoldersScript, "2", "{s}:s:1", "{s}:s:2")},
		{cmd{kind: cmdSemExtend, key: "{s}:s:2", token: "t", n: 30000, pass: 3}, ev(semExtendScript, "2", "{s}:s:2", "{s}:meta", "t", "30000", "3")},
		{cmd{kind: cmdWrite, key: "{c}:w", token: "t", n: 30000}, ev(rwWriteScript, "5", "{c}:w", "{c}:w:fence", "{c}:wi", "{c}:r", "{c}:wg", "t", "30000", "0")},
		{cmd{kind: cmdWriteWait, key: "{c}:w", token: "t", n: 30000}, ev(rwWriteScript, "5", "{c}:w", "{c}:w:fence", "{c}:wi", "{c}:r", "{c}:wg", "t", "30000", "1")},
		{cmd{kind: cmdWriteWait, key: "{c}:w", token: "t", n: 30000, ask: true, more: &cmdMore{waiter: "L.1"}}, ev(rwWriteScript, "6", "{c}:w", "{c}:w:fence", "{c}:wi", "{c}:r", "{c}:wg", "{c}:w:waiters", "t", "30000", "1", "L.1", "1")},
		{cmd{kind: cmdWriteWait, key: "{c}:w", token: "t", n: 30000, more: &cmdMore{waiter: "L.1"}}, ev(rwWriteScript, "6", "{c}:w", "{c}:w:fence", "{c}:wi", "{c}:r", "{c}:wg", "{c}:w:waiters", "t", "30000", "1", "L.1", "0")},
		{cmd{kind: cmdRead, key: "{c}:r", token: "t", n: 30000, pass: 7}, ev(rwReadScript, "4", "{c}:w", "{c}:wi", "{c}:r", "{c}:wg", "t", "30000", "a", "7")},
		{cmd{kind: cmdReadExtend, key: "{c}:r", token: "t", n: 30000}, ev(rwReadScript, "3", "{c}:w", "{c}:wi", "{c}:r", "t", "30000", "e")},
		{cmd{kind: cmdUnread, key: "{c}:r", token: "t"}, ev(rwUnreadScript, "3", "{c}:r", "{c}:w", "{c}:wi", "t")},
	}
	for _, tc := range cases {
		var got, want bytes.Buffer
		bw := bufio.NewWriter(&got)
		transport.WriteRESP(bw, tc.c.args(nil))
		bw.Flush()
		fmt.Fprintf(&want, "*%d\r\n", len(tc.want))
		for _, a := range tc.want {
			fmt.Fprintf(&want, "$%d\r\n%s\r\n", len(a), a)
		}
		if got.String() != want.String() {
			t.Errorf("kind %d: wrote %q, want %q", tc.c.kind, got.String(), want.String())
		}
		// The plain path sends the same arguments.
		var plain []string
		for _, a := range tc.c.args(nil) {
			plain = append(plain, a.String())
		}
		if fmt.Sprint(plain) != fmt.Sprint(tc.want) {
			t.Errorf("kind %d: plain args %q, want %q", tc.c.kind, plain, tc.want)
		}
	}
}

// rw_write.lua's refusals: who refused, and for a round that asked its
// place, how far back in the queue; queuePlace reads that place as rank
// would (the majority's highest; 1 where the master did not say).
func TestWriterRefusalAndPlace(t *testing.T) {
	for _, tc := range []struct {
		ask  bool
		n    int64
		want uint64
	}{{false, -1, 1}, {false, -2, 2}, {true, -1, 1}, {true, -2, 2}, {true, -3, 3}, {true, -6, 6}} {
		c := cmd{kind: cmdWriteWait, ask: tc.ask, more: &cmdMore{waiter: "L.1"}}
		if r := c.interpret(respReply{Type: ':', N: tc.n}); r.Outcome != quorum.Refused || r.Value != tc.want {
			t.Errorf("ask %v, reply %d: %v value %d; want refused, %d", tc.ask, tc.n, r.Outcome, r.Value, tc.want)
		}
	}
	// A round that did not ask cannot be refused for its place.
	if r := (&cmd{kind: cmdWriteWait}).interpret(respReply{Type: ':', N: -3}); r.Outcome != quorum.Failed {
		t.Errorf("reply -3 to a round that did not ask: %v; want failed", r.Outcome)
	}
	asked := inQueue{id: "L.1", ask: true}
	for _, tc := range []struct {
		q    inQueue
		why  []uint64
		want uint64
	}{
		{inQueue{id: "L.1"}, []uint64{3, 3, 3}, 0},              // did not ask
		{asked, []uint64{3, 3, 3}, 2},                           // second everywhere
		{asked, []uint64{0, 3, 4}, 2},                           // the highest of the best majority (as rank)
		{asked, []uint64{0, 0, 3}, 1},                           // at the head on a majority
		{asked, []uint64{2, 1, 3}, 1},                           // readers or a writer decided first
		{asked, []uint64{whyNoAnswer, whyNoAnswer, 3}, 1},       // too few answered
		{asked, []uint64{3, whyNoAnswer, 5, whyNoAnswer, 4}, 4}, // 5 masters
	} {
		if got := queuePlace(tc.q, tc.why, 2+len(tc.why)/4); got != tc.want {
			t.Errorf("queuePlace(%+v, %v) = %d; want %d", tc.q, tc.why, got, tc.want)
		}
	}
}

// A round allocates one cmd per master in one slice: at 80 bytes (on a
// 64-bit machine), five fit the 416-byte size class (five of 152 bytes
// took 768). A field added to cmd rather than to cmdMore shows here.
func TestCmdSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) == 8 && unsafe.Sizeof(cmd{}) != 80 {
		t.Errorf("cmd is %d bytes, want 80", unsafe.Sizeof(cmd{}))
	}
}
