package telemetry_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
)

// An acquisition left with less than half its TTL counts in
// redlock.acquire.short_validity every time, and is logged as a warning
// once per resource label. A SafetyMargin of 600 ms on a 1 s TTL leaves a
// window of 388 ms: every acquisition is short. One that is not (TTL 1 s,
// no margin) neither counts nor logs.
func TestShortValidityWarnsOncePerLabel(t *testing.T) {
	c := lab.ForTest(t, 5, nil)
	const msg = "redlock: acquired with less than half the TTL left"
	take := func(l *redlock.Locker, resources ...string) {
		for _, r := range resources {
			lk, err := l.Lock(t.Context(), r)
			if err != nil {
				t.Fatal(err)
			}
			if err := lk.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
	logs := &logRecorder{}
	l, reader, _ := setup(t, c, redlock.Options{Logger: slog.New(logs), TTL: time.Second, SafetyMargin: 600 * time.Millisecond,
		ResourceLabel: func(r string) string { return r[:1] }})
	take(l, "a1", "a2", "a1", "b1")
	if n := sum(t, collect(t, reader), "redlock.acquire.short_validity"); n != 4 {
		t.Fatalf("short_validity counted %d acquisitions, want 4", n)
	}
	recs := logs.find(msg)
	if len(recs) != 2 || attr(recs[0], "label") != "a" || attr(recs[1], "label") != "b" {
		var labels []string
		for _, r := range recs {
			labels = append(labels, attr(r, "label"))
		}
		t.Fatalf("%d warnings (labels %q), want one for label a and one for b", len(recs), labels)
	}

	logs2 := &logRecorder{}
	l2, reader2, _ := setup(t, c, redlock.Options{Logger: slog.New(logs2), TTL: time.Second})
	take(l2, "a1", "b1")
	if n := sum(t, collect(t, reader2), "redlock.acquire.short_validity"); n != 0 {
		t.Fatalf("short_validity counted %d acquisitions with 988 ms of 1 s left, want 0", n)
	}
	if recs := logs2.find(msg); len(recs) != 0 {
		t.Fatalf("%d warnings with 988 ms of 1 s left, want 0", len(recs))
	}
}
