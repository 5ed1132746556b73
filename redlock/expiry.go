package redlock

import (
	"math"
	"slices"
	"time"

	"github.com/quorumlab/redlock/quorum"
)

// Wake on expiry (docs/design.md §14.2): a holder that dies releases
// nothing, so nothing is announced; a waiter that read the holder's PTTLs
// retries when a majority of its keys will have expired.

// expiresAt is when the key that the probe res (started at start) found
// held will have expired on need masters: the need-th earliest of each
// master's expiry, the arrival of its reply plus its PTTL plus margin (a
// master where the key was absent has expired already). A master that did
// not answer, or whose key has no TTL, is not counted: zero when fewer than
// need are.
func expiresAt(res quorum.Result, start time.Time, need int, margin time.Duration) time.Time {
	at := make([]time.Time, 0, len(res.Replies))
	for _, r := range res.Replies {
		switch {
		case r.Outcome == quorum.OK:
			at = append(at, start.Add(r.Latency))
		case r.Outcome == quorum.Refused && r.Value <= maxPTTL:
			at = append(at, start.Add(r.Latency+time.Duration(r.Value)*time.Millisecond+margin))
		}
	}
	if len(at) < need {
		return time.Time{}
	}
	slices.SortFunc(at, time.Time.Compare)
	return at[need-1]
}

// maxPTTL is the longest PTTL (ms) that expiresAt counts: a time.Duration
// holds it with room for the latency and margin (about 290 years).
const maxPTTL = uint64(math.MaxInt64/int64(time.Millisecond)) / 2
