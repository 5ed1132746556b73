package redlock

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/driver"
)

// The waker's subscriptions: one connection per master (subscriber.go),
// subscribed to the channels of the keys waited for and of the watched
// elections (watch.go), and the goroutines that keep them so and hand on
// what comes.

// subscriber owns one master's subscription connection.
type subscriber struct {
	i      int
	ps     pubSub
	notify chan struct{}   // the wanted channels changed
	have   map[string]bool // the channels subscribed
}

// startLocked starts one subscriber goroutine per master, and the sweeper
// that unsubscribes keys nobody has waited for in lingerFor. A detached
// Locker (env) starts none: its owner calls pump after each event, and
// the sweep runs on its timers.
func (w *waker) startLocked() {
	w.subs = make([]*subscriber, 0, len(w.masters))
	detached := w.env.detached()
	for i, m := range w.masters {
		ps := subscribe(w.ctx, m, w.given[i])
		if ps == nil {
			continue
		}
		s := &subscriber{i: i, ps: ps, notify: make(chan struct{}, 1), have: map[string]bool{}}
		w.subs = append(w.subs, s)
		if !detached {
			w.wg.Go(func() { w.run(s) })
		}
	}
	if detached {
		w.env.afterFunc(lingerFor/2, w.sweepTick)
		return
	}
	w.wg.Go(w.sweep)
}

// subscribe opens m's subscription connection, or returns nil where there
// is none to share: a *redis.Ring subscribes each channel on the one
// shard its name hashes to (and panics without a channel), so its
// waiters rely on their backoff alone. Any other client that panics here
// is treated alike. A master on the client path (nil m) has one when it
// is a Subscriber (subscriber.go).
func subscribe(ctx context.Context, m redis.UniversalClient, given driver.Master) (ps pubSub) {
	if m == nil {
		if sb, ok := given.(driver.Subscriber); ok {
			return newClientPubSub(sb)
		}
		return nil
	}
	if _, ok := m.(*redis.Ring); ok {
		return nil
	}
	defer func() {
		if recover() != nil {
			ps = nil
		}
	}()
	return m.Subscribe(ctx)
}

func (w *waker) notifyLocked() {
	for _, s := range w.subs {
		s.poke()
	}
}

// run is master s.i's subscriber: it keeps the subscriptions in line with
// the keys waited for, and hands every announcement to released. go-redis
// reconnects a dropped subscription and subscribes it again; what was
// published meanwhile is lost, and the waiters' backoff covers it.
func (w *waker) run(s *subscriber) {
	msgs := s.ps.Channel()
	for {
		select {
		case <-w.quit:
			return
		case m, ok := <-msgs:
			if !ok {
				return
			}
			w.message(s, m)
		case <-s.notify:
			w.reconcile(s)
		}
	}
}

// message hands the announcement m that s's master published to
// released, and pokes the channel's watchers.
func (w *waker) message(s *subscriber, m *redis.Message) {
	w.mu.Lock()
	w.pokedLocked(m.Channel)
	w.mu.Unlock()
	w.released(s.i, strings.TrimSuffix(m.Channel, w.suffix), m.Payload)
}

// pump does, without blocking, what the subscriber goroutines would: for
// each master in turn, the change of subscriptions asked for, then the
// announcements that came. A detached Locker has no such goroutines; its
// owner calls pump after each event.
func (w *waker) pump() {
	w.mu.Lock()
	subs := w.subs
	w.mu.Unlock()
	for _, s := range subs {
		if len(s.notify) > 0 {
			<-s.notify
			w.reconcile(s)
		}
		for msgs := s.ps.Channel(); len(msgs) > 0; {
			w.message(s, <-msgs)
		}
	}
}

// reconcile subscribes s to the keys waited for and unsubscribes it from
// the others. A master that does not answer holds up only its own
// subscriber.
func (w *waker) reconcile(s *subscriber) {
	w.mu.Lock()
	want := make(map[string]bool, 2*len(w.queues)+len(w.watched))
	for k := range w.queues {
		want[k], want[w.channel(k)] = true, true
	}
	for n := range w.watched {
		want[n] = true
	}
	var sub, unsub []string
	for n := range want {
		if !s.have[n] {
			sub = append(sub, n)
		}
	}
	for n := range s.have {
		if !want[n] {
			unsub = append(unsub, n)
		}
	}
	w.mu.Unlock()
	// In one order, whatever the maps' (the simulator replays a seed).
	slices.Sort(sub)
	slices.Sort(unsub)
	ctx := w.ctx // ended by close: a dial to a stalled master must not hold it up
	failed := false
	if len(sub) > 0 {
		if err := s.ps.Subscribe(ctx, sub...); err != nil {
			failed = true
		} else {
			for _, n := range sub {
				s.have[n] = true
			}
		}
	}
	if len(unsub) > 0 {
		if err := s.ps.Unsubscribe(ctx, unsub...); err != nil {
			failed = true
		} else {
			for _, n := range unsub {
				delete(s.have, n)
			}
		}
	}
	if failed {
		// The master is not answering: try again a little later (go-redis
		// redials), not in a tight loop.
		w.env.afterFunc(lingerFor/2, func() { s.poke() })
	}
}

// poke asks s to reconcile, without blocking.
func (s *subscriber) poke() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// sweep forgets keys that nobody has waited for in lingerFor.
func (w *waker) sweep() {
	var t *time.Timer // env.sleep's, kept for reuse
	for w.env.sleep(w.ctx, context.Background(), lingerFor/2, nil, &t) == wakeTimer {
		w.sweepOnce()
	}
	if t != nil {
		t.Stop()
	}
}

// sweepTick is the sweep of a detached Locker, on its timers until it
// closes.
func (w *waker) sweepTick() {
	if w.sweepOnce() {
		w.env.afterFunc(lingerFor/2, w.sweepTick)
	}
}

// sweepOnce forgets the keys that nobody has waited for in lingerFor, and
// reports whether the waker is still open.
func (w *waker) sweepOnce() bool {
	now := w.env.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	changed := false
	for k, q := range w.queues {
		if len(q.waiters) == 0 && now.Sub(q.idleSince) >= lingerFor {
			delete(w.queues, k)
			w.keys.Add(-1)
			changed = true
		}
	}
	if changed {
		w.notifyLocked()
	}
	return !w.closed
}

// close stops the subscribers and joins their goroutines.
func (w *waker) close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	close(w.quit)
	w.cancel()
	subs := w.subs
	w.mu.Unlock()
	for _, s := range subs {
		s.ps.Close()
	}
	w.wg.Wait()
}
