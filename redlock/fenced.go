package redlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// ErrStaleFence is returned by WriteFenced when the resource has already
// accepted a write with a larger fence: the writer's lock was lost and a
// later holder has written since.
var ErrStaleFence = errors.New("redlock: stale fence: a later holder has written")

// fencedWrite is immutable; one per process is enough.
var fencedWrite = redis.NewScript(fencedWriteSrc)

// WriteFenced stores value in the Redis hash key (fields "value", "fence"
// and "owner") on c, the resource's own Redis (not one of the lock's
// masters), if and only if fence is larger than the highest fence the key
// has accepted, or equal to it with the same owner (the same holder writing
// again). Pass the lock's Fence and Token. Anything else is a stale holder:
// the write is rejected with ErrStaleFence and changes nothing. The check
// and the write are one Lua script, so they are atomic.
//
// The same rule in SQL, with the last fence and owner kept beside the row:
//
//	UPDATE accounts SET balance = $1, fence = $2, owner = $3
//	 WHERE id = $4 AND (fence < $2 OR (fence = $2 AND owner = $3))
//
// and treat "0 rows updated" as ErrStaleFence.
func WriteFenced(ctx context.Context, c redis.Scripter, key string, fence uint64, owner, value string) error {
	switch {
	case key == "":
		return invalid("fenced write: key is empty")
	case fence == 0:
		return invalid("fenced write: fence is 0 (Options.Fencing is off, or no lock was taken)")
	case owner == "":
		return invalid("fenced write: owner is empty (pass the lock's Token)")
	case c == nil || isNilPointer(c):
		return invalid("fenced write: nil client")
	}
	n, err := fencedWrite.Run(ctx, c, []string{key}, strconv.FormatUint(fence, 10), owner, value).Int64()
	if err != nil {
		return fmt.Errorf("redlock: fenced write to %q: %w", key, err)
	}
	if n == 0 {
		return fmt.Errorf("%w (key %q, fence %d)", ErrStaleFence, key, fence)
	}
	return nil
}

// ReadFenced returns the value and fence last accepted by WriteFenced for
// key; a key never written gives "", 0 and no error.
func ReadFenced(ctx context.Context, c redis.Cmdable, key string) (value string, fence uint64, err error) {
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
