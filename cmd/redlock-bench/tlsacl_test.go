package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumlab/redlock/lab"
)

// benchACLRules are what the bench needs of a restricted user: the
// Locker's commands (lab.DefaultACLRules) on the bench's key prefix, EVAL
// for redsync's scripts (go-redis runs EVAL after a NOSCRIPT), SCAN to
// delete each cell's keys, PING to check the masters at start.
const benchACLRules = "resetkeys ~rlbench:* resetchannels -@all +set +evalsha +eval +script|load +info +get +del +pexpire +hget +hset +scan +ping"

// TestTLSACLMasters runs two 1 s cells against TLS masters given as
// rediss:// URLs with a restricted ACL user, and -tls-ca.
func TestTLSACLMasters(t *testing.T) {
	c, err := lab.Start(t.Context(), 3, &lab.Options{TLS: true, ACLUser: "bench", ACLRules: benchACLRules})
	switch {
	case errors.Is(err, lab.ErrNoRedisServer), errors.Is(err, lab.ErrNeedsProcessBackend):
		t.Skip(err)
	case err != nil:
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("lab: close: %v", err)
		}
	})
	var urls []string
	for i := range c.N() {
		urls = append(urls, c.URL(i))
	}
	_, password := c.ACLUser()
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	args := []string{"-addrs", strings.Join(urls, ","), "-tls-ca", c.CACertFile(),
		"-scenarios", "uncontended", "-impls", "redlock,redsync-failfast", "-duration", "1s", "-workers", "2", "-q", "-json", jsonPath}
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), args, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	rep := checkJSON(t, b)
	if rep.Masters.Kind != "addrs" || !strings.Contains(rep.Masters.Note, "TLS") || len(rep.Masters.Addrs) != 3 || rep.Masters.Addrs[0] != c.Addrs()[0] {
		t.Errorf("masters = %+v; want the three host:port addresses, TLS noted", rep.Masters)
	}
	for _, out := range [][]byte{b, stdout.Bytes(), stderr.Bytes()} {
		if bytes.Contains(out, []byte(password)) {
			t.Errorf("the ACL password appears in the output")
		}
	}
	if len(rep.Results) != 2 {
		t.Fatalf("%d results, want 2", len(rep.Results))
	}
	// A refused command would leave no op done, or count as "error" (an
	// unlock refused is ErrInvalid alone); timeouts on a loaded machine
	// are not this test's business.
	for _, r := range rep.Results {
		if r.Ops == 0 || r.Failures["error"]+r.Failures["unlock_error"] != 0 {
			t.Errorf("%s: %d ops, failures %v; want ops and no error", r.Impl, r.Ops, r.Failures)
		}
	}
	// The cells' keys were deleted by the restricted user (SCAN + DEL).
	for i := range c.N() {
		if n, err := c.Admin(i).DBSize(t.Context()).Result(); err != nil || n != 0 {
			t.Errorf("master %d: DBSIZE %d, %v; want 0", i, n, err)
		}
	}
}

// TestAddrsURLs: -addrs entries may be URLs; their passwords stay out of
// the config's addresses and of every error.
func TestAddrsURLs(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	c, err := lab.Start(t.Context(), 1, &lab.Options{TLS: true})
	switch {
	case errors.Is(err, lab.ErrNoRedisServer), errors.Is(err, lab.ErrNeedsProcessBackend):
		t.Skip(err)
	case err != nil:
		t.Fatal(err)
	}
	pem, err := os.ReadFile(c.CACertFile())
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ca, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := parseFlags([]string{"-addrs", "rediss://u:pw1@127.0.0.1:7001/2, redis://:pw2@127.0.0.1:7002,127.0.0.1:7003"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	o := cfg.masterOpts
	if len(o) != 3 || cfg.addrs[0] != "127.0.0.1:7001" || cfg.addrs[1] != "127.0.0.1:7002" ||
		o[0].Username != "u" || o[0].Password != "pw1" || o[0].DB != 2 || o[0].TLSConfig == nil ||
		o[1].Password != "pw2" || o[1].TLSConfig != nil || o[2].TLSConfig != nil {
		t.Errorf("parsed %v as %+v", cfg.addrs, o)
	}
	// -tls-ca: the CA for rediss:// URLs, and TLS for host:port entries.
	cfg, err = parseFlags([]string{"-addrs", "rediss://127.0.0.1:7001,127.0.0.1:7002", "-tls-ca", ca}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range cfg.masterOpts {
		if o.TLSConfig == nil || o.TLSConfig.RootCAs == nil {
			t.Errorf("master %d: no TLS with the CA: %+v", i, o.TLSConfig)
		}
	}
	bad := []struct {
		name, want string
		args       []string
	}{
		{"tls-ca with plain URL", "use rediss://", []string{"-addrs", "redis://:secret@127.0.0.1:1", "-tls-ca", ca}},
		{"tls-ca without addrs", "needs -addrs", []string{"-tls-ca", ca}},
		{"tls-ca unreadable", "-tls-ca", []string{"-addrs", "127.0.0.1:1", "-tls-ca", ca + ".missing"}},
		{"tls-ca not PEM", "no PEM", []string{"-addrs", "127.0.0.1:1", "-tls-ca", os.Args[0]}},
		{"bad scheme", "entry 1", []string{"-addrs", "http://u:secret@127.0.0.1:1"}},
		{"no port", "host:port", []string{"-addrs", "rediss://u:secret@127.0.0.1"}},
		{"same address twice", "twice", []string{"-addrs", "redis://u:secret@127.0.0.1:1,127.0.0.1:1"}},
	}
	for _, tt := range bad {
		_, err := parseFlags(tt.args, io.Discard)
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v; want a usage error saying %q", tt.name, err, tt.want)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: %v quotes the password", tt.name, err)
		}
	}
}
