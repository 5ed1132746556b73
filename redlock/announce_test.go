package redlock

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A master's message about a release reads as one of announcement's three
// forms, or is an error (never a panic) for anything else: no script
// publishes one.
func TestParseAnnouncement(t *testing.T) {
	const dig = "2fd4e1c67a2d28fced849ee1bb76e7391b93eb12"
	ok := []struct {
		msg  string
		want announcement
	}{
		{dig, announcement{digest: dig}},
		{"d1", announcement{digest: "d1"}},
		{readersGone + dig, announcement{digest: readersGone + dig}},
		{dig + " 0a1b.2", announcement{digest: dig, id: "0a1b.2"}},
		{dig + " 0a1b.2 +", announcement{digest: dig, id: "0a1b.2", handed: true}},
		{"d2 x", announcement{digest: "d2", id: "x"}},
	}
	for _, c := range ok {
		got, err := parseAnnouncement(c.msg)
		if err != nil || got != c.want {
			t.Errorf("parseAnnouncement(%q) = %+v, %v; want %+v, nil", c.msg, got, err, c.want)
		}
	}
	bad := []string{
		"",               // nothing
		" ",              // no digest, no waiter
		" 0a1b.2",        // no digest
		" 0a1b.2 +",      // no digest
		dig + " ",        // a space, then no waiter
		dig + "  +",      // no waiter before the "+"
		dig + " 0a1b.2 ", // a space after the waiter, then nothing
		dig + " 0a1b.2 -",
		dig + " 0a1b.2 ++",
		dig + " 0a1b.2 + +", // more words
		dig + " 0a1b.2 + extra",
		dig + " 0a1b.2 1000 token", // a queue member's form, not a grant's
	}
	for _, msg := range bad {
		got, err := parseAnnouncement(msg)
		if !errors.Is(err, errAnnouncement) || got != (announcement{}) {
			t.Errorf("parseAnnouncement(%q) = %+v, %v; want the zero announcement and errAnnouncement", msg, got, err)
		}
	}
}

// A malformed message counts for nothing: it neither frees the key, nor
// tallies, nor wakes a waiter, however many masters send it.
func TestMalformedAnnouncementIgnored(t *testing.T) {
	l := &Locker{need: 2, masters: make([]redis.UniversalClient, 3), env: sysEnv{}}
	w := newWaker(l.env, l.masters, l.given, l.need)
	const key = "redlock:{r}"
	x := &waiter{ch: make(chan struct{}, 1), keys: []string{key}, id: w.id + ".1"}
	q := &waitQueue{waiters: []*waiter{x}}
	w.queues[key] = q
	for i := range 3 {
		w.released(i, key, "d ")
		w.released(i, key, " "+x.id)
		w.released(i, key, "d "+x.id+" + +")
	}
	if len(x.ch) != 0 || q.freedAt != (time.Time{}) || q.handedAt != (time.Time{}) || len(q.tally) != 0 || w.woken.Load() != 0 {
		t.Errorf("malformed announcements: wake pending %v, freed at %v, handed at %v, tally %v, %d woken; want none of them",
			len(x.ch) != 0, q.freedAt, q.handedAt, q.tally, w.woken.Load())
	}
	w.released(0, key, "d")
	w.released(1, key, "d")
	if len(x.ch) != 1 {
		t.Error("a well-formed release announced by a majority did not wake the waiter after the malformed ones")
	}
}
