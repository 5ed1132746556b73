package main

import (
	"strings"
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// release -force and reset -force of an election: the release deletes
// the leader's lock key (the token on a majority), audited, and leaves
// the record and the terms' fence counter; the leader loses its
// leadership and the campaigner waiting takes over with a larger term.
// reset deletes the lock key, the record and the queue, never the fence
// counter. Keys set by hand with no token on a majority: the release
// declines without -token and deletes only the named token with it.
func TestElectionReleaseAndReset(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	ctx := t.Context()
	masters := mastersFlag(c.Addrs())
	const name, lock, record, fence = "sched", "redlock:{sched}:e", "redlock:{sched}:e:leader", "redlock:{sched}:e:fence"
	opts := redlock.Options{OwnerLabel: "sched-a:1", Fencing: true, TTL: 3 * time.Second}
	ea, err := newLocker(t, c, opts).Election(name)
	if err != nil {
		t.Fatal(err)
	}
	a, err := ea.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	settled(t, c, name, a, "a")
	opts.OwnerLabel = "sched-b:2"
	eb, err := newLocker(t, c, opts).Election(name)
	if err != nil {
		t.Fatal(err)
	}
	type campaign struct {
		lk  *redlock.Lock
		err error
	}
	got := make(chan campaign, 1)
	go func() {
		lk, err := eb.Campaign(ctx, "b")
		got <- campaign{lk, err}
	}()

	code, out, errOut := cli(t, "release", name, "-force", "-reason", "leader wedged", "-masters", masters)
	if code != exitOK || !strings.Contains(out, "election: its record "+record) {
		t.Fatalf("release: exit %d:\n%s\n%s", code, out, errOut)
	}
	if _, rec := auditLine(t, errOut); rec.Event != "force-release" || rec.Key != lock || rec.Chosen != "majority" || rec.Token != short(a.Token()) {
		t.Errorf("audit record %+v, want the release of %s's lock key", rec, short(a.Token()))
	}
	for i := range c.N() {
		cl := c.Client(i)
		if v := cl.Get(ctx, lock).Val(); v == a.Token() {
			t.Errorf("master %d still holds the released leader's lock key", i)
		}
		if n, _ := cl.Exists(ctx, fence).Result(); n != 1 {
			t.Errorf("master %d: the fence counter is gone", i)
		}
	}
	select {
	case <-a.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the released leader still leads 30 s later")
	}
	var b campaign
	select {
	case b = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting campaigner did not take over within 30 s")
	}
	if b.err != nil {
		t.Fatal(b.err)
	}
	if b.lk.Fence() <= a.Fence() {
		t.Errorf("the next term %d is not larger than %d", b.lk.Fence(), a.Fence())
	}
	// On a majority (settled waits for three, which a campaigner handed
	// the lock by a majority's releases need not reach on 3 masters).
	waitFor(t, "the new leader's keys on a majority", func() bool { return electionOn(t, c, name, b.lk, "b") >= 2 })

	code, out, errOut = cli(t, "reset", name, "-force", "-reason", "start over", "-masters", masters)
	if code != exitOK || !strings.Contains(out, name+": reset") {
		t.Fatalf("reset: exit %d:\n%s\n%s", code, out, errOut)
	}
	if _, rec := auditLine(t, errOut); rec.Event != "force-reset" || rec.Reason != "start over" {
		t.Errorf("audit record %+v", rec)
	}
	for i := range c.N() {
		keys, _ := c.Client(i).Keys(ctx, "redlock:{"+name+"}*").Result()
		if len(keys) != 1 || keys[0] != fence {
			t.Errorf("master %d keeps %q after the reset, want only %s", i, keys, fence)
		}
	}
	select {
	case <-b.lk.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the reset election's leader still leads 30 s later")
	}

	// Keys set by hand: a different token on each master.
	for i, tok := range []string{"host-x:1/aaaaaaaaaaaaaaaaaaaaaa", "host-y:2/bbbbbbbbbbbbbbbbbbbbbb", "host-z:3/cccccccccccccccccccccc"} {
		setLeader(t, c, i, name, tok, 7+i, "v", time.Minute)
	}
	code, _, errOut = cli(t, "release", name, "-force", "-reason", "x", "-masters", masters)
	if code != exitRefused || !strings.Contains(errOut, "on no majority") || strings.Contains(errOut, `"event"`) {
		t.Errorf("release with no majority: exit %d:\n%s", code, errOut)
	}
	code, _, errOut = cli(t, "release", name, "-force", "-reason", "x", "-token", "host-y:2/bbbbbb", "-masters", masters)
	if code != exitOK {
		t.Errorf("release -token: exit %d:\n%s", code, errOut)
	}
	if _, rec := auditLine(t, errOut); rec.Key != lock || rec.Chosen != "-token" {
		t.Errorf("audit record %+v, want a release of the named token", rec)
	}
	if got := values(t, c, lock); got[0] != "host-x:1/aaaaaaaaaaaaaaaaaaaaaa" || got[1] != "" || got[2] != "host-z:3/cccccccccccccccccccccc" {
		t.Errorf("after release -token: %q, want only master 1's key gone", got)
	}
}
