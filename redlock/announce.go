package redlock

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Counting the release announcements (docs/design.md §14): what a master
// published on a key's channel, or on this Locker's channel for the key,
// and whom it wakes once enough masters agree.

// announcement is one master's message about a release of a key, in one
// of three forms:
//
//   - "<digest>": a release that named nobody (release.lua with an empty
//     queue or none, release_multi.lua), on the key's channel; digest is
//     the hex SHA-1 of the token released, or readersGone and the digest
//     of a writer's intent (rw_unread.lua: the last reader left);
//   - "<digest> <id>": a release that took the waiter id off the key's
//     queue on the masters and names it, on its Locker's channel;
//   - "<digest> <id> +": the master handed the key to the waiter id
//     (docs/design.md §14.3), setting it to the token whose SHA-1 is
//     digest, on its Locker's channel.
type announcement struct {
	digest string
	id     string // the waiter named or handed the key; "" for nobody
	handed bool   // the master set the key to id's token (the "+" form)
}

// errAnnouncement is the error of parseAnnouncement for a message in none
// of announcement's forms.
var errAnnouncement = errors.New("redlock: malformed release announcement")

// parseAnnouncement reads msg, a master's message about a release. A
// message in none of announcement's forms (no script publishes one: an
// empty digest or id, a word after the id other than "+", more words) is
// an error.
func parseAnnouncement(msg string) (announcement, error) {
	digest, rest, named := strings.Cut(msg, " ")
	if digest == "" {
		return announcement{}, fmt.Errorf("%w: %q: no digest", errAnnouncement, msg)
	}
	if !named {
		return announcement{digest: digest}, nil
	}
	id, tail, handed := strings.Cut(rest, " ")
	if id == "" {
		return announcement{}, fmt.Errorf("%w: %q: no waiter after the digest", errAnnouncement, msg)
	}
	if handed && tail != "+" {
		return announcement{}, fmt.Errorf("%w: %q: %q after the waiter, not \"+\"", errAnnouncement, msg, tail)
	}
	return announcement{digest: digest, id: id, handed: handed}, nil
}

// released counts master i's announcement msg that a token was released
// from key (its digest, then the waiter taken off the queue, if any), and
// once a majority of masters have announced the same, wakes that waiter if
// it is this Locker's, or with no waiter named, this Locker's first. A
// message in none of announcement's forms is ignored.
func (w *waker) released(i int, key, msg string) {
	if w.drop.Load() {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[key]
	if q == nil {
		return
	}
	a, err := parseAnnouncement(msg)
	if err != nil {
		return
	}
	if a.id == "" {
		q.freedAt = w.env.now()
	}
	if len(q.waiters) == 0 {
		if a.id == "" {
			q.handedAt = time.Time{}
		}
		return
	}
	if q.tally == nil {
		q.tally = map[string]int{}
	}
	if a.id != "" {
		if a.handed {
			// The master handed the key to one of this Locker's waiters.
			q.handedAt = w.env.now()
			// a.digest is the SHA-1 of the token the master set: a grant
			// of this waiter's own token, or not counted.
			if x := q.find(a.id); x != nil && x.grant != nil && a.digest == x.grant.digest {
				// Wake it on the first grant (it then waits for the
				// others, and gives back what it has if no majority
				// comes) and on the majority's.
				switch x.grant.got(i) {
				case 1:
					if x.wake() {
						w.woken.Add(1) // one per release, as for a waiter named
					}
				case w.need:
					x.wake()
				}
			}
			return
		}
		// Only this Locker hears it (its own channel): no tally needed.
		q.handedAt = w.env.now()
		if q.has(a.id) {
			// A writer is named: the readers waiting for it go in before
			// the next writer, whose intent their passes let them by
			// (rw_read.lua), as after a release naming nobody.
			w.woken.Add(q.wakeReaders())
			if q.named(i, a.id, msg, w.need, len(w.masters)) {
				w.woken.Add(1)
			}
			return
		}
		// It named a waiter of this Locker that has left (its entry
		// reached this master after the release that woke it): the key
		// is free all the same, and counts as a release naming nobody
		// (counted by its digest, as one that named nobody is).
		q.freedAt = w.env.now()
	}
	q.tally[a.digest]++
	if q.tally[a.digest] < w.need {
		if len(q.tally) > 64 { // releases that never reach a majority: forget them
			clear(q.tally)
		}
		return
	}
	delete(q.tally, a.digest)
	q.handedAt = time.Time{}
	if !strings.HasPrefix(a.digest, readersGone) {
		// A writer released: the readers may go (a writer's intent may
		// still refuse them; they then wait as before).
		w.woken.Add(q.wakeReaders())
	}
	if q.wakeOne() {
		w.woken.Add(1)
	}
}

// named counts a master's announcement that the release msg named the
// waiter id, and wakes it on the first: each master names the same waiter
// when they agree on the queue, so waiting for more would only slow the
// handoff; and again on the majority's if asked (wakeOnMajority). It
// reports whether it woke the waiter on the first.
func (q *waitQueue) named(i int, id, msg string, need, masters int) bool {
	for _, x := range q.waiters {
		if x.id != id {
			continue
		}
		if x.msg != msg {
			x.msg, x.named, x.newlyPopped, x.again = msg, 0, true, false
			if x.by == nil {
				x.by = make([]bool, masters)
			}
			clear(x.by)
		}
		if x.by[i] {
			return false // a duplicate
		}
		x.by[i] = true
		x.named++
		switch {
		case x.named == 1:
			return x.wake()
		case x.again && x.named == need:
			x.again = false
			x.wake()
		}
		return false
	}
	return false
}

// wakeOnMajority is called by wt's Lock when the round it made on a wake
// by name failed. now: a majority of masters have by now announced the
// release that named it (the key is free there): retry at once. later:
// they have not, and the majority's announcement will wake it again.
func (w *waker) wakeOnMajority(wt *waiter) (now, later bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if wt.msg == "" {
		return false, false
	}
	if wt.named >= w.need {
		return true, false
	}
	wt.again = true
	return false, true
}

// readersGone begins what rw_unread.lua announces on the writer key's
// channel when the last reader left while a writer waits (then the digest
// of the intent's token, so that the announcements of one drain are
// counted together): it wakes a writer, never the readers, whom that
// writer's intent refuses.
const readersGone = "readers:"
