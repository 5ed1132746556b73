package redlock

import (
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/quorumlab/redlock/validity"
)

// Options configures a Locker. A nil *Options, and every zero field, means
// the default; the drift allowance cannot be turned off. docs/design.md
// §2 gives the arithmetic, and README's Options table the defaults.
type Options struct {
	// TTL is how long each master keeps the lock key: whole milliseconds,
	// at most 24h. Default: 10s.
	TTL time.Duration
	// DriftFactor is the clock-rate error allowed between this process and
	// any master, in (0, 1). Default: 0.01.
	DriftFactor float64
	// DriftConstant is added to the drift allowance. Default: 2ms.
	DriftConstant time.Duration
	// SafetyMargin is kept in reserve: the deadline is start + TTL − drift
	// − SafetyMargin. Cover the pauses you expect. Default: 0.
	SafetyMargin time.Duration
	// MasterTimeout bounds each call to one master, even when the client
	// ignores contexts; a master past it is skipped until it answers. It
	// must be shorter than TTL. Default: TTL/200 within [10ms, 50ms], at
	// most TTL/4.
	MasterTimeout time.Duration
	// KeyPrefix is prepended to every key ("<KeyPrefix>{<resource>}"); it
	// must not contain '{' or '}'. Default: "redlock:".
	KeyPrefix string
	// RedsyncKeys names keys as go-redsync/redsync does ("<KeyPrefix><R>",
	// KeyPrefix default ""), so that both libraries contend on one key
	// during a migration (docs/migrating-from-redsync.md). Semaphores,
	// read-write locks and elections refuse it. Default: false.
	RedsyncKeys bool
	// Fencing makes every acquisition produce Lock.Fence, larger than
	// every earlier holder's, for one more round trip (docs/design.md §5).
	// Elections need it. Default: false.
	Fencing bool
	// ViaClient sends every command through the go-redis clients' own
	// pools and hooks instead of one dedicated connection per master.
	// Default: false.
	ViaClient bool
	// Retry is how Lock spaces its rounds.
	Retry RetryPolicy
	// Logger receives a record at each step of a lock's life; tokens are
	// shortened, resources hashed unless LogResourceNames. Default: none.
	Logger           *slog.Logger
	LogResourceNames bool
	// MeterProvider and TracerProvider receive the metrics and spans
	// (docs/observability.md). Default: the global providers.
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
	// OwnerLabel makes every token "<OwnerLabel>/<random>", so that an
	// operator reading the masters sees who holds a lock: at most 64
	// bytes of UTF-8, no '/', space or control character, nothing secret.
	OwnerLabel string
	// ResourceLabel maps a resource to the label its metrics and spans
	// carry; it must return few distinct values. Default: none.
	ResourceLabel func(resource string) string
}

// RetryPolicy is how Lock spaces its rounds: after failed attempt n it
// waits a random time in [d/2, d], d = MinDelay·2^(n−1) capped at MaxDelay.
type RetryPolicy struct {
	// MaxAttempts bounds the rounds. Default: 0, until ctx ends.
	MaxAttempts int
	// MinDelay is the first backoff. Default: 5ms.
	MinDelay time.Duration
	// MaxDelay caps the backoff. Default: 100ms.
	MaxDelay time.Duration
}

// maxTTL is the longest TTL a lock may have (Options.TTL, WithTTL): the
// time a crashed holder can block everyone. Work that runs longer keeps a
// shorter lock extended (Keep, Do). docs/design.md §2 says why 24h.
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

// maxOwnerLabelLen is the longest Options.OwnerLabel accepted, in bytes.
const maxOwnerLabelLen = 64

// checkOwnerLabel returns an error naming the rule an owner label breaks
// ("" is no label, and fine).
func checkOwnerLabel(label string) error {
	switch {
	case len(label) > maxOwnerLabelLen:
		return invalid(fmt.Sprintf("OwnerLabel is %d bytes, over the %d-byte limit", len(label), maxOwnerLabelLen))
	case !utf8.ValidString(label):
		return invalid("OwnerLabel is not valid UTF-8")
	case strings.Contains(label, "/"):
		return invalid("OwnerLabel must not contain '/' (it separates the label from the token's random part)")
	}
	if i := strings.IndexFunc(label, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }); i >= 0 {
		return invalid(fmt.Sprintf("OwnerLabel has a whitespace or control character at byte %d", i))
	}
	return nil
}
