package main

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// The CLI against masters with TLS (a test CA) and an ACL user: an
// operator's account (here the lab's admin) inspects and force-releases
// over rediss:// URLs; the library's restricted user is refused commands
// the CLI needs, and the error names them rather than hanging or
// claiming the lock is free.
func TestTLSAndACLMasters(t *testing.T) {
	c, err := lab.Start(t.Context(), 3, &lab.Options{TLS: true, ACLUser: "redlock"})
	if errors.Is(err, lab.ErrNeedsProcessBackend) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// Dial (TLS handshakes included) before the first round, and a
	// MasterTimeout that a loaded machine does not overrun: this test is
	// about what the CLI says, not about timing.
	for _, cl := range c.Clients() {
		if err := cl.Ping(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	l, err := redlock.New(c.Clients(), &redlock.Options{OwnerLabel: "tls-host:1", MasterTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	lk, err := l.TryLock(t.Context(), "tls:1")
	if err != nil {
		t.Fatal(err)
	}

	admin := make([]string, c.N())
	for i := range c.N() {
		u := url.URL{Scheme: "rediss", Host: c.Addrs()[i], User: url.UserPassword("default", c.Admin(i).Options().Password)}
		admin[i] = u.String()
	}
	ca := c.CACertFile()
	code, out, errOut := cli(t, "inspect", "-masters", strings.Join(admin, ","), "-tls-ca", ca, "tls:1")
	if code != exitOK || !strings.Contains(out, "HELD by "+short(lk.Token())) || !strings.Contains(out, "tls-host:1") {
		t.Fatalf("inspect over TLS as admin: exit %d\n%s\n%s", code, out, errOut)
	}
	if pw := c.Admin(0).Options().Password; pw == "" || strings.Contains(out+errOut, pw) {
		t.Fatalf("the admin password (%d bytes) is empty or in the output", len(pw))
	}

	// The library's user may not run what inspect needs.
	restricted := make([]string, c.N())
	for i := range c.N() {
		restricted[i] = c.URL(i)
	}
	code, out, errOut = cli(t, "inspect", "-masters", strings.Join(restricted, ","), "-tls-ca", ca, "tls:1")
	if code == exitOK || !strings.Contains(out+errOut, "NOPERM") {
		t.Fatalf("inspect as the restricted user: exit %d, want an error naming the refused command\nOUT:%s\nERR:%s", code, out, errOut)
	}
	if code != exitQuorum || !strings.Contains(out, "'multi' command") || strings.Contains(out, "NOT HELD") {
		t.Fatalf("inspect as the restricted user: exit %d, want %d (cannot tell) naming MULTI, never NOT HELD\n%s\n%s", code, exitQuorum, out, errOut)
	}

	// The operator account docs/runbook.md suggests is enough for all
	// three commands.
	ops := make([]string, c.N())
	for i := range c.N() {
		args := []any{"ACL", "SETUSER", "lockops"}
		for _, r := range strings.Fields(runbookOpsRules) {
			args = append(args, r)
		}
		if err := c.Admin(i).Do(t.Context(), args...).Err(); err != nil {
			t.Fatal(err)
		}
		u := url.URL{Scheme: "rediss", Host: c.Addrs()[i], User: url.UserPassword("lockops", "ops-secret")}
		ops[i] = u.String()
	}
	if code, out, errOut := cli(t, "list", "-masters", strings.Join(ops, ","), "-tls-ca", ca); code != exitOK || !strings.Contains(out, "tls:1") {
		t.Fatalf("list as lockops: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = cli(t, "release", "-masters", strings.Join(ops, ","), "-tls-ca", ca, "--force", "--reason", "tls test", "tls:1")
	if code != exitOK {
		t.Fatalf("release over TLS as admin: exit %d\n%s\n%s", code, out, errOut)
	}
	for i := range c.N() {
		if n, err := c.Admin(i).Exists(t.Context(), "redlock:{tls:1}").Result(); err != nil || n != 0 {
			t.Errorf("master %d: EXISTS = %d, %v after release --force", i, n, err)
		}
	}
}

// runbookOpsRules is the operator account of docs/runbook.md ("Which
// account"), with its password.
const runbookOpsRules = "on >ops-secret resetkeys ~redlock:* -@all +multi +exec +get +pttl +hget +scan +evalsha +eval +del +xadd"
