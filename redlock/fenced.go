package redlock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
)

// ErrStaleFence is returned by WriteFenced when the resource has already
// accepted a write with a larger fence: the writer's lock was lost and a
// later holder has written since.
var ErrStaleFence = errors.New("redlock: stale fence: a later holder has written")

// fencedWrite is immutable; one per process is enough.
var fencedWrite = redis.NewScript(fencedWriteSrc)

// WriteFenced stores value in the Redis hash key (fields "value", "fence",
// "owner") on c, the resource's own Redis (not a lock master), if and only
// if fence is larger than the highest fence key has accepted, or equal to it
// with the same owner. Pass the lock's Fence and Token. Anything else is a
// stale holder: ErrStaleFence, and nothing changes. Check and write are one
// Lua script. Fences compare exactly over the whole uint64 range; owner is
// stored as the hex SHA-256 of the token, never the token. The same rule in
// SQL ($3 the token's hex SHA-256):
//
//	UPDATE accounts SET balance = $1, fence = $2, owner = $3
//	 WHERE id = $4 AND (fence < $2 OR (fence = $2 AND owner = $3))
//
// A rejected write is counted (redlock.fenced_writes.stale) on the meter
// provider of the Locker whose lock ctx carries (a Lock's Context), else on
// the global one.
func WriteFenced(ctx context.Context, c redis.Scripter, key string, fence uint64, owner, value string) error {
	return writeFenced(ctx, c, key, fence, owner, value)
}

func writeFenced(ctx context.Context, c redis.Scripter, key string, fence uint64, owner, value string) error {
	switch {
	case ctx == nil:
		return nilContext("WriteFenced")
	case key == "":
		return invalid("fenced write: key is empty")
	case fence == 0:
		return invalid("fenced write: fence is 0 (Options.Fencing is off, or no lock was taken)")
	case owner == "":
		return invalid("fenced write: owner is empty (pass the lock's Token)")
	case c == nil || isNilPointer(c):
		return invalid("fenced write: nil client")
	}
	n, err := fencedWrite.Run(ctx, c, []string{key}, strconv.FormatUint(fence, 10), ownerDigest(owner), value).Int64()
	if err != nil {
		return fmt.Errorf("redlock: fenced write to %q: %w", key, err)
	}
	if n == 0 {
		countStale(ctx)
		return fmt.Errorf("%w (key %q, fence %d)", ErrStaleFence, key, fence)
	}
	return nil
}

// countStale counts a stale write on the meter provider
// (Options.MeterProvider) of the Locker whose lock ctx carries (Do's
// context, a Lock's Context); without one, on the global meter provider.
func countStale(ctx context.Context) {
	lk, _ := FromContext(ctx)
	if lk != nil && lk.locker != nil {
		lk.locker.tel.staleWrite(ctx, lk.resource)
		return
	}
	if c, err := newStaleCounter(otel.GetMeterProvider().Meter(instrumentation)); err == nil {
		c.Add(ctx, 1)
	}
}

// ownerDigest is what WriteFenced stores as the owner: the hex SHA-256 of
// the lock's token. A one-way digest, so reading the resource does not give
// anyone the token; tokens are 128 random bits, so it cannot be inverted by
// guessing either. It is kept whole, 256 bits as 64 hex characters: the
// owner only has to tell holders apart on an equal fence, for which 128 bits
// would do (a collision needs about 2^64 holders), and truncating would save
// only 32 bytes a key.
func ownerDigest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// ReadFenced returns the value and fence last accepted by WriteFenced for
// key; a key never written gives "", 0 and no error.
func ReadFenced(ctx context.Context, c redis.Cmdable, key string) (value string, fence uint64, err error) {
	if ctx == nil {
		return "", 0, nilContext("ReadFenced")
	}
	if c == nil || isNilPointer(c) {
		return "", 0, invalid("fenced read: nil client")
	}
	vals, err := c.HMGet(ctx, key, "value", "fence").Result()
	if err != nil {
		return "", 0, fmt.Errorf("redlock: fenced read of %q: %w", key, err)
	}
	if vals[1] == nil {
		return "", 0, nil
	}
	v, _ := vals[0].(string)
	f, err := strconv.ParseUint(fmt.Sprint(vals[1]), 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("redlock: fenced read of %q: bad fence %v: %w", key, vals[1], err)
	}
	return v, f, nil
}
