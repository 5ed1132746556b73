package redlock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/driver"
)

// SetBetweenRounds lets tests inject a fault between the two rounds of a
// fenced acquisition.
func SetBetweenRounds(l *Locker, f func()) { l.betweenRounds = f }

// Backoff is Lock's wait after failed attempt n.
func Backoff(l *Locker, attempt int) time.Duration { return l.backoff(attempt) }

// DropWakes makes l ignore every release announcement, as if each were
// lost on the way: waiters are left to their backoff.
func DropWakes(l *Locker) { l.wake.drop.Store(true) }

// WakeChannel is the channel on which a release of key names one of l's
// waiters; l subscribes to it together with key's own channel.
func WakeChannel(l *Locker, key string) string { return l.wake.channel(key) }

// Wakes is how many waiters l has woken on a release.
func Wakes(l *Locker) int64 { return l.wake.woken.Load() }

// LostAt is when lk's timer declared it lost (zero if it has not).
func LostAt(lk *Lock) time.Time {
	lk.mu.Lock()
	h := lk.held
	lk.mu.Unlock()
	if h == nil {
		return time.Time{}
	}
	if t := h.lostAt.Load(); t != nil {
		return *t
	}
	return time.Time{}
}

// Waiting is how many callers of l wait for a release (registered after
// a round that found the lock held).
func Waiting(l *Locker) int64 { return l.wake.waiting.Load() }

// KeeperExtend is one of the keeper's extensions of lk (it waits for the
// masters up to keepWait, not MasterTimeout), made by the test.
func KeeperExtend(lk *Lock) error { return lk.extend(context.Background(), true, nil) }

// SetAfterLock makes Hold and Do run f between their Lock and the keeping
// of the lock (the window a Shutdown can fall into).
func SetAfterLock(l *Locker, f func()) { l.afterLock = f }

// WarmUp dials every master of l now, with one round of PTTLs that waits
// for each master up to a second: a test's first round then does not race
// the dials and handshakes against its MasterTimeout (10 ms at a TTL of
// 1 s), which a loaded machine can overrun.
func WarmUp(l *Locker) {
	l.roundFor(context.Background(), l.env.now(), true, time.Second, 1, func(c *cmd) bool {
		c.kind, c.key = cmdProbe, "redlock-test:warm-up"
		return true
	})
}

// GoRedisMaster is c as New takes it, as a Master: a test wraps it to
// intercept Do on the client path, and closes c itself.
func GoRedisMaster(c redis.UniversalClient) driver.Master { return &goRedisMaster{c: c} }

// The key naming and release script cmd/redlock reads through
// internal/keys.
var (
	KeyFor      = keyFor
	ResourceFor = resourceFor
)

func ReleaseScript() *redis.Script { return redis.NewScript(releaseSrc) }

// JoinScript is join.lua: KEYS[1] the queue; ARGV the waiter's age in µs,
// the member, the queue's life in ms, the instant the waiter began in µs
// of its clock, the slack in µs.
func JoinScript() *redis.Script { return redis.NewScript(joinSrc) }

// The limits on input, named in the docs rather than exported.
const (
	MaxTokenLen      = maxTokenLen
	MaxResourceLen   = maxResourceLen
	MaxOwnerLabelLen = maxOwnerLabelLen
	MaxResources     = maxResources
	MaxTTL           = maxTTL
	MaxPermits       = maxPermits
)

// Hold is Lock then Keep, the way a caller keeps a lock, with the test
// hook between them (SetAfterLock): a Keep that fails releases the lock.
func Hold(l *Locker, ctx context.Context, resource string, opts ...LockOption) (*Lock, error) {
	lk, err := l.Lock(ctx, resource, opts...)
	if err != nil {
		return nil, err
	}
	if l.afterLock != nil {
		l.afterLock()
	}
	if err := lk.Keep(); err != nil {
		lk.Unlock(context.WithoutCancel(ctx))
		return nil, err
	}
	return lk, nil
}

// lifetimeOf is lk's lifetime (nil before Keep, Done, Err or Context).
func lifetimeOf(lk *Lock) *lifetime {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return lk.held
}

// KeeperExtendOnce is one extension of lk by its Locker's keeper, the
// path a lock extended alone takes (extendOnce): lk must be kept (Keep).
func KeeperExtendOnce(lk *Lock) { lifetimeOf(lk).extendOnce() }

// KeeperExtendBatch is one batched extension of the kept locks lks by
// their Locker's keeper (extendBatch).
func KeeperExtendBatch(lks ...*Lock) {
	hs := make([]*lifetime, len(lks))
	for i, lk := range lks {
		hs[i] = lifetimeOf(lk)
	}
	extendBatch(hs)
}

// KeeperBusy reports whether the keeper is extending lk right now.
func KeeperBusy(lk *Lock) bool {
	h := lifetimeOf(lk)
	if h == nil || h.busy.TryLock() {
		if h != nil {
			h.busy.Unlock()
		}
		return false
	}
	return true
}

// SetBeforeRelease makes Unlock (and Shutdown, which unlocks) run f with
// the lock's resource once the lock's lifetime has ended and before its
// release is sent to any master.
func SetBeforeRelease(l *Locker, f func(resource string)) { l.beforeRelease = f }

// SetAfterKeep makes Campaign run f between the Keep of its leadership
// and the publishing of its value (the window a Shutdown can fall into).
func SetAfterKeep(l *Locker, f func()) { l.afterKeep = f }

// Closing reports whether l's Shutdown or Close has begun.
func Closing(l *Locker) bool { return l.isClosing() }

// OpsInProgress is how many of l's operations (design §9: the calls Close
// waits for) have begun and not ended.
func OpsInProgress(l *Locker) int64 { return l.ops.n.Load() }
