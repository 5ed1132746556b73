package redlock

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/quorumlab/redlock/validity"
)

// Options configures a Locker. A nil *Options, and every zero field, means
// the documented default. There is deliberately no way to turn the drift
// allowance off: a zero DriftFactor or DriftConstant means the default.
type Options struct {
	// TTL is how long each master keeps the lock key, a whole number of
	// milliseconds (Redis's PX resolution), at most 24h. Default: 10s.
	TTL time.Duration

	// DriftFactor is the relative clock-rate error allowed between this
	// process and any master, in (0, 1). Default: 0.01 (redlock-rb).
	DriftFactor float64

	// DriftConstant is added to the drift allowance. Default: 2ms
	// (redlock-rb: the TTL's millisecond resolution on the master).
	DriftConstant time.Duration

	// SafetyMargin is kept in reserve on top of the drift: the deadline is
	// start + TTL − drift − SafetyMargin. Set it to cover pauses you
	// expect between checking the deadline and acting (GC, I/O).
	// Default: 0.
	SafetyMargin time.Duration

	// MasterTimeout bounds each call to one master. The Locker stops waiting
	// for a master at this deadline even if the client ignores contexts
	// (go-redis v9 does by default), and marks it unavailable until it
	// answers again. The keeper's extensions (Hold, Keep, Do) wait longer:
	// a quarter of the lock's time left, and at least MasterTimeout. It must be shorter than TTL. Default: TTL/200 kept
	// within [10ms, 50ms] (50ms for the 10s default, the top of the Redlock
	// spec's 5–50ms range for a 10s TTL), and at most TTL/4. The floor is
	// there because a cold client's first call also dials and handshakes
	// (go-redis sends HELLO and CLIENT SETINFO), which can take several
	// milliseconds on a loaded machine.
	MasterTimeout time.Duration

	// KeyPrefix is prepended to every key; it must not contain '{' or '}'.
	// Keys are "<KeyPrefix>{<resource>}" and "<KeyPrefix>{<resource>}:fence".
	// Default: "redlock:". RedsyncKeys changes all three (see there).
	KeyPrefix string

	// RedsyncKeys names keys as go-redsync/redsync names a Mutex, so that
	// a fleet migrating from redsync can run both side by side on the same
	// masters (docs/migrating-from-redsync.md): the lock key of resource R
	// is "<KeyPrefix><R>", with no braces, and KeyPrefix defaults to "",
	// so the key is R itself, the key of redsync's NewMutex(R). A redsync
	// Mutex and a Locker then contend on one key and exclude each other
	// (both SET NX PX a random token, and extend and delete only while the
	// key holds their own token). In this mode KeyPrefix may contain
	// braces and a resource may start with '}' (the key is taken as
	// given, hash tags included, as redsync takes it), and a key must not
	// end in ":fence": with Fencing the fence counter of R is
	// "<KeyPrefix><R>:fence". Fences order this package's holders only
	// (redsync has none). The two namings do not exclude each other:
	// switch one way or the other only while nobody holds the lock.
	// Default: false.
	RedsyncKeys bool

	// Fencing makes every acquisition also produce a fencing token
	// (Lock.Fence), strictly larger than every earlier holder's, by a
	// second round to the masters (docs/design.md §5). It costs one more round
	// trip per acquisition. Fences are monotonic only while no master loses
	// its counter: run the masters with appendfsync always, or never
	// restart one empty. Default: false.
	Fencing bool

	// ViaClient sends every command through the go-redis clients
	// themselves (their pools and hooks, one pipeline per master at a
	// time) instead of the fast path's one dedicated connection per
	// master. Clients the fast path cannot serve use this path anyway (see
	// New). Default: false.
	ViaClient bool

	// Retry is how Lock retries. TryLock makes one round regardless.
	Retry RetryPolicy

	// Logger receives a record at each step of a lock's life (README,
	// "Logs"), through the *Context methods so that records correlate
	// with traces. Tokens are logged shortened; resources as a short keyed
	// hash, stable within the process (see LogResourceNames). Default:
	// nil, which discards.
	Logger *slog.Logger

	// LogResourceNames makes log records show resource names instead of
	// their hash (with ResourceLabel set, records show the label and the
	// hash). Default: false.
	LogResourceNames bool

	// MeterProvider and TracerProvider receive the Locker's metrics and
	// spans (README, "Observability"). Default: nil, the global providers
	// (otel.GetMeterProvider, otel.GetTracerProvider), which do nothing
	// until the application installs an SDK. Setting both to the
	// OpenTelemetry no-op providers (metric/noop, trace/noop) turns the
	// instrumentation off entirely.
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider

	// OwnerLabel, when set, makes every token "<OwnerLabel>/<random>"
	// instead of "<random>" (the random part is unchanged: 128 bits,
	// base64url), so that an operator reading the masters (cmd/redlock
	// inspect) can tell which process holds a lock, e.g. "host-1:4242"
	// for a host and a pid. It rides in the value the acquisition already
	// writes: no extra round trip. The label is visible to anyone who can
	// read the masters; put nothing secret in it. At most 64 bytes of
	// valid UTF-8, with no '/', whitespace or control characters. Logs show
	// the label whole and the random part shortened. Default: "", tokens
	// are the random part alone.
	OwnerLabel string

	// ResourceLabel, when set, maps a resource name to a label that metrics
	// and spans carry as redlock.resource.label (e.g. the resource's type,
	// "invoice" for "invoice:42"); span errors and logs show it with the
	// name's hash. It must return few distinct values: every value is a
	// time series. Default: nil, no resource attribute at all (names can be
	// unbounded, and personal data).
	ResourceLabel func(resource string) string
}

// RetryPolicy is how Lock spaces its rounds: after failed attempt n it
// waits a random time in [d/2, d], where d = MinDelay·2^(n−1) capped at
// MaxDelay (exponential backoff with jitter, so contending clients spread
// out instead of colliding again).
type RetryPolicy struct {
	// MaxAttempts is the most rounds Lock makes. Default: 0, no limit: Lock
	// tries until it acquires or its context ends.
	MaxAttempts int
	// MinDelay is the first backoff. Default: 5ms.
	MinDelay time.Duration
	// MaxDelay caps the backoff. Default: 100ms.
	MaxDelay time.Duration
}

// maxTTL is the longest TTL a lock may have (Options.TTL, WithTTL): the
// time a crashed holder can block everyone. Work that runs longer keeps a
// shorter lock extended (Hold, Do). docs/design.md §2 says why 24h.
const maxTTL = 24 * time.Hour

func aboveMaxTTL(what string, ttl time.Duration) string {
	return fmt.Sprintf("%s %v is above the %v limit: keep a shorter lock extended instead (Keep, Do)", what, ttl, maxTTL)
}

// Defaults, each named in its field's comment.
const (
	DefaultTTL       = 10 * time.Second
	DefaultKeyPrefix = "redlock:"
	defaultMinDelay  = 5 * time.Millisecond
	defaultMaxDelay  = 100 * time.Millisecond
)

// withDefaults returns a copy with every zero field filled in.
func (o Options) withDefaults() Options {
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.DriftFactor == 0 {
		o.DriftFactor = validity.DefaultDriftFactor
	}
	if o.DriftConstant == 0 {
		o.DriftConstant = validity.DefaultDriftConstant
	}
	if o.MasterTimeout == 0 && o.TTL > 0 {
		o.MasterTimeout = min(max(o.TTL/200, 10*time.Millisecond), 50*time.Millisecond, o.TTL/4)
	}
	if o.KeyPrefix == "" && !o.RedsyncKeys {
		o.KeyPrefix = DefaultKeyPrefix
	}
	if o.Retry.MinDelay == 0 {
		o.Retry.MinDelay = defaultMinDelay
	}
	if o.Retry.MaxDelay == 0 {
		o.Retry.MaxDelay = max(defaultMaxDelay, o.Retry.MinDelay)
	}
	return o
}

func (o Options) budget() validity.Budget {
	return validity.Budget{TTL: o.TTL, DriftFactor: o.DriftFactor, DriftConstant: o.DriftConstant, SafetyMargin: o.SafetyMargin}
}

// validate reports the first rule a filled-in Options breaks.
func (o Options) validate() error {
	if o.TTL > maxTTL {
		return invalid(aboveMaxTTL("TTL", o.TTL))
	}
	if err := o.budget().Validate(); err != nil {
		return invalid(err.Error())
	}
	switch {
	case o.TTL%time.Millisecond != 0:
		return invalid(fmt.Sprintf("TTL %v is not a whole number of milliseconds (Redis keeps PX in ms)", o.TTL))
	case o.MasterTimeout < 0:
		return invalid(fmt.Sprintf("MasterTimeout %v must be positive", o.MasterTimeout))
	case o.MasterTimeout >= o.TTL:
		return invalid(fmt.Sprintf("MasterTimeout %v must be shorter than TTL %v", o.MasterTimeout, o.TTL))
	case !o.RedsyncKeys && strings.ContainsAny(o.KeyPrefix, "{}"):
		return invalid(fmt.Sprintf("KeyPrefix %q must not contain '{' or '}' (they would change the keys' hash slot)", o.KeyPrefix))
	case o.Retry.MaxAttempts < 0:
		return invalid(fmt.Sprintf("Retry.MaxAttempts %d must not be negative", o.Retry.MaxAttempts))
	case o.Retry.MinDelay < 0 || o.Retry.MaxDelay < o.Retry.MinDelay:
		return invalid(fmt.Sprintf("Retry delays must satisfy 0 ≤ MinDelay (%v) ≤ MaxDelay (%v)", o.Retry.MinDelay, o.Retry.MaxDelay))
	}
	return checkOwnerLabel(o.OwnerLabel)
}

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
