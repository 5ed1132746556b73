package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{}) // as main does
	goleak.VerifyTestMain(m)
}

// cli runs the command in-process.
func cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(t.Context(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func mastersFlag(addrs []string) string { return strings.Join(addrs, ",") }

// newLocker returns a Locker over c whose clients have dialled already (a
// cold first call can overrun MasterTimeout on a loaded machine), with a TTL
// long enough that nothing expires during a test.
func newLocker(t *testing.T, c *lab.Masters, opts redlock.Options) *redlock.Locker {
	t.Helper()
	clients := c.Clients()
	for _, cl := range clients {
		if err := cl.Ping(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if opts.TTL == 0 {
		opts.TTL = 60 * time.Second
	}
	opts.MasterTimeout = 500 * time.Millisecond
	l, err := redlock.New(clients, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	t.Cleanup(c.ResumeAll)
	return l
}

// values returns key's value on each master ("" when absent).
func values(t *testing.T, c *lab.Masters, key string) []string {
	t.Helper()
	out := make([]string, c.N())
	for i := range c.N() {
		v, err := c.Client(i).Get(t.Context(), key).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatalf("GET %s on master %d: %v", key, i, err)
		}
		out[i] = v
	}
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func all(vals []string, v string) bool {
	for _, x := range vals {
		if x != v {
			return false
		}
	}
	return true
}

// lock acquires resource and waits until every master holds the token
// (TryLock returns at a majority).
func lock(t *testing.T, c *lab.Masters, l *redlock.Locker, resource string) *redlock.Lock {
	t.Helper()
	lk, err := l.TryLock(t.Context(), resource)
	if err != nil {
		t.Fatalf("TryLock %s: %v", resource, err)
	}
	opts := l.Options()
	key, fence, _ := keyFor(&opts, resource)
	waitFor(t, "the token on every master", func() bool { return all(values(t, c, key), lk.Token()) })
	if l.Options().Fencing {
		waitFor(t, "the fence on every master", func() bool {
			for i := range c.N() {
				if f, err := c.Client(i).HGet(t.Context(), fence, "fence").Uint64(); err != nil || f != lk.Fence() {
					return false
				}
			}
			return true
		})
	}
	return lk
}

// closedAddr is an address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func labelledToken(t *testing.T, label string) string {
	b := make([]byte, 16)
	rand.Read(b)
	return label + "/" + base64.RawURLEncoding.EncodeToString(b)
}

func short(tok string) string {
	label, rnd, _ := strings.Cut(tok, "/")
	return label + "/" + rnd[:6] + "…"
}

// noWholeToken fails if any output shows a whole token.
func noWholeToken(t *testing.T, tokens []string, outputs ...string) {
	t.Helper()
	for _, tok := range tokens {
		_, rnd, _ := strings.Cut(tok, "/")
		for _, o := range outputs {
			if strings.Contains(o, rnd) {
				t.Errorf("a whole token's random part %q is in the output:\n%s", rnd, o)
			}
		}
	}
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decoding %q: %v", s, err)
	}
	return v
}

func TestInspect(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l := newLocker(t, c, redlock.Options{OwnerLabel: "host-1:4242", Fencing: true})
	lk := lock(t, c, l, "invoice:42")
	masters := mastersFlag(c.Addrs())

	before := time.Now()
	code, out, errOut := cli(t, "inspect", "-masters", masters, "-json", "invoice:42")
	after := time.Now()
	if code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	res := decode[inspectResult](t, out)
	if res.Key != "redlock:{invoice:42}" || res.FenceKey != "redlock:{invoice:42}:fence" {
		t.Errorf("keys %q, %q", res.Key, res.FenceKey)
	}
	for i, st := range res.Nodes {
		if st.Addr != c.Addrs()[i] || !st.Answered || !st.Present || st.Holder != short(lk.Token()) || st.Label != "host-1:4242" ||
			st.PTTLMs == nil || *st.PTTLMs <= 0 || *st.PTTLMs > 60000 || st.Fence == nil || *st.Fence != lk.Fence() || st.Error != "" {
			t.Errorf("master %d: %+v", i, st)
		}
	}
	q := res.Quorum
	if !q.Held || !q.Decided || q.On != 5 || q.Masters != 5 || q.Majority != 3 || q.Answered != 5 || q.Holder != short(lk.Token()) || q.Label != "host-1:4242" || len(q.Holders) != 1 {
		t.Errorf("quorum %+v", q)
	}
	// The upper bound is past the holder's own deadline, and no later than
	// a full TTL after the command.
	if q.ValidUntil == nil || !q.ValidUntil.After(lk.Deadline()) || q.ValidUntil.After(after.Add(60*time.Second)) || q.ValidUntil.Before(before) {
		t.Errorf("valid_until %v; holder's deadline %v", q.ValidUntil, lk.Deadline())
	}
	if strings.Contains(errOut, "asking") {
		t.Errorf("progress on a stderr that is not a terminal:\n%s", errOut)
	}
	isTerminal = func(io.Writer) bool { return true }
	_, _, errOut = cli(t, "inspect", "invoice:42", "-masters", masters)
	isTerminal = func(io.Writer) bool { return false }
	if !strings.Contains(errOut, "inspect: asking 5 masters") {
		t.Errorf("no progress line on a terminal's stderr:\n%s", errOut)
	}

	code, text, errOut := cli(t, "inspect", "invoice:42", "-masters", masters)
	if code != exitOK || !strings.Contains(text, "HELD by "+short(lk.Token())+" on 5 of 5 masters") || !strings.Contains(text, "valid until at most") {
		t.Errorf("exit %d, text:\n%s", code, text)
	}
	noWholeToken(t, []string{lk.Token()}, out, text, errOut)

	code, out, _ = cli(t, "inspect", "-json", "-q", "-masters", masters, "invoice:43")
	res = decode[inspectResult](t, out)
	if code != exitOK || res.Quorum.Held || !res.Quorum.Decided || res.Nodes[0].Present || res.Nodes[0].Fence != nil {
		t.Errorf("an unheld resource: exit %d, %+v", code, res)
	}
}

// A paused master and a closed port are reported per master; with too few
// answers the view is undecided (exit 3).
func TestInspectUnreachable(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l := newLocker(t, c, redlock.Options{OwnerLabel: "host-1:4242"})
	lock(t, c, l, "job")
	if err := c.Pause(4); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	isTerminal = func(io.Writer) bool { return true } // for the progress lines
	t.Cleanup(func() { isTerminal = func(io.Writer) bool { return false } })
	code, out, errOut := cli(t, "inspect", "-json", "-timeout", "300ms", "-masters", mastersFlag(c.Addrs()), "job")
	res := decode[inspectResult](t, out)
	if code != exitOK || !res.Quorum.Held || res.Quorum.On != 4 || res.Quorum.Answered != 4 || res.Nodes[4].Answered ||
		!strings.Contains(res.Nodes[4].Error, "unreachable: no answer within 300ms") {
		t.Errorf("one paused master: exit %d, %+v, stderr:\n%s", code, res, errOut)
	}
	if !strings.Contains(errOut, c.Addrs()[4]+": unreachable") {
		t.Errorf("no progress line for the paused master:\n%s", errOut)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("inspect took %v with -timeout 300ms", d)
	}
	c.ResumeAll()

	addrs := append(c.Addrs()[:2], closedAddr(t), closedAddr(t), closedAddr(t))
	code, out, errOut = cli(t, "inspect", "-json", "-masters", mastersFlag(addrs), "job")
	res = decode[inspectResult](t, out)
	if code != exitQuorum || res.Quorum.Decided || res.Quorum.Held || res.Quorum.Answered != 2 ||
		!strings.Contains(res.Nodes[3].Error, "connection refused") || !strings.Contains(errOut, "only 2 of 5 masters answered") {
		t.Errorf("3 of 5 down: exit %d, %+v, stderr:\n%s", code, res.Quorum, errOut)
	}
}

func TestList(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l := newLocker(t, c, redlock.Options{OwnerLabel: "host-1:4242", Fencing: true})
	var tokens []string
	for _, r := range []string{"job:a", "job:b", "other:c"} {
		tokens = append(tokens, lock(t, c, l, r).Token())
	}
	// Not locks: a plain key under the prefix, an audit stream, and a split
	// lock (two tokens on two masters each).
	tA, tB := labelledToken(t, "host-a:1"), labelledToken(t, "host-b:2")
	for i := range c.N() {
		cl := c.Client(i)
		cl.Set(t.Context(), "redlock:plain", "x", 0)
		cl.XAdd(t.Context(), &redis.XAddArgs{Stream: "redlock:audit", Values: []any{"k", "v"}})
		switch i {
		case 0, 1:
			cl.Set(t.Context(), "redlock:{job:split}", tA, time.Minute)
		case 2, 3:
			cl.Set(t.Context(), "redlock:{job:split}", tB, time.Minute)
		}
	}
	masters := mastersFlag(c.Addrs())

	code, out, errOut := cli(t, "list", "-json", "-masters", masters)
	if code != exitOK {
		t.Fatalf("exit %d:\n%s", code, errOut)
	}
	res := decode[listResult](t, out)
	var got []string
	for _, lk := range res.Locks {
		got = append(got, lk.Resource)
		if lk.Resource == "job:split" {
			if lk.Held || !lk.Decided || lk.On != 2 || lk.Tokens != 2 {
				t.Errorf("split lock: %+v", lk)
			}
			continue
		}
		if !lk.Held || lk.On != 5 || lk.Tokens != 1 || lk.Label != "host-1:4242" || lk.MaxPTTL <= 0 || lk.MaxPTTL > 60000 {
			t.Errorf("%+v", lk)
		}
	}
	if strings.Join(got, " ") != "job:a job:b job:split other:c" || res.Truncated {
		t.Errorf("locks %v, truncated %v", got, res.Truncated)
	}

	code, out, _ = cli(t, "list", "job:", "-json", "-q", "-masters", masters)
	res = decode[listResult](t, out)
	if code != exitOK || len(res.Locks) != 3 || res.Locks[0].Resource != "job:a" || res.Locks[0].Holder != short(tokens[0]) {
		t.Errorf("list job: exit %d, %+v", code, res.Locks)
	}
	code, out, _ = cli(t, "list", "job:", "-limit", "1", "-json", "-q", "-masters", masters)
	res = decode[listResult](t, out)
	if code != exitOK || len(res.Locks) != 1 || !res.Truncated || res.Locks[0].On != 5 || !res.Locks[0].Held {
		t.Errorf("-limit 1: exit %d, %+v, truncated %v", code, res.Locks, res.Truncated)
	}
	code, text, errOut := cli(t, "list", "-masters", masters)
	if code != exitOK || !strings.Contains(text, "job:b") || !strings.Contains(text, short(tokens[1])) || !strings.Contains(text, "(+1 other tokens)") {
		t.Errorf("text: exit %d:\n%s", code, text)
	}
	noWholeToken(t, append(tokens, tA, tB), out, text, errOut)

	addrs := append(c.Addrs()[:2], closedAddr(t), closedAddr(t), closedAddr(t))
	if code, _, errOut := cli(t, "list", "-masters", mastersFlag(addrs)); code != exitQuorum || !strings.Contains(errOut, "only 2 of 5 masters answered") {
		t.Errorf("3 of 5 down: exit %d, stderr:\n%s", code, errOut)
	}
}

// -limit truncates even when every master's SCAN gives the same keys
// first (with one master, always): a matching key left out for the limit
// means there may be more. (TestList's five masters order their keys by
// each server's own hash seed, so all five agreeing is rare there.)
func TestListLimitOnOneMaster(t *testing.T) {
	c := lab.ForTest(t, 1, nil)
	l := newLocker(t, c, redlock.Options{})
	for _, r := range []string{"job:a", "job:b"} {
		lock(t, c, l, r)
	}
	code, out, errOut := cli(t, "list", "job:", "-limit", "1", "-json", "-q", "-masters", mastersFlag(c.Addrs()))
	if code != exitOK {
		t.Fatalf("exit %d:\n%s", code, errOut)
	}
	if res := decode[listResult](t, out); len(res.Locks) != 1 || !res.Truncated {
		t.Errorf("-limit 1 over 2 locks: %d listed, truncated %v; want 1 and truncated", len(res.Locks), res.Truncated)
	}
}

// auditLine returns the audit record on stderr.
func auditLine(t *testing.T, stderr string) (string, auditRecord) {
	t.Helper()
	for _, line := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(line, `{"event":"force-`) {
			return line, decode[auditRecord](t, line)
		}
	}
	t.Fatalf("no audit record on stderr:\n%s", stderr)
	return "", auditRecord{}
}

// auditStream returns the audit stream's entries on master i.
func auditStream(t *testing.T, c *lab.Masters, i int) []redis.XMessage {
	t.Helper()
	msgs, err := c.Client(i).XRange(t.Context(), "redlock:audit", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

func TestReleaseForce(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	l := newLocker(t, c, redlock.Options{OwnerLabel: "host-1:4242", Fencing: true})
	lk := lock(t, c, l, "invoice:7")
	masters := mastersFlag(c.Addrs())
	key := "redlock:{invoice:7}"

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"release", "invoice:7", "-force"}, "needs -reason TEXT"},
		{[]string{"release", "invoice:7", "-force", "-reason", "  "}, "needs -reason TEXT"},
		{[]string{"release", "invoice:7", "-reason", "stuck"}, "it needs -force"},
		{[]string{"release", "-force", "-reason", "stuck"}, "release takes one RESOURCE"},
	} {
		code, _, errOut := cli(t, append(tc.args, "-masters", masters)...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, stderr:\n%s", tc.args, code, errOut)
		}
	}
	if !all(values(t, c, key), lk.Token()) {
		t.Fatal("a refused release changed the masters")
	}

	start := time.Now()
	code, out, errOut := cli(t, "release", "invoice:7", "-force", "-reason", "holder host-1 died (ticket 12)", "-who", "alice", "-masters", masters)
	if code != exitOK {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !all(values(t, c, key), "") {
		t.Errorf("the key is still on some master: %q", values(t, c, key))
	}
	for i := range c.N() {
		if f, err := c.Client(i).HGet(t.Context(), key+":fence", "fence").Uint64(); err != nil || f != lk.Fence() {
			t.Errorf("master %d: fence counter %d, %v; want %d, untouched", i, f, err, lk.Fence())
		}
	}
	line, rec := auditLine(t, errOut)
	host, _ := os.Hostname()
	ts, err := time.Parse(time.RFC3339Nano, rec.Time)
	if rec.Reason != "holder host-1 died (ticket 12)" || rec.Resource != "invoice:7" || rec.Key != key || rec.Token != short(lk.Token()) ||
		rec.Who.Name != "alice" || rec.Who.PID != os.Getpid() || rec.Who.Host != host || rec.Chosen != "majority" ||
		err != nil || ts.Before(start.Add(-time.Second)) || ts.After(time.Now()) || len(rec.Masters) != 5 {
		t.Errorf("audit record %+v (time: %v)", rec, err)
	}
	for i, m := range rec.Masters {
		if m.Addr != c.Addrs()[i] || !m.Deleted || m.Found != "token" || m.Error != "" {
			t.Errorf("audit, master %d: %+v", i, m)
		}
	}
	for i := range c.N() {
		msgs := auditStream(t, c, i)
		if len(msgs) != 1 || msgs[0].Values["record"] != line || msgs[0].Values["resource"] != "invoice:7" ||
			msgs[0].Values["reason"] != rec.Reason || msgs[0].Values["who"] != "alice" {
			t.Errorf("master %d: audit stream %v", i, msgs)
		}
	}
	noWholeToken(t, []string{lk.Token()}, out, errOut)

	// The holder finds out at its next extension, and another Locker can
	// take the lock; its fence is still larger.
	if err := lk.Extend(t.Context()); !errors.Is(err, redlock.ErrLost) {
		t.Errorf("the old holder's Extend: %v, want ErrLost", err)
	}
	l2 := newLocker(t, c, redlock.Options{OwnerLabel: "host-2:1", Fencing: true})
	lk2 := lock(t, c, l2, "invoice:7")
	if lk2.Fence() <= lk.Fence() {
		t.Errorf("fence after the forced release %d, not above %d", lk2.Fence(), lk.Fence())
	}

	// Nothing held: refused, and no audit record.
	code, _, errOut = cli(t, "release", "invoice:8", "-force", "-reason", "x", "-masters", masters)
	if code != exitRefused || !strings.Contains(errOut, "nothing to release") || strings.Contains(errOut, `"event"`) {
		t.Errorf("unheld: exit %d:\n%s", code, errOut)
	}
	if n := len(auditStream(t, c, 0)); n != 1 {
		t.Errorf("audit stream has %d entries, want 1", n)
	}
}

func TestReleaseDisagreement(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	masters := mastersFlag(c.Addrs())
	key := "redlock:{split}"
	tA, tB := labelledToken(t, "host-a:1"), labelledToken(t, "host-b:2")
	for i := range 4 {
		tok := tA
		if i >= 2 {
			tok = tB
		}
		if err := c.Client(i).Set(t.Context(), key, tok, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{tA, tA, tB, tB, ""}

	code, _, errOut := cli(t, "release", "split", "-force", "-reason", "stuck", "-masters", masters)
	if code != exitRefused || !strings.Contains(errOut, "the masters disagree") || !strings.Contains(errOut, short(tA)+" on 2") ||
		!strings.Contains(errOut, "Nothing was deleted") || strings.Contains(errOut, `"event"`) {
		t.Errorf("disagreement: exit %d:\n%s", code, errOut)
	}
	if got := values(t, c, key); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("a refused release changed the masters: %q", got)
	}
	code, _, errOut = cli(t, "release", "split", "-force", "-reason", "stuck", "-token", "host-c:3/AAAAAA", "-masters", masters)
	if code != exitRefused || !strings.Contains(errOut, "on none of the 5 masters") {
		t.Errorf("--token matching nothing: exit %d:\n%s", code, errOut)
	}
	if n := len(auditStream(t, c, 0)); n != 0 {
		t.Errorf("refused releases wrote %d audit records", n)
	}

	// Named by its shortened form, as inspect shows it.
	code, out, errOut := cli(t, "release", "split", "-force", "-reason", "host-a is gone", "-token", short(tA), "-masters", masters, "-json")
	if code != exitOK {
		t.Fatalf("--token: exit %d:\n%s", code, errOut)
	}
	if got := values(t, c, key); strings.Join(got, ",") != strings.Join([]string{"", "", tB, tB, ""}, ",") {
		t.Errorf("after --token %s: %q", short(tA), got)
	}
	_, rec := auditLine(t, errOut)
	found := []string{"token", "token", "other", "other", "absent"}
	for i, m := range rec.Masters {
		if m.Deleted != (i < 2) || m.Found != found[i] {
			t.Errorf("audit, master %d: %+v", i, m)
		}
	}
	res := decode[releaseResult](t, out)
	if !res.Released || res.Deleted != 2 || rec.Chosen != "-token" || len(res.AuditWritten) != 5 {
		t.Errorf("result %+v", res)
	}
	for i := range c.N() {
		if msgs := auditStream(t, c, i); len(msgs) != 1 || !strings.Contains(msgs[0].Values["record"].(string), `"chosen":"-token"`) {
			t.Errorf("master %d: audit stream %v", i, msgs)
		}
	}
	noWholeToken(t, []string{tA, tB}, out, errOut)
}

// The majority's token is deleted; a master holding another token keeps it.
func TestReleaseLeavesOtherTokens(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	key := "redlock:{r}"
	tA, tB := labelledToken(t, "a"), labelledToken(t, "b")
	for i := range 5 {
		tok := tA
		if i == 4 {
			tok = tB
		}
		c.Client(i).Set(t.Context(), key, tok, time.Minute)
	}
	code, _, errOut := cli(t, "release", "r", "-force", "-reason", "test", "-masters", mastersFlag(c.Addrs()))
	if got := values(t, c, key); code != exitOK || strings.Join(got, ",") != ",,,,"+tB {
		t.Errorf("exit %d, masters %q:\n%s", code, got, errOut)
	}
}

func TestReleaseTooFewMasters(t *testing.T) {
	c := lab.ForTest(t, 2, nil)
	key := "redlock:{r}"
	tA := labelledToken(t, "a")
	for i := range 2 {
		c.Client(i).Set(t.Context(), key, tA, time.Minute)
	}
	addrs := append(c.Addrs(), closedAddr(t), closedAddr(t), closedAddr(t))
	code, _, errOut := cli(t, "release", "r", "-force", "-reason", "test", "-masters", mastersFlag(addrs))
	if code != exitQuorum || !strings.Contains(errOut, "only 2 of 5 masters answered") || !all(values(t, c, key), tA) {
		t.Errorf("exit %d, masters %q:\n%s", code, values(t, c, key), errOut)
	}
}

// Config file, environment, -redsync-keys and -prefix reach the same keys
// as the library.
func TestKeyNamingAndSources(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	rs := newLocker(t, c, redlock.Options{RedsyncKeys: true, KeyPrefix: "rs:", OwnerLabel: "rs-host:1"})
	lk := lock(t, c, rs, "job")
	app := newLocker(t, c, redlock.Options{KeyPrefix: "app:", OwnerLabel: "app-host:1"})
	lk2 := lock(t, c, app, "job")

	code, out, errOut := cli(t, "inspect", "-json", "-q", "-redsync-keys", "-prefix", "rs:", "-masters", mastersFlag(c.Addrs()), "job")
	res := decode[inspectResult](t, out)
	if code != exitOK || res.Key != "rs:job" || !res.Quorum.Held || res.Quorum.Holder != short(lk.Token()) {
		t.Errorf("-redsync-keys: exit %d, %+v\n%s", code, res, errOut)
	}

	cfg := t.TempDir() + "/redlock.json"
	body, _ := json.Marshal(map[string]any{"masters": c.Addrs(), "prefix": "app:"})
	os.WriteFile(cfg, body, 0o600)
	code, out, errOut = cli(t, "list", "-json", "-q", "-config", cfg)
	lres := decode[listResult](t, out)
	if code != exitOK || len(lres.Locks) != 1 || lres.Locks[0].Key != "app:{job}" || lres.Locks[0].Holder != short(lk2.Token()) {
		t.Errorf("-config: exit %d, %+v\n%s", code, lres, errOut)
	}

	t.Setenv("REDLOCK_MASTERS", mastersFlag(c.Addrs()))
	code, out, _ = cli(t, "inspect", "-json", "-q", "-prefix", "app:", "job")
	res = decode[inspectResult](t, out)
	if code != exitOK || res.Key != "app:{job}" || !res.Quorum.Held || res.Quorum.Label != "app-host:1" {
		t.Errorf("$REDLOCK_MASTERS: exit %d, %+v", code, res)
	}
}

func TestUsageErrors(t *testing.T) {
	t.Setenv("REDLOCK_MASTERS", "")
	badCfg := t.TempDir() + "/bad.json"
	os.WriteFile(badCfg, []byte(`{"masterz": []}`), 0o600)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no command"},
		{[]string{"frob"}, `unknown command "frob"`},
		{[]string{"inspect", "x"}, "no masters"},
		{[]string{"inspect"}, "one RESOURCE"},
		{[]string{"inspect", "a", "b", "-masters", "h:1"}, "one RESOURCE"},
		{[]string{"inspect", "x", "-masters", "h:1", "-limit", "3"}, "inspect does not take -limit"},
		{[]string{"list", "-masters", "h:1", "-reason", "x"}, "list does not take -reason"},
		{[]string{"list", "-masters", "h:1", "-limit", "0"}, "-limit 0 must be positive"},
		{[]string{"inspect", "x", "-masters", "nohost"}, `bad master address "nohost"`},
		{[]string{"inspect", "x", "-masters", "redis://u:s3cret@h:1/notadb"}, "bad master URL redis://…@h:1/notadb"},
		{[]string{"inspect", "x", "-masters", "h:1,h:1"}, "listed twice"},
		{[]string{"inspect", "x", "-masters", "h:1", "-timeout", "0s"}, "-timeout 0s must be positive"},
		{[]string{"inspect", "x", "-masters", "h:1", "-tls-insecure"}, "apply to rediss:// masters"},
		{[]string{"inspect", "x", "-masters", "h:1", "-prefix", "a{"}, "must not contain '{'"},
		{[]string{"inspect", "}x", "-masters", "h:1"}, "must not start with '}'"},
		{[]string{"inspect", "x", "-config", badCfg}, `unknown field "masterz"`},
		{[]string{"inspect", "x", "-nope"}, "flag provided but not defined: -nope"},
	} {
		code, out, errOut := cli(t, tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) || out != "" || strings.Contains(errOut, "s3cret") {
			t.Errorf("%q: exit %d, stdout %q, stderr:\n%s", tc.args, code, out, errOut)
		}
	}
	code, out, _ := cli(t, "-h")
	if code != exitOK || !strings.Contains(out, "exit codes:") || !strings.Contains(out, "-limit int") {
		t.Errorf("-h: exit %d:\n%s", code, out)
	}
}

// Common Go CLI conventions: -h prints the usage to stdout and exits 0; an
// unknown flag gets a short error and a hint on stderr (not the usage) and
// exit 2; -version prints the build's version; the usage spells every flag
// with one dash.
func TestCLIConventions(t *testing.T) {
	for _, h := range [][]string{{"-h"}, {"-help"}, {"help"}, {"inspect", "-h"}} {
		code, out, errOut := cli(t, h...)
		if code != exitOK || !strings.HasPrefix(out, "redlock: inspect, list, force-release and reset") || errOut != "" {
			t.Errorf("%q: exit %d, stdout %.80q, stderr %q", h, code, out, errOut)
		}
	}
	code, out, errOut := cli(t, "-nope")
	if code != exitUsage || out != "" || !strings.Contains(errOut, "-nope") || !strings.Contains(errOut, "redlock -h") || len(errOut) > 200 {
		t.Errorf("unknown flag: exit %d, stdout %q, stderr (%d bytes) %q", code, out, len(errOut), errOut)
	}
	code, out, errOut = cli(t, "-version")
	if code != exitOK || !strings.HasPrefix(out, "redlock ") || !strings.Contains(out, runtime.Version()) || errOut != "" {
		t.Errorf("-version: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	_, usage, _ := cli(t, "-h")
	if m := regexp.MustCompile(`(^|\s)--[a-z]`).FindString(usage); m != "" {
		t.Errorf("the usage spells a flag with two dashes (%q):\n%s", m, usage)
	}
}

// -tls-ca and -tls-insecure reach the tls.Config of rediss:// masters; the
// URL's user, password and DB reach the client options.
// writeCA writes a self-signed CA certificate (PEM) and returns its path.
func writeCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redlock test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/ca.pem"
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTLSFlags(t *testing.T) {
	ca := writeCA(t)
	c := &config{masters: "rediss://u:p@localhost:6380/2,127.0.0.1:6381", tlsCA: ca, tlsInsecure: true, timeout: time.Second, set: map[string]bool{}}
	r, err := c.resolve()
	if err != nil {
		t.Fatal(err)
	}
	o := r.masters[0].opts
	if o.TLSConfig == nil || o.TLSConfig.RootCAs == nil || !o.TLSConfig.InsecureSkipVerify || o.TLSConfig.ServerName != "localhost" ||
		o.Username != "u" || o.Password != "p" || o.DB != 2 || r.masters[0].name != "localhost:6380/2" || o.ReadTimeout != time.Second {
		t.Errorf("rediss master: %+v, tls %+v", o, o.TLSConfig)
	}
	if r.masters[1].opts.TLSConfig != nil {
		t.Errorf("a bare host:port got TLS")
	}
	c = &config{masters: "rediss://localhost:6380", tlsCA: t.TempDir() + "/none.pem", timeout: time.Second, set: map[string]bool{}}
	if _, err := c.resolve(); err == nil || !strings.Contains(err.Error(), "-tls-ca") {
		t.Errorf("missing CA file: %v", err)
	}
}

func TestTokens(t *testing.T) {
	ours := "host-1:4242/" + strings.Repeat("A", 21) + "_"
	redsync := "ab/cdefghijklmnopqrstu==" // padded standard base64, with a '/'
	for _, tc := range []struct{ tok, label, short string }{
		{ours, "host-1:4242", "host-1:4242/AAAAAA…"},
		{"AbCdEfGhIjKlMnOpQrStUv", "", "AbCdEf…"},
		{redsync, "", "ab/cde…"},
		{"a b/" + strings.Repeat("A", 22), "", "a b/AA…"},
		{"x\x1b[2J", "", "x?[2J"},
	} {
		label, _ := splitToken(tc.tok)
		if label != tc.label || shortToken(tc.tok) != tc.short {
			t.Errorf("%q: label %q, short %q; want %q, %q", tc.tok, label, shortToken(tc.tok), tc.label, tc.short)
		}
	}
	for _, tc := range []struct {
		given string
		ok    bool
	}{
		{ours, true}, {"host-1:4242/AAAAAA…", true}, {"host-1:4242/AAAAAA", true}, {"host-1:4242/AAAAA", false},
		{"host-2:4242/AAAAAA", false}, {"AAAAAA", false},
	} {
		if got := matchToken(tc.given, ours); got != tc.ok {
			t.Errorf("matchToken(%q) = %v", tc.given, got)
		}
	}
}

// TestPrimitives: list and inspect show a semaphore's slots and a
// read-write lock's readers, writer and intent, as each master holds them.
func TestPrimitives(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	l := newLocker(t, c, redlock.Options{OwnerLabel: "host-1:4242"})
	sem, err := l.Semaphore("jobs", 3)
	if err != nil {
		t.Fatal(err)
	}
	var tokens []string
	for range 2 {
		lk, err := sem.TryAcquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, lk.Token())
	}
	rw, err := l.RWMutex("docs")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		lk, err := rw.TryRLock(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, lk.Token())
	}
	opts := l.Options()
	semStem, _, _ := keyFor(&opts, "jobs")
	rwStem, _, _ := keyFor(&opts, "docs")
	// TryAcquire and TryRLock return at a majority: wait for every master.
	waitFor(t, "both slots and both readers on every master", func() bool {
		for i := range c.N() {
			cl := c.Client(i)
			// The order of the slots is each acquirer's: any 2 of the 3.
			n, err := cl.Exists(t.Context(), semStem+":s:1", semStem+":s:2", semStem+":s:3").Result()
			if err != nil || n != 2 {
				return false
			}
			if r, err := cl.ZCard(t.Context(), rwStem+":r").Result(); err != nil || r != 2 {
				return false
			}
		}
		return true
	})
	// A writer's intent on one master: shown, not a majority.
	tW := labelledToken(t, "host-w:1")
	c.Client(0).Set(t.Context(), rwStem+":wi", tW, time.Minute)
	tokens = append(tokens, tW)
	// The count of write grants (a writer came and went): the lock's key,
	// not a lock of its own.
	c.Client(1).Set(t.Context(), rwStem+":wg", "3", time.Minute)
	masters := mastersFlag(c.Addrs())

	code, out, errOut := cli(t, "list", "-json", "-masters", masters)
	if code != exitOK {
		t.Fatalf("exit %d:\n%s", code, errOut)
	}
	res := decode[listResult](t, out)
	if len(res.Locks) != 0 || len(res.Primitives) != 2 {
		t.Fatalf("locks %+v, primitives %+v", res.Locks, res.Primitives)
	}
	d, j := res.Primitives[0], res.Primitives[1]
	if d.Resource != "docs" || d.RWLock == nil || d.Semaphore != nil || fmt.Sprint(d.RWLock.Readers) != "[2 2 2]" ||
		d.RWLock.Writer != nil || d.RWLock.Intent == nil || d.RWLock.Intent.On != 1 || d.RWLock.Intent.Held || d.RWLock.Intent.Holder != short(tW) {
		t.Errorf("docs: %+v %+v", d, d.RWLock)
	}
	if j.Resource != "jobs" || j.Semaphore == nil || j.RWLock != nil || j.Semaphore.Permits != 3 || j.Semaphore.Held != 2 || len(j.Semaphore.Slots) != 2 {
		t.Fatalf("jobs: %+v %+v", j, j.Semaphore)
	}
	seen := map[string]bool{}
	for k, s := range j.Semaphore.Slots {
		seen[s.Holder] = true
		if s.Slot < 1 || s.Slot > 3 || (k > 0 && s.Slot <= j.Semaphore.Slots[k-1].Slot) || !s.Held || s.On != 3 || s.Tokens != 1 || s.Label != "host-1:4242" || len(s.Masters) != 3 || s.MaxPTTLMs <= 0 || s.MaxPTTLMs > 60000 {
			t.Errorf("slot %+v", s)
		}
	}
	if !seen[short(tokens[0])] || !seen[short(tokens[1])] {
		t.Errorf("slot holders %v, want %s and %s", seen, short(tokens[0]), short(tokens[1]))
	}
	code, text, errOut := cli(t, "list", "-masters", masters)
	if code != exitOK || !strings.Contains(text, "2 of 3 permits held") || !strings.Contains(text, "readers per master [2 2 2]") ||
		!strings.Contains(text, fmt.Sprintf("slot %d: %s on 3/3", j.Semaphore.Slots[0].Slot, j.Semaphore.Slots[0].Holder)) || strings.Contains(text, "no lock keys") {
		t.Errorf("list text: exit %d:\n%s", code, text)
	}
	noWholeToken(t, tokens, out, text, errOut)

	code, out, errOut = cli(t, "inspect", "-json", "-masters", masters, "jobs")
	ir := decode[inspectResult](t, out)
	if code != exitOK || ir.Primitives == nil || ir.Primitives.Semaphore == nil || ir.Primitives.Semaphore.Held != 2 || ir.Primitives.RWLock != nil {
		t.Fatalf("inspect jobs: exit %d, %+v\n%s", code, ir.Primitives, errOut)
	}
	for _, pm := range ir.Primitives.Nodes {
		if !pm.Answered || pm.Permits != 3 || len(pm.Slots) != 2 || pm.Slots[0].Slot != j.Semaphore.Slots[0].Slot || pm.Slots[1].Slot != j.Semaphore.Slots[1].Slot {
			t.Errorf("inspect jobs, master %+v", pm)
		}
	}
	code, text, _ = cli(t, "inspect", "-masters", masters, "jobs")
	if code != exitOK || !strings.Contains(text, "semaphore: 2 of 3 permits held") || !strings.Contains(text, short(tokens[0])) {
		t.Errorf("inspect jobs text: exit %d:\n%s", code, text)
	}
	code, out, _ = cli(t, "inspect", "-json", "-masters", masters, "docs")
	ir = decode[inspectResult](t, out)
	if code != exitOK || ir.Primitives == nil || ir.Primitives.RWLock == nil || ir.Primitives.Semaphore != nil {
		t.Fatalf("inspect docs: exit %d, %+v", code, ir.Primitives)
	}
	for i, pm := range ir.Primitives.Nodes {
		if !pm.Answered || pm.Readers != 2 || pm.Writer != nil || (pm.Intent != nil) != (i == 0) {
			t.Errorf("inspect docs, master %d: %+v", i, pm)
		}
	}
	code, text, _ = cli(t, "inspect", "-masters", masters, "docs")
	if code != exitOK || !strings.Contains(text, "read-write lock:") || !strings.Contains(text, "READERS") || !strings.Contains(text, "writer: none") {
		t.Errorf("inspect docs text: exit %d:\n%s", code, text)
	}
	noWholeToken(t, tokens, out, text)
	// release -force refuses them clearly, and deletes nothing.
	code, _, errOut = cli(t, "release", "-force", "-reason", "test", "-masters", masters, "jobs")
	if code != exitRefused || !strings.Contains(errOut, "names a semaphore or read-write lock, not a mutex") {
		t.Errorf("release jobs: exit %d:\n%s", code, errOut)
	}
	if n, err := c.Client(0).Exists(t.Context(), semStem+":s:1", semStem+":s:2", semStem+":s:3").Result(); err != nil || n != 2 {
		t.Errorf("after release: %d slots, %v", n, err)
	}
	// A mutex's inspect shows nothing of them.
	if _, out, _ := cli(t, "inspect", "-json", "-masters", masters, "other"); decode[inspectResult](t, out).Primitives != nil {
		t.Errorf("inspect other: %s", out)
	}
}

// release -force -token releases one holder of a semaphore (its slot) or a
// read-write lock (a reader, the writer), by compare-and-delete; reset
// -force deletes every key of a semaphore and a read-write lock (not the
// fence counter), after which another number of permits is accepted at
// once. Both are audited as a release is.
func TestPrimitivesReleaseAndReset(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	l := newLocker(t, c, redlock.Options{OwnerLabel: "host-1:4242"})
	opts := l.Options()
	stem := func(name string) string { k, _, _ := keyFor(&opts, name); return k }
	sem, _ := l.Semaphore("jobs", 3)
	p1, err := sem.TryAcquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	p2, err := sem.TryAcquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	docs, _ := l.RWMutex("docs")
	r1, err := docs.TryRLock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	pages, _ := l.RWMutex("pages")
	w, err := pages.TryLock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	slotOf := func(tok string) string {
		for j := 1; j <= 3; j++ {
			if v, _ := c.Client(0).Get(t.Context(), fmt.Sprintf("%s:s:%d", stem("jobs"), j)).Result(); v == tok {
				return fmt.Sprintf("%s:s:%d", stem("jobs"), j)
			}
		}
		return ""
	}
	waitFor(t, "every holder on every master", func() bool {
		for i := range c.N() {
			cl := c.Client(i)
			n, _ := cl.Exists(t.Context(), stem("jobs")+":s:1", stem("jobs")+":s:2", stem("jobs")+":s:3").Result()
			r, _ := cl.ZCard(t.Context(), stem("docs")+":r").Result()
			if n != 2 || r != 1 || cl.Get(t.Context(), stem("pages")+":w").Val() != w.Token() {
				return false
			}
		}
		return slotOf(p1.Token()) != ""
	})
	masters := mastersFlag(c.Addrs())
	p1Slot := slotOf(p1.Token())

	// Without -token: which holder is not for the tool to pick.
	code, _, errOut := cli(t, "release", "jobs", "-force", "-reason", "x", "-masters", masters)
	if code != exitRefused || !strings.Contains(errOut, "-token") {
		t.Errorf("release jobs without -token: exit %d:\n%s", code, errOut)
	}

	// One permit, by its token as inspect shows it.
	code, out, errOut := cli(t, "release", "jobs", "-force", "-reason", "worker died", "-token", short(p1.Token()), "-masters", masters)
	if code != exitOK {
		t.Fatalf("release jobs -token: exit %d:\n%s\n%s", code, out, errOut)
	}
	if _, rec := auditLine(t, errOut); rec.Event != "force-release" || rec.Key != p1Slot || rec.Token != short(p1.Token()) || rec.Chosen != "-token" {
		t.Errorf("audit record %+v, want a release of %s", rec, p1Slot)
	}
	if got := values(t, c, p1Slot); !all(got, "") {
		t.Errorf("the released slot is still on some master: %q", got)
	}
	if err := p1.Extend(t.Context()); !errors.Is(err, redlock.ErrLost) {
		t.Errorf("the released permit's Extend: %v, want ErrLost", err)
	}
	if err := p2.Extend(t.Context()); err != nil {
		t.Errorf("the other permit's Extend: %v", err)
	}

	// A reader, and a writer.
	if code, _, errOut := cli(t, "release", "docs", "-force", "-reason", "x", "-token", short(r1.Token()), "-masters", masters); code != exitOK {
		t.Fatalf("release docs -token: exit %d:\n%s", code, errOut)
	}
	for i := range c.N() {
		if n, _ := c.Client(i).ZCard(t.Context(), stem("docs")+":r").Result(); n != 0 {
			t.Errorf("master %d: %d readers after the release", i, n)
		}
	}
	if err := r1.Extend(t.Context()); !errors.Is(err, redlock.ErrLost) {
		t.Errorf("the released reader's Extend: %v, want ErrLost", err)
	}
	if code, _, errOut := cli(t, "release", "pages", "-force", "-reason", "x", "-token", short(w.Token()), "-masters", masters); code != exitOK {
		t.Fatalf("release pages -token: exit %d:\n%s", code, errOut)
	}
	if got := values(t, c, stem("pages")+":w"); !all(got, "") {
		t.Errorf("the writer key is still on some master: %q", got)
	}

	// reset: usage, then the semaphore's keys, after which 5 permits are
	// accepted at once.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"reset", "jobs", "-reason", "x"}, "reset deletes other processes' locks: it needs -force"},
		{[]string{"reset", "jobs", "-force"}, "reset -force needs -reason"},
		{[]string{"reset", "jobs", "-force", "-reason", "x", "-token", "abcdef"}, "reset does not take -token"},
	} {
		if code, _, errOut := cli(t, append(tc.args, "-masters", masters)...); code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d:\n%s", tc.args, code, errOut)
		}
	}
	five, _ := l.Semaphore("jobs", 5)
	if _, err := five.TryAcquire(t.Context()); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("5 permits before the reset: %v, want ErrInvalid", err)
	}
	code, out, errOut = cli(t, "reset", "jobs", "-force", "-reason", "resize to 5", "-masters", masters)
	if code != exitOK || !strings.Contains(out, "jobs: reset") {
		t.Fatalf("reset jobs: exit %d:\n%s\n%s", code, out, errOut)
	}
	if _, rec := auditLine(t, errOut); rec.Event != "force-reset" || rec.Reason != "resize to 5" || len(rec.Masters) != 3 {
		t.Errorf("audit record %+v", rec)
	}
	for i := range c.N() {
		if keys, _ := c.Client(i).Keys(t.Context(), stem("jobs")+"*").Result(); len(keys) != 0 {
			t.Errorf("master %d keeps %q after the reset", i, keys)
		}
	}
	if lk, err := five.TryAcquire(t.Context()); err != nil {
		t.Errorf("5 permits after the reset: %v", err)
	} else {
		lk.Unlock(t.Context())
	}
	code, _, errOut = cli(t, "reset", "nothing-here", "-force", "-reason", "x", "-masters", masters)
	if code != exitRefused || !strings.Contains(errOut, "nothing to reset") || strings.Contains(errOut, `"event"`) {
		t.Errorf("reset of nothing: exit %d:\n%s", code, errOut)
	}
}
