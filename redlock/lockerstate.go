package redlock

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/driver"
	"github.com/quorumlab/redlock/validity"
)

// What a Locker holds: the Locker, and the types of the fields that only
// it holds: the locks it handed out (liveLocks, for Shutdown), its
// keeper's schedule (keeper, dueHeap), the labels whose short validity
// was logged (shortWarned). What they do is in shutdown.go, keeper.go and
// short.go.

// Locker acquires locks on a fixed set of independent Redis masters. It is
// safe for concurrent use. Close it when done: it owns one connection (or,
// on the plain path, one flusher) per master.
type Locker struct {
	masters []redis.UniversalClient // nil for a master on the client path
	given   []driver.Master         // as given; Close closes those the Locker made (closeOwned)
	addrs   []string
	opts    Options
	budget  validity.Budget
	need    int
	streams []pathway
	log     *slog.Logger
	tel     *telemetry
	wake    *waker
	env     env // the clock, randomness and waits (env.go)

	// Shutdown (shutdown.go), the keeper's pacing and Stats (pace.go), the
	// short-validity warning (short.go).
	live        liveLocks   // locks not unlocked, for Shutdown
	pace        pace        // recent round times, for the keeper and Stats
	keeper      keeper      // extends every Held (keeper.go)
	shortWarned shortWarned // labels whose short validity was logged

	mu             sync.Mutex
	closing        bool
	quit           context.Context // done when Close begins (the keeper's long waits end then)
	endQuit        context.CancelFunc
	closeOwnedOnce sync.Once
	ops            opsGroup     // operations in progress; Close waits for them
	ids            identities   // which server each master reaches (transport.go)
	tried          atomic.Int32 // streams whose first dial has ended
	rounds         atomic.Int32 // rounds in flight (pathConfig.Rounds)

	// betweenRounds, when set by tests (export_test.go), runs between the
	// two rounds of a fenced acquisition; afterLock, between the Lock of
	// a Hold or Do and the keeping of its lock; afterKeep, between a
	// Campaign's Keep and the publishing of its value; beforeRelease,
	// in Unlock (and Shutdown's) between the end of the lock's lifetime
	// and the sending of its release.
	betweenRounds, afterLock, afterKeep func()
	beforeRelease                       func(resource string)

	// Rounds in a row without a majority answering, since when, and when
	// that was last logged (unix ns; logs.go).
	noQuorumRounds, noQuorumSince, noQuorumWarned atomic.Int64
}

// liveLocks is the set of locks a Locker handed out and that were not
// unlocked, for Shutdown to release. Once closed it takes no more: an
// acquisition that completes after that releases what it took.
type liveLocks struct {
	mu     sync.Mutex
	locks  map[*Lock]uint64 // by the order added (seq)
	seq    uint64
	closed bool
	prune  int // prune lapsed locks when the set reaches this size
}

// keeper extends every Held of one Locker (docs/design.md §8, "Keeping
// many leases"): a min-heap of the times each Held's next extension falls
// due, one goroutine that sleeps until the earliest, and up to keepWorkers
// goroutines that run the extensions that are due. The goroutine runs
// only while some Held is kept, and the workers only while an extension
// is due: a Locker that keeps nothing has none.
//
// Each Held's loss is declared by its own timer (Held.lost), not by the
// keeper: a slow or stalled keeper delays extensions, never the loss
// signal.
type keeper struct {
	mu      sync.Mutex
	base    time.Time       // due times count from it (monotonic); set once
	env     env             // the Locker's clock
	quit    context.Context // the Locker's: done when Close begins, and the goroutine then returns
	due     dueHeap
	live    int           // Helds kept (added and not left)
	running bool          // the goroutine runs
	wakeup  chan struct{} // the earliest due time moved earlier, or live fell to 0
	ready   []*lifetime   // due, not yet taken by a worker; ready[head:] is pending
	head    int
	batch   []*lifetime // the same for locks extended in batches; batch[bhead:] is pending
	bhead   int
	workers int // worker goroutines running
}

// dueItem is one planned extension; it is stale once its Held has left or
// has been planned again (gen moved on).
type dueItem struct {
	at    time.Duration // since the keeper's base
	ahead time.Duration // it may go this much before at, in a batch
	h     *lifetime
	gen   uint64
}

type dueHeap []dueItem

func (d dueHeap) Len() int           { return len(d) }
func (d dueHeap) Less(i, j int) bool { return d[i].at < d[j].at }
func (d dueHeap) Swap(i, j int)      { d[i], d[j] = d[j], d[i] }
func (d *dueHeap) Push(x any)        { *d = append(*d, x.(dueItem)) }
func (d *dueHeap) Pop() any {
	old := *d
	it := old[len(old)-1]
	old[len(old)-1] = dueItem{}
	*d = old[:len(old)-1]
	return it
}

// shortWarned is the resource labels (Options.ResourceLabel; "" without
// one) whose short validity has been logged: once each, since a TTL too
// short for the masters stays so for every acquisition.
type shortWarned struct{ sync.Map }
