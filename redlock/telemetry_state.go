package redlock

import (
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/quorumlab/redlock/quorum"
)

// A Locker's telemetry (docs/design.md §15), what it is: the names it
// records under (the scope, attribute keys, outcomes), its instruments
// and precomputed options (telemetry, optSet), and its lists of held
// locks (holdEntry, holdShard). telemetry.go records; telemetry_setup.go
// makes the instruments.

// instrumentation is the scope name of the Locker's meter and tracer.
const instrumentation = "github.com/quorumlab/redlock/redlock"

// Attribute keys. Metric and span attributes never carry a resource name
// or a token unless Options.ResourceLabel maps resources to a label.
const (
	attrOutcome  = attribute.Key("redlock.outcome")
	attrLabel    = attribute.Key("redlock.resource.label")
	attrMaster   = attribute.Key("server.address")
	attrOp       = attribute.Key("redlock.operation")
	attrReason   = attribute.Key("redlock.reason")
	attrElapsed  = attribute.Key("redlock.elapsed")
	attrDrift    = attribute.Key("redlock.drift")
	attrMargin   = attribute.Key("redlock.safety_margin")
	attrValidity = attribute.Key("redlock.validity")
	attrFence    = attribute.Key("redlock.fence")
	attrLatency  = attribute.Key("redlock.latency")
	// redlock.hold.duration's: the lock was kept in the background (Hold,
	// Keep, Do), held by design for as long as its holder lives.
	attrKept = attribute.Key("redlock.kept")
	// OpenTelemetry's exception event (what Span.RecordError writes).
	attrExcType    = attribute.Key("exception.type")
	attrExcMessage = attribute.Key("exception.message")
)

// The operations' outcomes, as the redlock.outcome attribute says them
// (a master's outcome is an Outcome, named by its String).
const (
	// an acquisition's
	outAcquired = "acquired"
	outHeld     = "held_by_another"
	outNoQuorum = "no_quorum"
	outExpired  = "expired_before_majority"
	outCanceled = "canceled" // also an extension's
	outClosed   = "closed"
	// an extension's
	outExtended  = "extended"
	outExtFailed = "failed"
	outLapsed    = "expired"
	// a release's (releaseOutcomes), and a hold's
	outReleased = "released"
	outDeferred = "deferred"
	outNotOurs  = "not_ours"
	outLost     = "lost"
)

// opOutcomes lists every operation outcome above.
var opOutcomes = [...]string{outAcquired, outHeld, outNoQuorum, outExpired, outCanceled, outClosed,
	outExtended, outExtFailed, outLapsed, outReleased, outDeferred, outNotOurs, outLost}

// telemetry holds the Locker's instruments; nil when instrumentation is
// off. With the default (global) providers nothing is recorded, only
// checked, until the application installs an SDK. The attribute options
// are built once so that recording allocates nothing.
type telemetry struct {
	tracer trace.Tracer
	label  func(string) string
	env    env // the Locker's clock, for hold times
	// globalMP and globalTP are OpenTelemetry's built-in global providers
	// when the Locker uses them and no SDK was installed yet (nil
	// otherwise), found once by New: while the global provider is still
	// that one, nothing can record and the Locker skips the calls
	// altogether. Once the application installs an SDK the instruments,
	// created from the global providers, delegate to it.
	globalMP metric.MeterProvider
	globalTP trace.TracerProvider
	// noMeter and noTrace: that provider is the OpenTelemetry no-op one
	// (the other is not): its calls are skipped.
	noMeter, noTrace bool

	acquireDur metric.Float64Histogram
	validity   metric.Float64Histogram
	attempts   metric.Int64Histogram
	extensions metric.Int64Counter
	lost       metric.Int64Counter
	short      metric.Int64Counter // acquisitions left with under half their TTL (short.go)
	stale      metric.Int64Counter // fenced writes rejected as stale (fenced.go)
	// held and releases are synchronous instruments only when resources
	// are labelled (ResourceLabel); otherwise they are counted in atomics
	// (heldCount, releaseCount) and observed at collection, which costs
	// the hot path an atomic add instead of an SDK record.
	held         metric.Int64UpDownCounter
	releases     metric.Int64Counter
	heldCount    atomic.Int64
	releaseCount [len(releaseOutcomes)]atomic.Int64
	callDur      metric.Float64Histogram
	holdDur      metric.Float64Histogram
	// holding lists the locks acquired and not yet unlocked, oldest
	// first, for the redlock.hold.oldest gauge: in shards, taken in turn,
	// so that 64 workers do not queue on one mutex.
	holding   [holdShards]holdShard
	nextShard atomic.Uint32
	// callCount[i][outcome] counts commands to master i by outcome; the
	// redlock.master.calls counter is observed from it at collection, so
	// the hot path pays an atomic add, not a measurement.
	callCount [][quorum.Canceled + 1]atomic.Int64

	// Precomputed attribute options, used when there is no resource label,
	// as slices so that passing them on allocates nothing.
	outcomeOpt map[string]optSet
	noAttrs    optSet

	// holdOpt[outcome][kept]: redlock.hold.duration's attributes
	// (holdOutcomes; kept 0 or 1), used when there is no resource label.
	holdOpt [2][2][]metric.RecordOption

	// per master i: master[i] for latency, callOut[i][outcome] for calls
	master  [][]metric.RecordOption
	callOut [][]metric.ObserveOption
	reg     metric.Registration

	spanNames map[string]string
}

// optSet is one attribute set as options for Record and for Add.
type optSet struct {
	rec []metric.RecordOption
	add []metric.AddOption
}

func newOptSet(attrs ...attribute.KeyValue) optSet {
	o := metric.WithAttributeSet(attribute.NewSet(attrs...))
	return optSet{rec: []metric.RecordOption{o}, add: []metric.AddOption{o}}
}

// spanOpts is the start option of every span.
var spanOpts = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}

// holdEntry is a Lock's place in its Locker's list of held locks, and
// when it was acquired (zero when metrics were not recorded then).
type holdEntry struct {
	prev, next *holdEntry  // under shard.mu; nil when not listed
	shard      *holdShard  // set before the Lock is handed out
	at         time.Time   // likewise
	ended      atomic.Bool // redlock.hold.duration recorded
	kept       atomic.Bool // kept in the background (Keep: Hold, Do)
}

// holdShards is how many lists of held locks a Locker keeps.
const holdShards = 16

// holdShard is one circular list of held locks (head is its sentinel),
// appended in time order, so its first entry is its oldest.
type holdShard struct {
	mu   sync.Mutex
	head holdEntry
	_    [64]byte // keeps shards off each other's cache lines
}

// holdOutcomes are the outcomes of redlock.hold.duration, by index.
var holdOutcomes = [2]string{outReleased, outLost}

// releaseOutcomes are the outcomes of redlock.releases, by index.
var releaseOutcomes = [...]string{outReleased, outDeferred, outNotOurs}
