package redlock

import "slices"

// The watch of elections: an Election's observers (election.go) are poked
// by the messages on its channels, which the waker's subscriptions
// (subscriptions.go) carry beside the keys waited for.

// watcher is an observer of some channels (an Election's Observe): c
// gets a value, without blocking, when a message comes on any of them.
type watcher struct {
	w     *waker
	names []string
	c     chan struct{}
}

// watch subscribes, on every master that has a subscription connection,
// to the channels names, and returns the watcher that their messages
// poke. Nothing here is needed for correctness: a message lost, or a
// master without the connection, leaves the observer to its poll.
func (l *Locker) watch(names ...string) *watcher {
	w := l.wake
	x := &watcher{w: w, names: names, c: make(chan struct{}, 1)}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return x
	}
	if w.watched == nil {
		w.watched = map[string][]*watcher{}
	}
	for _, n := range names {
		w.watched[n] = append(w.watched[n], x)
	}
	if w.subs == nil {
		w.startLocked()
	}
	w.notifyLocked()
	return x
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
