package redlock

import (
	"strings"
	"time"
)

// Counting the release announcements (docs/design.md §14): what a master
// published on a key's channel, or on this Locker's channel for the key,
// and whom it wakes once enough masters agree.

// released counts master i's announcement msg that a token was released
// from key (its digest, then the waiter taken off the queue, if any), and
// once a majority of masters have announced the same, wakes that waiter if
// it is this Locker's, or with no waiter named, this Locker's first.
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
	if !strings.Contains(msg, " ") {
		q.freedAt = w.env.now()
	}
	if len(q.waiters) == 0 {
		if !strings.Contains(msg, " ") {
			q.handedAt = time.Time{}
		}
		return
	}
	if q.tally == nil {
		q.tally = map[string]int{}
	}
	if dig, head, named := strings.Cut(msg, " "); named {
		if id, _, handed := strings.Cut(head, " "); handed {
			// The master handed the key to one of this Locker's waiters.
			q.handedAt = w.env.now()
			// dig is the SHA-1 of the token the master set: a grant of
			// this waiter's own token, or not counted.
			if x := q.find(id); x != nil && x.grant != nil && dig == x.grant.digest {
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
		if q.has(head) {
			// A writer is named: the readers waiting for it go in before
			// the next writer, whose intent their passes let them by
			// (rw_read.lua), as after a release naming nobody.
			w.woken.Add(q.wakeReaders())
			if q.named(i, head, msg, w.need, len(w.masters)) {
				w.woken.Add(1)
			}
			return
		}
		// It named a waiter of this Locker that has left (its entry
		// reached this master after the release that woke it): the key
		// is free all the same, and counts as a release naming nobody.
		msg = dig
		q.freedAt = w.env.now()
	}
	q.tally[msg]++
	if q.tally[msg] < w.need {
		if len(q.tally) > 64 { // releases that never reach a majority: forget them
			clear(q.tally)
		}
		return
	}
	delete(q.tally, msg)
	q.handedAt = time.Time{}
	if !strings.HasPrefix(msg, readersGone) {
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
			x.msg, x.named, x.popped, x.again = msg, 0, true, false
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
