package redlock

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// opsGroup counts a Locker's operations in progress (a sync.WaitGroup's
// Add and Done), and Close waits for them through the env: production
// blocks as WaitGroup.Wait does, and the deterministic simulator's Close,
// a coroutine of its process, yields while the operations it waits for
// run (docs/design.md §20).
type opsGroup struct {
	n        atomic.Int64
	idleOnce sync.Once
	idle     chan struct{} // a value once n fell to 0 (capacity 1)
}

func (g *opsGroup) ch() chan struct{} {
	g.idleOnce.Do(func() { g.idle = make(chan struct{}, 1) })
	return g.idle
}

// Add adds d operations.
func (g *opsGroup) Add(d int) { g.n.Add(int64(d)) }

// Done ends one operation.
func (g *opsGroup) Done() {
	if g.n.Add(-1) == 0 {
		select {
		case g.ch() <- struct{}{}:
		default:
		}
	}
}

// wait waits, on e, until no operation is in progress. Adds must have
// stopped (the Locker is closing): a value on idle left from an earlier
// fall to 0 only makes it look again.
func (g *opsGroup) wait(e env) {
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for g.n.Load() > 0 {
		e.sleep(context.Background(), context.Background(), time.Hour, g.ch(), &t)
	}
}
