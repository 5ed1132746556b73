package redlock_test

import (
	"bytes"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// With OwnerLabel every token is "<label>/<22 base64url chars>" on every
// master, on both transports, and logs show the label with the random part
// shortened.
func TestOwnerLabelInToken(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	random := regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`)
	for _, via := range []bool{false, true} {
		var logs bytes.Buffer
		log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		l := newLocker(t, c, &redlock.Options{OwnerLabel: "host-1:4242", ViaClient: via, Logger: log})
		resource := "owner-label"
		if via {
			resource += "-via-client"
		}
		lk, err := l.TryLock(t.Context(), resource)
		if err != nil {
			t.Fatalf("ViaClient=%v: TryLock: %v", via, err)
		}
		key, _, err := redlock.KeyFor(nil, resource)
		if err != nil {
			t.Fatal(err)
		}
		tok := lk.Token()
		label, rnd, ok := strings.Cut(tok, "/")
		if !ok || label != "host-1:4242" || !random.MatchString(rnd) {
			t.Errorf("ViaClient=%v: token %q is not host-1:4242/<22 base64url chars>", via, tok)
		}
		// TryLock returned at a majority: the other SETs may still be on
		// their way.
		waitFor(t, "the token on every master", func() bool { return countValue(keyOn(t, c, key), tok) == c.N() })
		want := "token=host-1:4242/" + rnd[:6] + "…"
		if s := logs.String(); !strings.Contains(s, want) || strings.Contains(s, rnd) {
			t.Errorf("ViaClient=%v: log does not show %q, or shows the whole token:\n%s", via, want, s)
		}
		if err := lk.Unlock(t.Context()); err != nil {
			t.Errorf("ViaClient=%v: Unlock: %v", via, err)
		}
		waitFor(t, "the key gone from every master", func() bool { return countValue(keyOn(t, c, key), "") == c.N() })
	}
}

func TestOwnerLabelInvalid(t *testing.T) {
	c := lab.ForTest(t, 1, nil)
	for _, label := range []string{
		strings.Repeat("a", redlock.MaxOwnerLabelLen+1),
		"host/1",
		"host 1",
		"host\t1",
		"host\u00a01", // no-break space
		"host\x001",
		"host\x7f",
		"\xff\xfe",
	} {
		l, err := redlock.New(c.Clients(), &redlock.Options{OwnerLabel: label})
		if !errors.Is(err, redlock.ErrInvalid) {
			if l != nil {
				l.Close()
			}
			t.Errorf("OwnerLabel %q: err = %v, want ErrInvalid", label, err)
		}
	}
	l, err := redlock.New(c.Clients(), &redlock.Options{OwnerLabel: strings.Repeat("é", redlock.MaxOwnerLabelLen/2)})
	if err != nil {
		t.Fatalf("a %d-byte label: %v", redlock.MaxOwnerLabelLen, err)
	}
	l.Close()
}

func TestKeyForAndResourceFor(t *testing.T) {
	for _, tc := range []struct {
		opts              *redlock.Options
		resource          string
		lock, fence       string
		otherKeys         []string // not lock keys under opts
		resourceForResult bool
	}{
		{nil, "invoice:42", "redlock:{invoice:42}", "redlock:{invoice:42}:fence",
			[]string{"redlock:{invoice:42}:fence", "redlock:invoice:42", "other:{invoice:42}", "redlock:audit", "redlock:{}"}, true},
		{&redlock.Options{KeyPrefix: "app:"}, "a/b", "app:{a/b}", "app:{a/b}:fence",
			[]string{"redlock:{a/b}", "app:{a/b}x"}, true},
		{&redlock.Options{RedsyncKeys: true}, "job", "job", "job:fence", []string{"job:fence"}, true},
		{&redlock.Options{RedsyncKeys: true, KeyPrefix: "rs:"}, "{x}", "rs:{x}", "rs:{x}:fence", []string{"x", "rs:"}, true},
	} {
		lock, fence, err := redlock.KeyFor(tc.opts, tc.resource)
		if err != nil || lock != tc.lock || fence != tc.fence {
			t.Errorf("KeyFor(%+v, %q) = %q, %q, %v; want %q, %q", tc.opts, tc.resource, lock, fence, err, tc.lock, tc.fence)
		}
		if r, ok := redlock.ResourceFor(tc.opts, lock); !ok || r != tc.resource {
			t.Errorf("ResourceFor(%+v, %q) = %q, %v; want %q", tc.opts, lock, r, ok, tc.resource)
		}
		for _, k := range tc.otherKeys {
			if r, ok := redlock.ResourceFor(tc.opts, k); ok {
				t.Errorf("ResourceFor(%+v, %q) = %q, true; want false", tc.opts, k, r)
			}
		}
	}
	for _, tc := range []struct {
		opts     *redlock.Options
		resource string
	}{
		{nil, ""},
		{nil, "}x"},
		{&redlock.Options{KeyPrefix: "a{"}, "x"},
		{&redlock.Options{RedsyncKeys: true}, "x:fence"},
	} {
		if _, _, err := redlock.KeyFor(tc.opts, tc.resource); !errors.Is(err, redlock.ErrInvalid) {
			t.Errorf("KeyFor(%+v, %q): err = %v, want ErrInvalid", tc.opts, tc.resource, err)
		}
	}
}
