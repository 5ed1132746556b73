package chaos

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// Verdict is what the checker found in one history.
//
// A violation is two critical sections of the same resource that overlap in
// real time as recorded by the test process(es): one entered strictly
// before the other exited (an exit and an entry at the same nanosecond can
// be ordered release-first, and porcupine's closed intervals agree). Overlaps counts the sections that entered while another
// section of the same resource was still open (a sweep in enter order);
// porcupine must agree: MutexOK is false exactly when Overlaps > 0.
type Verdict struct {
	Sections int `json:"sections"`
	// Overlaps is the number of mutual-exclusion violations.
	Overlaps int `json:"violations"`
	// MutexOK is porcupine's verdict against the mutex model.
	MutexOK porcupine.CheckResult `json:"mutex_model"`
	// FenceRegressions counts sections whose fence is not greater than the
	// previous holder's (in enter order); FencedOK is porcupine's verdict
	// against the fenced-mutex model (acquire legal only if free and fence >
	// every earlier fence). Empty when the history carries no fences.
	FenceRegressions int                   `json:"fence_regressions"`
	FencedOK         porcupine.CheckResult `json:"fenced_model,omitempty"`
	// FenceReuse counts sections that carried a fence an earlier section of
	// the same resource already had: the resource cannot tell them apart,
	// so it accepts both (WriteFenced accepts an equal fence as the same
	// holder writing again).
	FenceReuse int `json:"fence_reuse"`
	// Late counts sections that exited after their own deadline.
	Late int `json:"late_exits"`

	// From the resource's log of fenced writes.
	Writes int `json:"writes"`
	// StaleAttempted: writes the resource rejected with ErrStaleFence.
	StaleAttempted int `json:"stale_attempted"`
	// StaleAccepted: accepted writes whose call began after the resource
	// had already accepted (and returned) a write with a larger fence, or a
	// write from a newer holder (a section that entered later). The first
	// is the resource's own rule; the second is what fencing is for.
	StaleAccepted int `json:"stale_accepted"`
	// RejectedExclusive: stale-fence rejections of writes made inside a
	// section that overlapped no other, i.e. by the lock's only holder at
	// the time. They happen when fences went backwards (a master's counter
	// was wiped) and cost availability, not safety.
	RejectedExclusive int `json:"rejected_exclusive_holder"`
	// WriteErrors: writes that failed otherwise (unknown effect). The
	// resource is never faulted, so this should be 0.
	WriteErrors int `json:"write_errors"`
	// InFlight: writes whose client was killed during them (Write.Unknown:
	// the election's killed leaders); the register model lets each have
	// taken effect or not.
	InFlight int `json:"writes_in_flight_at_kill,omitempty"`
	// ResourceOK is porcupine's verdict on the writes against a fenced
	// register (accept iff fence ≥ the last accepted one); skipped when a
	// write had an unknown effect.
	ResourceOK porcupine.CheckResult `json:"resource_model,omitempty"`

	// Porcupine is porcupine's verdict over every model it ran on the
	// history (mutex, fenced mutex, fenced register): Illegal when any
	// found it illegal, else Unknown when any timed out, else Ok; beside
	// our own checks above, which must agree with it.
	Porcupine porcupine.CheckResult `json:"porcupine"`
	// Visualisation is the file, next to the results JSON, holding
	// porcupine's HTML visualisation of the history it found illegal
	// (WriteVisualisation); empty when none was written.
	Visualisation string `json:"porcupine_html,omitempty"`
	// illegal is that history, with the model that refused it.
	illegal *illegalHistory

	// Example describes the first overlap, for the log.
	Example string `json:"example,omitempty"`
}

// lockInput is one porcupine operation of the mutex models: the acquire at
// a section's enter, or the release at its exit.
type lockInput struct {
	Resource string
	Acquire  bool
	ID       int // the section, so a release must be by the holder
	Fence    uint64
}

// mutexState is a lock's state: Holder is a section ID or -1 when free;
// Last is the largest fence granted so far (fenced model only).
type mutexState struct {
	Holder int
	Last   uint64
}

func partitionByResource(key func(any) string) func([]porcupine.Operation) [][]porcupine.Operation {
	return func(h []porcupine.Operation) [][]porcupine.Operation {
		idx := map[string]int{}
		var out [][]porcupine.Operation
		for _, op := range h {
			k := key(op.Input)
			i, ok := idx[k]
			if !ok {
				i = len(out)
				idx[k] = i
				out = append(out, nil)
			}
			out[i] = append(out[i], op)
		}
		return out
	}
}

// mutexModel: acquire is legal only when the lock is free, release only by
// its holder. With fenced set, acquire also needs fence > every earlier
// fence.
func mutexModel(fenced bool) porcupine.Model {
	return porcupine.Model{
		Partition: partitionByResource(func(in any) string { return in.(lockInput).Resource }),
		Init:      func() any { return mutexState{Holder: -1} },
		Step: func(state, input, _ any) (bool, any) {
			s, in := state.(mutexState), input.(lockInput)
			if in.Acquire {
				if s.Holder != -1 || (fenced && in.Fence <= s.Last) {
					return false, s
				}
				return true, mutexState{Holder: in.ID, Last: max(s.Last, in.Fence)}
			}
			if s.Holder != in.ID {
				return false, s
			}
			return true, mutexState{Holder: -1, Last: s.Last}
		},
		DescribeState: func(state any) string {
			s := state.(mutexState)
			if s.Holder == -1 {
				return fmt.Sprintf("free (last fence %d)", s.Last)
			}
			return fmt.Sprintf("held by #%d (last fence %d)", s.Holder, s.Last)
		},
		DescribeOperation: func(input, _ any) string {
			in := input.(lockInput)
			if in.Acquire {
				return fmt.Sprintf("acquire(%s, #%d, fence %d)", in.Resource, in.ID, in.Fence)
			}
			return fmt.Sprintf("release(%s, #%d)", in.Resource, in.ID)
		},
	}
}

// lockOps encodes each section as two operations: an acquire at its enter
// instant and a release at its exit instant (points: Call == Return). Two
// sections that overlap then have no legal order (whichever acquire comes
// first, the other comes before its release), and sections that do not
// overlap are legal in their recorded order, so "not linearizable" is
// exactly "some sections overlap". Point intervals also keep porcupine's
// search linear, which matters for 20 000-section histories.
func lockOps(secs []Section) []porcupine.Operation {
	ops := make([]porcupine.Operation, 0, 2*len(secs))
	for id, s := range secs {
		ops = append(ops,
			porcupine.Operation{ClientId: s.Client, Input: lockInput{Resource: s.Resource, Acquire: true, ID: id, Fence: s.Fence}, Call: s.Enter, Return: s.Enter},
			porcupine.Operation{ClientId: s.Client, Input: lockInput{Resource: s.Resource, ID: id}, Call: s.Exit, Return: s.Exit},
		)
	}
	return ops
}

type writeInput struct {
	Resource string
	Fence    uint64
	Owner    string
}

type register struct {
	Fence uint64
	Owner string
}

// resourceModel is the fenced resource as a register, with WriteFenced's
// rule: a write is accepted iff its fence is larger than the last accepted
// one, or equal to it from the same owner.
var resourceModel = porcupine.Model{
	Partition: partitionByResource(func(in any) string { return in.(writeInput).Resource }),
	Init:      func() any { return register{} },
	Step: func(state, input, output any) (bool, any) {
		last, in, accepted := state.(register), input.(writeInput), output.(bool)
		if in.Fence > last.Fence || (in.Fence == last.Fence && in.Owner == last.Owner) {
			return accepted, register{in.Fence, in.Owner}
		}
		return !accepted, last
	},
	DescribeOperation: describeWrite,
	DescribeState:     describeRegister,
}

func describeWrite(input, output any) string {
	in := input.(writeInput)
	out := "in flight at a kill"
	if b, ok := output.(bool); ok {
		out = map[bool]string{true: "accepted", false: "rejected"}[b]
	}
	return fmt.Sprintf("write(%s, fence %d, %s) %s", in.Resource, in.Fence, in.Owner, out)
}

func describeRegister(state any) string {
	r := state.(register)
	return fmt.Sprintf("fence %d by %s", r.Fence, r.Owner)
}

// resourceModelUnknown is resourceModel with writes of unknown outcome
// (Output nil): such a write may have been accepted, if the rule allowed
// it, or never have landed.
var resourceModelUnknown = (&porcupine.NondeterministicModel{
	Partition: resourceModel.Partition,
	Init:      func() []any { return []any{register{}} },
	Step: func(state, input, output any) []any {
		last, in := state.(register), input.(writeInput)
		ok := in.Fence > last.Fence || (in.Fence == last.Fence && in.Owner == last.Owner)
		next := register{in.Fence, in.Owner}
		switch {
		case output == nil && ok:
			return []any{last, next}
		case output == nil, output == false && !ok:
			return []any{last}
		case output == true && ok:
			return []any{next}
		}
		return nil
	},
	DescribeOperation: describeWrite,
	DescribeState:     describeRegister,
}).ToModel()

// sectionKey links a write to its section.
type sectionKey struct {
	client int
	seq    int64
}

func keyOf(s Section) sectionKey { return sectionKey{s.Client, s.Seq} }

// checkTimeout bounds each porcupine run; Unknown is reported as such.
const checkTimeout = 2 * time.Minute

// Check runs every check on a history.
func Check(secs []Section, writes []Write) Verdict {
	v := Verdict{Sections: len(secs), Writes: len(writes)}
	sorted := slices.Clone(secs)
	slices.SortFunc(sorted, func(a, b Section) int {
		return cmp.Or(cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.Enter, b.Enter))
	})
	fenced := false
	for i, s := range sorted {
		if s.Late {
			v.Late++
		}
		if s.Fence != 0 {
			fenced = true
		}
		if i == 0 || sorted[i-1].Resource != s.Resource {
			continue
		}
		prev := sorted[i-1]
		if s.Fence <= prev.Fence && (s.Fence != 0 || prev.Fence != 0) {
			v.FenceRegressions++
		}
	}
	// Overlaps and fence reuse, one resource at a time. active holds the
	// sections still open at the current entry (one, except in a
	// violation); every section in an overlap is marked, so that rejected
	// writes can be told apart below.
	overlapping := map[sectionKey]bool{}
	for i := 0; i < len(sorted); {
		j := i
		var active []Section
		seen := map[uint64]bool{}
		for ; j < len(sorted) && sorted[j].Resource == sorted[i].Resource; j++ {
			s := sorted[j]
			active = slices.DeleteFunc(active, func(a Section) bool { return a.Exit <= s.Enter })
			if len(active) > 0 {
				v.Overlaps++
				if v.Example == "" {
					o := active[0]
					v.Example = fmt.Sprintf("%s: client %d (fence %d) held [%d, %d] ns, client %d (fence %d) entered at %d, %v before the first exited",
						s.Resource, o.Client, o.Fence, o.Enter, o.Exit, s.Client, s.Fence, s.Enter, time.Duration(o.Exit-s.Enter))
				}
				overlapping[keyOf(s)] = true
				for _, a := range active {
					overlapping[keyOf(a)] = true
				}
			}
			active = append(active, s)
			if s.Fence != 0 {
				if seen[s.Fence] {
					v.FenceReuse++
				}
				seen[s.Fence] = true
			}
		}
		i = j
	}
	if fenced {
		for _, w := range writes {
			if w.Stale && !overlapping[sectionKey{w.Client, w.Seq}] {
				v.RejectedExclusive++
			}
		}
	}
	ops := lockOps(secs)
	v.MutexOK = porcupine.CheckOperationsTimeout(mutexModel(false), ops, checkTimeout)
	v.keepIllegal(v.MutexOK, mutexModel(false), ops)
	if fenced {
		v.FencedOK = porcupine.CheckOperationsTimeout(mutexModel(true), ops, checkTimeout)
		v.keepIllegal(v.FencedOK, mutexModel(true), ops)
	}
	enters := make(map[sectionKey]int64, len(secs))
	for _, s := range secs {
		enters[keyOf(s)] = s.Enter
	}
	checkWrites(&v, writes, enters)
	v.Porcupine = combined(v.MutexOK, v.FencedOK, v.ResourceOK)
	return v
}

func checkWrites(v *Verdict, writes []Write, enters map[sectionKey]int64) {
	var accepted []Write
	var ops []porcupine.Operation
	for _, w := range writes {
		switch {
		case w.Accepted:
			accepted = append(accepted, w)
		case w.Stale:
			v.StaleAttempted++
		case w.Unknown:
			v.InFlight++
		default:
			v.WriteErrors++
		}
		var out any = w.Accepted
		if w.Unknown {
			out = nil
		}
		ops = append(ops, porcupine.Operation{ClientId: w.Client, Input: writeInput{w.Resource, w.Fence, w.Owner}, Output: out, Call: w.Call, Return: w.Return})
	}
	// Stale accepted: an accepted write that began after the resource had
	// accepted (and returned) either a write with a larger fence (the
	// resource broke its own rule), or a write of a newer holder, one whose
	// section entered after the writer's (the old holder's write landed on
	// top of the new holder's: what fencing exists to prevent).
	byRes := map[string][]Write{}
	for _, w := range accepted {
		byRes[w.Resource] = append(byRes[w.Resource], w)
	}
	for _, ws := range byRes {
		byCall := slices.Clone(ws)
		slices.SortFunc(byCall, func(a, b Write) int { return cmp.Compare(a.Call, b.Call) })
		byRet := slices.Clone(ws)
		slices.SortFunc(byRet, func(a, b Write) int { return cmp.Compare(a.Return, b.Return) })
		var maxFence uint64
		maxEnter := int64(math.MinInt64)
		k := 0
		for _, w := range byCall {
			for ; k < len(byRet) && byRet[k].Return < w.Call; k++ {
				maxFence = max(maxFence, byRet[k].Fence)
				if e, ok := enters[sectionKey{byRet[k].Client, byRet[k].Seq}]; ok {
					maxEnter = max(maxEnter, e)
				}
			}
			e, ok := enters[sectionKey{w.Client, w.Seq}]
			if w.Fence < maxFence || (ok && e < maxEnter) {
				v.StaleAccepted++
			}
		}
	}
	if v.WriteErrors == 0 && len(ops) > 0 {
		m := resourceModel
		if v.InFlight > 0 {
			m = resourceModelUnknown
		}
		v.ResourceOK = porcupine.CheckOperationsTimeout(m, ops, checkTimeout)
		v.keepIllegal(v.ResourceOK, m, ops)
	}
}
