package redlock

import "slices"

// The watch of elections: an Election's observers (election.go, where
// Observe registers one with Locker.watch) are poked by the messages on
// its channels, which the waker's subscriptions (subscriptions.go) carry
// beside the keys waited for.

// watcher is an observer of some channels (an Election's Observe): c
// gets a value, without blocking, when a message comes on any of them.
type watcher struct {
	w     *waker
	names []string
	c     chan struct{}
}

// stop takes x off its channels; they are unsubscribed when nobody else
// watches them.
func (x *watcher) stop() {
	w := x.w
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range x.names {
		left := slices.DeleteFunc(w.watched[n], func(y *watcher) bool { return y == x })
		if len(left) == 0 {
			delete(w.watched, n)
		} else {
			w.watched[n] = left
		}
	}
	w.notifyLocked()
}

// pokedLocked hands a message on channel to its watchers. w.mu is held.
func (w *waker) pokedLocked(channel string) {
	for _, x := range w.watched[channel] {
		select {
		case x.c <- struct{}{}:
		default:
		}
	}
}
