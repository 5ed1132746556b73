package lab_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/lab"
)

// TestTLSAndACL: masters with TLS and an ACL user. Client logs in as the
// user (limited to lab.DefaultACLRules), Admin as the lab's admin; the
// fault operations that need an admin connection (Slow, JumpClock) work
// and a restarted master has its user again; URL and CACertFile are
// enough for a client configured from outside; the proxy carries TLS.
func TestTLSAndACL(t *testing.T) {
	c, err := lab.Start(t.Context(), 2, &lab.Options{TLS: true, ACLUser: "locker", ACLPassword: "s3cret", Proxy: true})
	if errors.Is(err, lab.ErrNeedsProcessBackend) {
		t.Skip(err) // REDLOCK_LAB_BACKEND=docker
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	ctx := t.Context()
	if u, p := c.ACLUser(); u != "locker" || p != "s3cret" {
		t.Fatalf("ACLUser() = %q, %q", u, p)
	}
	if who, err := c.Client(0).Do(ctx, "ACL", "WHOAMI").Text(); err == nil {
		t.Errorf("the user may run ACL WHOAMI (%q); DefaultACLRules do not allow it", who)
	}
	if err := c.Client(0).Set(ctx, "redlock:k", "v", time.Minute).Err(); err != nil {
		t.Fatalf("SET under the prefix as the user: %v", err)
	}
	if err := c.Client(0).Set(ctx, "k", "v", time.Minute).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
		t.Errorf("SET outside the prefix as the user = %v, want NOPERM", err)
	}
	if who, err := c.Admin(0).Do(ctx, "ACL", "WHOAMI").Text(); err != nil || who != "default" {
		t.Errorf("Admin: ACL WHOAMI = %q, %v; want default", who, err)
	}
	// Through the proxy, by URL and the CA file alone.
	pem, err := os.ReadFile(c.CACertFile())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("CACertFile %s holds no certificate", c.CACertFile())
	}
	if !strings.HasPrefix(c.URL(1), "rediss://locker:s3cret@127.0.0.1:") {
		t.Errorf("URL(1) = %q", c.URL(1))
	}
	o, err := redis.ParseURL(c.URL(1))
	if err != nil {
		t.Fatal(err)
	}
	o.TLSConfig.RootCAs = pool
	byURL := redis.NewClient(o)
	defer byURL.Close()
	if err := byURL.Set(ctx, "redlock:url", "v", time.Minute).Err(); err != nil {
		t.Errorf("SET by URL: %v", err)
	}
	// A client that does not trust the lab's CA is refused.
	untrusting := redis.NewClient(&redis.Options{Addr: c.Addrs()[1], TLSConfig: &tls.Config{}, MaxRetries: -1})
	defer untrusting.Close()
	var unknown x509.UnknownAuthorityError
	if err := untrusting.Ping(ctx).Err(); !errors.As(err, &unknown) {
		t.Errorf("PING without the lab's CA = %v, want x509.UnknownAuthorityError", err)
	}

	// Admin-only faults.
	if n, err := c.JumpClock(ctx, 0, time.Hour); err != nil || n != 1 {
		t.Errorf("JumpClock = %d, %v; want the one key", n, err)
	}
	if err := c.Slow(ctx, 1, 300*time.Millisecond); err != nil {
		t.Errorf("Slow: %v", err)
	}
	if err := c.Restart(ctx, 0); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if err := c.Client(0).Set(ctx, "redlock:after", "v", time.Minute).Err(); err != nil {
		t.Errorf("SET as the user after Restart: %v", err)
	}
}

// TestSecurityOptionErrors: options that cannot work are errors at Start,
// before anything runs.
func TestSecurityOptionErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    lab.Options
		want string
	}{
		{"password without user", lab.Options{ACLPassword: "x"}, "need ACLUser"},
		{"rules without user", lab.Options{ACLRules: "+get"}, "need ACLUser"},
		{"default user", lab.Options{ACLUser: "default"}, "other than \"default\""},
		{"spaces in password", lab.Options{ACLUser: "u", ACLPassword: "a b"}, "spaces"},
		{"docker TLS", lab.Options{Backend: lab.Docker, TLS: true}, lab.ErrNeedsProcessBackend.Error()},
		{"docker ACL", lab.Options{Backend: lab.Docker, ACLUser: "u"}, lab.ErrNeedsProcessBackend.Error()},
	} {
		c, err := lab.Start(t.Context(), 1, &tc.o)
		if err == nil {
			c.Close()
			t.Errorf("%s: Start succeeded", tc.name)
		} else if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want it to say %q", tc.name, err, tc.want)
		}
	}
}
