package redlock

import (
	"math"
	"testing"
	"time"

	"github.com/quorumlab/redlock/quorum"
)

// TestExpiresAt: the instant a majority of the holder's keys will have
// expired is the need-th earliest expiry among the masters that told one
// (a master where the key was absent has expired already); masters that
// did not answer, or whose key has no TTL, do not count.
func TestExpiresAt(t *testing.T) {
	start := time.Unix(1000, 0)
	const margin = 3 * time.Millisecond
	held := func(ms uint64, lat time.Duration) quorum.Reply {
		return quorum.Reply{Outcome: quorum.Refused, Value: ms, Latency: lat}
	}
	absent := quorum.Reply{Outcome: quorum.OK, Latency: time.Millisecond}
	none := quorum.Reply{Outcome: quorum.TimedOut}
	ms := time.Millisecond
	cases := []struct {
		name    string
		replies []quorum.Reply
		want    time.Duration // from start; −1: zero time
	}{
		{"every master held", []quorum.Reply{held(500, ms), held(400, ms), held(300, 2*ms), held(200, ms), held(100, ms)}, 2*ms + 300*ms + margin},
		{"absent on two", []quorum.Reply{absent, absent, held(300, ms), held(200, ms), held(900, ms)}, ms + 200*ms + margin},
		{"two did not answer", []quorum.Reply{none, none, held(300, ms), held(200, ms), held(100, ms)}, ms + 300*ms + margin},
		{"three did not answer", []quorum.Reply{none, none, none, held(200, ms), held(100, ms)}, -1},
		{"no TTL on three", []quorum.Reply{held(math.MaxUint64, ms), held(math.MaxUint64, ms), held(math.MaxUint64, ms), held(200, ms), held(100, ms)}, -1},
		{"a PTTL beyond a Duration", []quorum.Reply{held(math.MaxInt64, ms), held(math.MaxInt64, ms), held(math.MaxInt64, ms), held(200, ms), held(100, ms)}, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := expiresAt(quorum.Result{Replies: tc.replies}, start, 3, margin)
			switch {
			case tc.want < 0 && !got.IsZero():
				t.Errorf("expiresAt = start + %v, want zero (not known)", got.Sub(start))
			case tc.want >= 0 && !got.Equal(start.Add(tc.want)):
				t.Errorf("expiresAt = start + %v, want start + %v", got.Sub(start), tc.want)
			}
		})
	}
}

// TestAcqRecordOutcome: a Lock's compact record tells each master's
// outcome as Acquisition() unpacks it, compact or not.
func TestAcqRecordOutcome(t *testing.T) {
	addrs := []string{"a:1", "b:2", "c:3"}
	l := &Locker{addrs: addrs, env: sysEnv{}}
	outs := []quorum.Outcome{quorum.OK, quorum.Refused, quorum.OK}
	for _, withErr := range []bool{false, true} {
		info := Acquisition{Masters: make([]MasterResult, len(addrs))}
		for i, a := range addrs {
			info.Masters[i] = MasterResult{Addr: a, Outcome: outs[i]}
		}
		if withErr { // not kept compactly
			info.Masters[1].Err = errSkipped
		}
		a := l.pack(info)
		if compact := a.n != 0; compact == withErr {
			t.Fatalf("withErr %v: compact %v", withErr, compact)
		}
		got := a.unpack(addrs)
		for i := range addrs {
			if o := a.outcome(i); o != outs[i] || o != got.Masters[i].Outcome {
				t.Errorf("withErr %v: master %d: outcome %v, want %v (unpacked %v)", withErr, i, o, outs[i], got.Masters[i].Outcome)
			}
		}
	}
	var none acqRecord
	if o := none.outcome(0); o == quorum.OK {
		t.Errorf("outcome of an empty record: %v", o)
	}
}
