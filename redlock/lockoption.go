package redlock

import (
	"fmt"
	"time"

	"github.com/quorumlab/redlock/validity"
)

// The options of one lock (LockOption, WithTTL), and the TTL and budget
// they give it (ttlBudget).

// LockOption changes one acquisition (TryLock, Lock, Do, Hold and their
// All forms) or one extension (Extend).
type LockOption func(*lockConfig)

type lockConfig struct {
	ttl time.Duration
}

// WithTTL sets the TTL of this one lock instead of Options.TTL, by the same
// rules: a whole number of milliseconds up to maxTTL, longer than MasterTimeout, and
// longer than its drift allowance plus SafetyMargin (an invalid TTL fails
// the call with ErrInvalid). Zero means the default, as in Options: the
// call's TTL as if WithTTL were not passed (Options.TTL; for Extend, the
// lock's own). The lock's Deadline, its Acquisition breakdown
// and its later extensions use it. Passed to Extend, it sets the TTL of that
// extension and of the lock's extensions after it (Hold's and Do's keeper
// included).
func WithTTL(ttl time.Duration) LockOption {
	return func(c *lockConfig) { c.ttl = ttl }
}

// ttlBudget returns the TTL and budget that opts set, validated; no opts
// means the Locker's own (already validated).
func (l *Locker) ttlBudget(ttl time.Duration, opts []LockOption) (time.Duration, validity.Budget, error) {
	if len(opts) == 0 && ttl == l.opts.TTL {
		return ttl, l.budget, nil // what the rest returns, without a lockConfig on the heap
	}
	c := lockConfig{ttl: ttl}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.ttl == 0 { // WithTTL(0): the default, as Options{TTL: 0} is
		c.ttl = ttl
	}
	if c.ttl == l.opts.TTL {
		return c.ttl, l.budget, nil
	}
	o := l.opts
	o.TTL = c.ttl
	b := o.budget()
	switch err := b.Validate(); {
	case c.ttl > maxTTL:
		return 0, b, invalid(aboveMaxTTL("WithTTL: TTL", c.ttl))
	case err != nil:
		return 0, b, invalid("WithTTL: " + err.Error())
	case c.ttl%time.Millisecond != 0:
		return 0, b, invalid(fmt.Sprintf("WithTTL: TTL %v is not a whole number of milliseconds (Redis keeps PX in ms)", c.ttl))
	case l.opts.MasterTimeout >= c.ttl:
		return 0, b, invalid(fmt.Sprintf("WithTTL: TTL %v must be longer than MasterTimeout %v", c.ttl, l.opts.MasterTimeout))
	}
	return c.ttl, b, nil
}
