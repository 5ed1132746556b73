package redlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/quorumlab/redlock/quorum"
	"github.com/redis/go-redis/v9"
)

// maxDeferred bounds the releases remembered per master. Past it the
// oldest are dropped: their keys expire with their TTL anyway.
const maxDeferred = 4096

// A release that could not be delivered: the master was not answering
// (its breaker was open, or the call timed out). Without it, a key on a
// master that was stalled while we released would block the resource on
// that master until its TTL.
type deferredRelease struct {
	key, token string
	expires    time.Time // after this the key is gone by itself
}

// janitor delivers deferred releases once their master answers again. Its
// one goroutine starts with the first deferral and is joined by Close.
type janitor struct {
	mu      sync.Mutex
	pending [][]deferredRelease // per master
	started bool
	wake    chan struct{} // capacity 1
	stop    chan struct{}
	wg      sync.WaitGroup
}

func newJanitor(n int) *janitor {
	return &janitor{pending: make([][]deferredRelease, n), wake: make(chan struct{}, 1), stop: make(chan struct{})}
}

// deferRelease remembers that key must be released on every master in
// nodes when it answers again.
func (l *Locker) deferRelease(nodes []int, key, token string) {
	if len(nodes) == 0 {
		return
	}
	j := l.janitor
	expires := time.Now().Add(l.opts.TTL)
	j.mu.Lock()
	select {
	case <-j.stop: // closed: the keys expire with their TTL
		j.mu.Unlock()
		return
	default:
	}
	for _, i := range nodes {
		if len(j.pending[i]) >= maxDeferred {
			j.pending[i] = j.pending[i][1:]
		}
		j.pending[i] = append(j.pending[i], deferredRelease{key, token, expires})
	}
	if !j.started {
		// Under j.mu, so that close (which takes it before waiting) either
		// sees this goroutine counted or makes us return above.
		j.started = true
		j.wg.Go(l.janitorLoop)
	}
	j.mu.Unlock()
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// undelivered lists the masters on which a release did not certainly land.
func undelivered[T any](res quorum.Result[T]) []int {
	var nodes []int
	for i, r := range res.Replies {
		if r.Outcome != quorum.OK && r.Outcome != quorum.Refused && !errors.Is(r.Err, errSkipped) {
			nodes = append(nodes, i)
		}
	}
	return nodes
}

func (l *Locker) janitorLoop() {
	j := l.janitor
	tick := max(l.opts.NodeTimeout, 50*time.Millisecond)
	t := time.NewTimer(tick)
	defer t.Stop()
	for {
		select {
		case <-j.stop:
			return
		case <-j.wake:
		case <-t.C:
		}
		if l.flushDeferred() {
			t.Reset(tick)
		}
	}
}

// flushBatch bounds one delivery to a master: a master that was down
// for a while gets its backlog in slices, not all at once.
const flushBatch = 256

// flushDeferred delivers, to each master that is answering again (or may
// be probed), up to flushBatch of its pending releases, through the group
// (so a master still down gets no more than the breaker's probe). It
// reports whether anything is still pending.
func (l *Locker) flushDeferred() bool {
	j := l.janitor
	now := time.Now()
	batches := make([][]deferredRelease, len(l.masters))
	j.mu.Lock()
	anyPending, anyBatch := false, false
	for i, p := range j.pending {
		live := p[:0]
		for _, d := range p {
			if now.Before(d.expires) {
				live = append(live, d)
			}
		}
		clear(p[len(live):])
		j.pending[i] = live
		anyPending = anyPending || len(live) > 0
		if len(live) > 0 && l.group.Available(i) {
			batches[i] = append([]deferredRelease(nil), live[:min(len(live), flushBatch)]...)
			anyBatch = true
		}
	}
	j.mu.Unlock()
	if !anyBatch {
		return anyPending
	}
	res := quorum.Run(context.Background(), l.group, quorum.Op[struct{}]{
		Need:    1,
		WaitAll: true,
		Call: func(ctx context.Context, i int) (struct{}, error) {
			if len(batches[i]) == 0 {
				return struct{}{}, nil
			}
			// One pipelined round trip for the batch; EVAL rather than
			// EVALSHA because a pipeline cannot fall back on NOSCRIPT.
			_, err := l.masters[i].Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, d := range batches[i] {
					p.Eval(ctx, releaseSrc, []string{d.key}, d.token)
				}
				return nil
			})
			return struct{}{}, err
		},
	})
	j.mu.Lock()
	defer j.mu.Unlock()
	still := false
	for i, r := range res.Replies {
		if r.Outcome == quorum.OK && len(batches[i]) > 0 {
			// Drop what was delivered; keep what was added meanwhile.
			j.pending[i] = j.pending[i][min(len(batches[i]), len(j.pending[i])):]
		}
		still = still || len(j.pending[i]) > 0
	}
	return still
}

// close stops the janitor's goroutine and waits for it.
func (j *janitor) close() {
	j.mu.Lock()
	select {
	case <-j.stop:
	default:
		close(j.stop)
	}
	j.mu.Unlock()
	j.wg.Wait()
}
