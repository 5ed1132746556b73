package chaos

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// reachEvery is how often the prober PINGs every master.
const reachEvery = 20 * time.Millisecond

// A prober watches, from outside the Lockers, how many masters answer:
// every reachEvery it PINGs each master on a connection of its own, with
// the plan's MasterTimeout to answer. The schedule applies one fault episode
// at a time, each touching a minority, but when a fault's effect ends is
// not the schedule's to say (a new container accepting connections, a
// network reconnected): the prober tells whether a majority answered while
// a Lock call waited. It reads the masters' health, not the Lockers' view
// of them (a Locker may still refuse a master it lost the connection to,
// until it dials again).
type prober struct {
	timeout time.Duration // each PING's
	stop    context.CancelFunc
	done    sync.WaitGroup
	mu      sync.Mutex
	samples []reachSample // in time order
}

// reachSample is one round of PINGs: when it began (monoNow) and how many
// masters answered.
type reachSample struct {
	at int64
	up int
}

func startProber(ctx context.Context, addrs []string, timeout time.Duration) *prober {
	ctx, cancel := context.WithCancel(ctx)
	p := &prober{timeout: timeout, stop: cancel}
	clients := make([]*redis.Client, len(addrs))
	for i, a := range addrs {
		clients[i] = redis.NewClient(&redis.Options{Addr: a, DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, MaxRetries: -1, PoolSize: 1})
	}
	p.done.Go(func() {
		defer func() {
			for _, c := range clients {
				_ = c.Close()
			}
		}()
		tick := time.NewTicker(reachEvery)
		defer tick.Stop()
		for {
			at := monoNow()
			var up atomic.Int32
			var wg sync.WaitGroup
			for _, c := range clients {
				wg.Go(func() {
					pctx, cancel := context.WithTimeout(ctx, timeout)
					defer cancel()
					if c.Ping(pctx).Err() == nil {
						up.Add(1)
					}
				})
			}
			wg.Wait()
			if ctx.Err() != nil {
				return
			}
			p.mu.Lock()
			p.samples = append(p.samples, reachSample{at: at, up: int(up.Load())})
			p.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	return p
}

// close stops the prober and waits for it.
func (p *prober) close() {
	p.stop()
	p.done.Wait()
}

// fill sets r's figures of reach: the time during which fewer than need
// masters answered the prober (from a round that found so to the next
// round), and how many failed Lock calls waited through some of it.
func (p *prober) fill(r *Result, need int, as []Acquire) {
	p.mu.Lock()
	defer p.mu.Unlock()
	type span struct{ from, to int64 }
	var short []span // the times with fewer than need masters answering
	for i, s := range p.samples {
		if s.up >= need {
			continue
		}
		to := s.at + int64(reachEvery)
		if i+1 < len(p.samples) {
			to = p.samples[i+1].at
		}
		short = append(short, span{s.at, to})
		r.MinorityExceeded += time.Duration(to - s.at)
	}
	for _, a := range as {
		if a.OK || a.Start == 0 {
			continue
		}
		end := a.Start + int64(a.Latency)
		for _, sp := range short {
			if sp.from < end && sp.to > a.Start {
				r.FailedWithoutMajority++
				break
			}
		}
	}
}

// covers is how long after its start a prober round's count stands for
// the masters, when the next round is late: twice the longest a round
// and the wait for the next take (its PINGs' timeout, then reachEvery).
// A later next round means the prober itself did not run (its process
// descheduled on a loaded machine): what the masters did then, it did not
// see.
func (p *prober) covers() int64 { return int64(2 * (p.timeout + reachEvery)) }

// unobserved is how much of [from, to] no prober round covered (covers):
// a stretch in which the prober cannot say that a majority answered.
func (p *prober) unobserved(from, to int64) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var gap time.Duration
	seen := from // [from, seen] is covered or counted
	for i, s := range p.samples {
		end := s.at + p.covers()
		if i+1 < len(p.samples) {
			end = min(end, p.samples[i+1].at)
		}
		if end < from {
			continue
		}
		if s.at > to {
			break
		}
		if s.at > seen {
			gap += time.Duration(s.at - seen)
		}
		seen = max(seen, end)
	}
	if seen < to {
		gap += time.Duration(to - seen)
	}
	return gap
}
