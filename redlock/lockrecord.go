package redlock

import (
	"time"

	"github.com/quorumlab/redlock/quorum"
)

// An acquisition's breakdown (Acquisition), and the compact record of it
// that a Lock keeps for its whole life (acqRecord).

// Acquisition is the breakdown of one acquisition round, for logs and the
// bench: how long it took, what was subtracted, what validity was left, and
// what each master did.
type Acquisition struct {
	// Start is the monotonic reading taken before the first request.
	Start time.Time
	// Elapsed is from Start to the quorum decision.
	Elapsed time.Duration
	// TTL, Drift and SafetyMargin are the budget's terms.
	TTL, Drift, SafetyMargin time.Duration
	// Validity is TTL − Elapsed − Drift − SafetyMargin: the time left at
	// the decision.
	Validity time.Duration
	// Masters has one entry per master: what it did in the last round (the
	// fence write-back, when Options.Fencing is on).
	Masters []MasterResult
}

// compactNodes is the most masters whose outcomes an acqRecord keeps
// compactly.
const compactNodes = 7

// acqRecord is a Lock's Acquisition, kept compactly: a kept lease holds
// one for its whole life (docs/bench.md, "Keeping many leases"). When
// there are at most compactNodes masters and none had an error, Masters is
// nil and each master's outcome and latency are kept here instead; its
// address is the Locker's. unpack gives back the same Acquisition.
type acqRecord struct {
	Start                                       time.Time
	Elapsed, TTL, Drift, SafetyMargin, Validity time.Duration
	nodes                                       *[]MasterResult // when not compact
	lat                                         [compactNodes]time.Duration
	outs                                        uint32 // 4 bits per master
	n                                           uint8  // masters, when compact
}

// boxNodes keeps nodes for a record that is not compact. (Taking the
// address of info.Masters in pack would move all of info to the heap on
// every call, compact or not.)
func boxNodes(nodes []MasterResult) *[]MasterResult { return &nodes }

// pack keeps info for a Lock of l.
func (l *Locker) pack(info Acquisition) acqRecord {
	a := acqRecord{Start: info.Start, Elapsed: info.Elapsed, TTL: info.TTL, Drift: info.Drift, SafetyMargin: info.SafetyMargin, Validity: info.Validity}
	if len(info.Masters) == 0 || len(info.Masters) > compactNodes || len(info.Masters) != len(l.addrs) {
		if info.Masters != nil {
			a.nodes = boxNodes(info.Masters)
		}
		return a
	}
	for i, r := range info.Masters {
		if r.Err != nil || r.Addr != l.addrs[i] || r.Outcome > 15 {
			a.lat, a.outs, a.nodes = [compactNodes]time.Duration{}, 0, boxNodes(info.Masters)
			return a
		}
		a.lat[i] = r.Latency
		a.outs |= uint32(r.Outcome) << (4 * i)
	}
	a.n = uint8(len(info.Masters))
	return a
}

// outcome is master i's outcome in the acquisition, read without
// unpacking it (quorum.Pending when it was not kept).
func (a *acqRecord) outcome(i int) quorum.Outcome {
	switch {
	case a.n != 0:
		return quorum.Outcome(a.outs >> (4 * i) & 15)
	case a.nodes != nil && i < len(*a.nodes):
		return (*a.nodes)[i].Outcome
	}
	return quorum.Pending
}

// unpack is the Acquisition a was packed from; addrs are the Locker's.
func (a *acqRecord) unpack(addrs []string) Acquisition {
	info := Acquisition{Start: a.Start, Elapsed: a.Elapsed, TTL: a.TTL, Drift: a.Drift, SafetyMargin: a.SafetyMargin, Validity: a.Validity}
	if a.nodes != nil {
		info.Masters = *a.nodes
	}
	if a.n == 0 {
		return info
	}
	info.Masters = make([]MasterResult, a.n)
	for i := range info.Masters {
		info.Masters[i] = MasterResult{Addr: addrs[i], Outcome: quorum.Outcome(a.outs >> (4 * i) & 15), Latency: a.lat[i]}
	}
	return info
}
