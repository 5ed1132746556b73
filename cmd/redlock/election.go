package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/redlock"
	"github.com/quorumlab/redlock/validity"
)

// An election's keys hang off the name's stem (its lock key as a mutex;
// see redlock/election.go): stem+":e" is the election's lock key (the
// leader's token, with a PTTL), stem+":e:leader" its record (a hash of the
// term, token and value the leader published; it stays after the leader
// goes), stem+":e:fence" the fence counter whose values are the terms, and
// stem+":e:waiters" the campaigners' queue.
const (
	kindElection   = "election"
	electionInfix  = ":e"
	electionRecord = ":leader"
)

// electionKeys returns the lock key, record and fence counter of the
// election whose stem (the name's mutex lock key) is stem.
func electionKeys(stem string) (lock, record, fence string) {
	lock = stem + electionInfix
	return lock, lock + electionRecord, lock + ":fence"
}

// electionOf returns the election whose lock key or record key is, and
// false for any other key. A Locker with RedsyncKeys has no elections
// (redlock.Locker.Election refuses it).
func electionOf(opts *redlock.Options, key string) (string, bool) {
	if opts.RedsyncKeys {
		return "", false
	}
	lock := strings.TrimSuffix(key, electionRecord)
	stem, ok := strings.CutSuffix(lock, electionInfix)
	if !ok {
		return "", false
	}
	return resourceFor(opts, stem)
}

// electionMaster is what one master says about an election: its lock key
// and its record, read at one instant (MULTI/EXEC).
type electionMaster struct {
	// masterState is the lock key's reading, as for a mutex: Holder and
	// Label its token shortened, PTTLMs its time to live, Fence the
	// election's fence counter (the latest term granted here).
	masterState
	// Record: the leader record is there, with Term and Value, published
	// by the token RecordHolder names (shortened).
	Record       bool   `json:"record"`
	Term         uint64 `json:"term,omitempty"`
	Value        string `json:"value,omitempty"`
	RecordHolder string `json:"record_holder,omitempty"`
	// Current: the record is the lock key's holder's, so this master
	// reports a leader (the rule of redlock/scripts/leader_read.lua).
	Current bool `json:"current"`

	termOK bool // the record's term is a decimal number
}

// leaderReport is one leader (term, value and holder) and the masters
// that report it.
type leaderReport struct {
	Value  string `json:"value"`
	Term   uint64 `json:"term"`
	Holder string `json:"holder"`
	Label  string `json:"label,omitempty"`
	On     int    `json:"on"`
	// DeadlineMs is the need-th largest remaining PTTL among the masters
	// reporting this leader (need: the majority): how long its keys
	// stand on a majority unless it extends them. Deadline is the same
	// instant by this machine's clock: the need-th latest of reply time
	// + PTTL among them. Both only when On reaches the majority; NoExpiry
	// when that PTTL is none (keys set by hand).
	DeadlineMs *int64     `json:"deadline_ms,omitempty"`
	Deadline   *time.Time `json:"deadline,omitempty"`
	NoExpiry   bool       `json:"no_expiry,omitempty"`
}

// electionRecordView is a leader record, as the masters keep it after
// its leader goes.
type electionRecordView struct {
	Term   uint64 `json:"term"`
	Value  string `json:"value"`
	Holder string `json:"holder"`
	On     int    `json:"on"` // masters with this record
}

// electionView is an election as a campaigner's Leader would see it.
type electionView struct {
	Key       string `json:"key"`
	RecordKey string `json:"record_key"`
	FenceKey  string `json:"fence_key"`
	Masters   int    `json:"masters"`
	Majority  int    `json:"majority"`
	Answered  int    `json:"answered"`
	// Decided: enough masters answered that the unanswered ones cannot
	// change Leader.
	Decided bool `json:"decided"`
	// Leader is the leader a majority of masters report (Reports[0]);
	// nil: no leader.
	Leader *leaderReport `json:"leader,omitempty"`
	// Reports: each leader some master reports, most masters first.
	Reports []leaderReport `json:"reports"`
	// LockHolder is the election's lock key's most common token (and on
	// how many masters), whether or not it has published: a leader that
	// has not published yet, or lost its record, shows here only.
	LockHolder string `json:"lock_holder,omitempty"`
	LockOn     int    `json:"lock_on"`
	// Last is the record of the largest term on the masters that
	// answered: it stays after its leader goes. nil: no record.
	Last *electionRecordView `json:"last,omitempty"`
	// Nodes: each master's reading (inspect only).
	Nodes []electionMaster `json:"nodes,omitempty"`
}

// readElectionOn reads an election's lock key, PTTL, record and fence
// counter on one master, atomically (MULTI/EXEC). HGET, not HMGET: the
// operator account of docs/runbook.md has the one.
func readElectionOn(ctx context.Context, c *redis.Client, lockKey, recordKey, fenceKey string) (electionMaster, error) {
	var em electionMaster
	var get, term, tok, val, fence *redis.StringCmd
	var pttl *redis.DurationCmd
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		get, pttl = p.Get(ctx, lockKey), p.PTTL(ctx, lockKey)
		term, tok, val = p.HGet(ctx, recordKey, "term"), p.HGet(ctx, recordKey, "token"), p.HGet(ctx, recordKey, "value")
		fence = p.HGet(ctx, fenceKey, "fence")
		return nil
	})
	em.at = time.Now()
	if err != nil && !errors.Is(err, redis.Nil) && !isReplyError(err) {
		return em, err
	}
	v, err := get.Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return em, fmt.Errorf("reading %s: %w", lockKey, err)
	}
	if err == nil {
		em.Present, em.token = true, v
		label, _ := splitToken(v)
		em.Holder, em.Label = shortToken(v), printable(label)
		ms := int64(-1)
		if d := pttl.Val(); d >= 0 {
			ms = d.Milliseconds()
		}
		em.PTTLMs = &ms
	}
	rec := [3]string{}
	for j, cmd := range []*redis.StringCmd{term, tok, val} {
		v, err := cmd.Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return em, fmt.Errorf("reading %s: %w", recordKey, err)
		}
		rec[j] = v
		em.Record = em.Record || err == nil
	}
	if em.Record {
		em.Value, em.RecordHolder = rec[2], shortToken(rec[1])
		t, err := strconv.ParseUint(rec[0], 10, 64)
		if err != nil {
			em.Error = fmt.Sprintf("the record's term %q is not a decimal number", printable(rec[0]))
		} else {
			em.Term, em.termOK = t, true
			// As leader_read.lua: the record counts only when it names
			// the lock key's token.
			em.Current = em.Present && rec[1] == em.token
		}
	}
	if v, err := fence.Result(); err == nil {
		if f, err := strconv.ParseUint(v, 10, 64); err == nil {
			em.Fence = &f
		} else {
			em.Error = fmt.Sprintf("fence counter %q is not a decimal number", printable(v))
		}
	} else if !errors.Is(err, redis.Nil) {
		em.Error = "reading " + fenceKey + ": " + err.Error()
	}
	em.Answered = true
	return em, nil
}

// readElection asks every master for the election under stem.
func (s *conns) readElection(ctx context.Context, what, stem string) []electionMaster {
	lockKey, recordKey, fenceKey := electionKeys(stem)
	nodes := make([]electionMaster, len(s.clients))
	errs := s.each(ctx, what, func(ctx context.Context, i int, c *redis.Client) error {
		rctx, cancel := s.req(ctx)
		defer cancel()
		var err error
		nodes[i], err = readElectionOn(rctx, c, lockKey, recordKey, fenceKey)
		return err
	})
	for i := range nodes {
		nodes[i].Addr = s.r.masters[i].name
		if errs[i] != nil {
			nodes[i] = electionMaster{masterState: masterState{Addr: s.r.masters[i].name, Error: describe(errs[i], s.r.timeout)}}
		}
	}
	return nodes
}

// newElectionView sums the masters' readings as redlock.Election.Leader
// does: a leader is a (term, token, value) that a majority reports, and
// its deadline the need-th latest expiry among them. nil when no master
// that answered has the election's lock key or record.
func newElectionView(stem string, nodes []electionMaster) *electionView {
	n := len(nodes)
	lockKey, recordKey, fenceKey := electionKeys(stem)
	v := &electionView{Key: lockKey, RecordKey: recordKey, FenceKey: fenceKey, Masters: n, Majority: validity.Majority(n), Reports: []leaderReport{}, Nodes: nodes}
	type group struct {
		report  leaderReport
		token   string
		expires []time.Time // zero: no expiry
		pttls   []int64
	}
	var groups []*group
	locks := map[string]int{}
	type recKey struct {
		term      uint64
		value, by string
	}
	records := map[recKey]int{}
	var last *recKey
	found := false
	for _, em := range nodes {
		if !em.Answered {
			continue
		}
		v.Answered++
		found = found || em.Present || em.Record
		if em.Present {
			locks[em.token]++
			if c := locks[em.token]; c > v.LockOn {
				v.LockOn, v.LockHolder = c, em.Holder
			}
		}
		if em.Record && em.termOK {
			k := recKey{em.Term, em.Value, em.RecordHolder}
			records[k]++
			if last == nil || k.term > last.term {
				last = &k
			}
		}
		if !em.Current {
			continue
		}
		j := slices.IndexFunc(groups, func(g *group) bool {
			return g.report.Term == em.Term && g.token == em.token && g.report.Value == em.Value
		})
		if j < 0 {
			groups = append(groups, &group{report: leaderReport{Value: em.Value, Term: em.Term, Holder: em.Holder, Label: em.Label}, token: em.token})
			j = len(groups) - 1
		}
		g := groups[j]
		g.report.On++
		var at time.Time
		if *em.PTTLMs >= 0 {
			at = em.at.Add(time.Duration(*em.PTTLMs) * time.Millisecond)
		}
		g.expires, g.pttls = append(g.expires, at), append(g.pttls, *em.PTTLMs)
	}
	if !found {
		return nil
	}
	slices.SortStableFunc(groups, func(a, b *group) int { return b.report.On - a.report.On })
	for _, g := range groups {
		if g.report.On >= v.Majority {
			g.report.Deadline, g.report.DeadlineMs, g.report.NoExpiry = majorityDeadline(g.expires, g.pttls, v.Majority)
		}
		v.Reports = append(v.Reports, g.report)
	}
	top := 0
	if len(v.Reports) > 0 {
		top = v.Reports[0].On
		if top >= v.Majority {
			v.Leader = &v.Reports[0]
		}
	}
	v.Decided = v.Leader != nil || top+(n-v.Answered) < v.Majority
	if last != nil {
		v.Last = &electionRecordView{Term: last.term, Value: last.value, Holder: last.by, On: records[*last]}
	}
	return v
}

// majorityDeadline is when keys that expire at expires (zero: no expiry),
// with pttls ms left (-1: none), stop standing on need masters: the
// need-th latest expiry, and the need-th largest PTTL. noExpiry when
// that key has none.
func majorityDeadline(expires []time.Time, pttls []int64, need int) (deadline *time.Time, ms *int64, noExpiry bool) {
	// No expiry sorts first: it is the latest of all.
	expires, pttls = slices.Clone(expires), slices.Clone(pttls)
	slices.SortFunc(expires, func(a, b time.Time) int {
		if a.IsZero() || b.IsZero() {
			return cmp.Compare(btoi(b.IsZero()), btoi(a.IsZero()))
		}
		return b.Compare(a)
	})
	slices.SortFunc(pttls, func(a, b int64) int {
		if a < 0 || b < 0 {
			return cmp.Compare(btoi(b < 0), btoi(a < 0))
		}
		return cmp.Compare(b, a)
	})
	if expires[need-1].IsZero() {
		return nil, nil, true
	}
	d, m := expires[need-1].UTC(), pttls[need-1]
	return &d, &m, false
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// fmtValue quotes a leader's value for a line of text, cut to max runes.
func fmtValue(s string, max int) string {
	if r := []rune(s); len(r) > max {
		s = string(r[:max]) + "…"
	}
	return strconv.Quote(s)
}

// fmtDeadline is a leader's deadline for a line of text.
func fmtDeadline(l *leaderReport) string {
	if l.NoExpiry {
		return "NO expiry on a majority (keys not set by a Locker, or changed by hand)"
	}
	return fmt.Sprintf("deadline in %v", (time.Duration(*l.DeadlineMs) * time.Millisecond).String())
}

// leaderSummary is list's one-line state of an election.
func leaderSummary(v *electionView) string {
	switch {
	case v.Leader != nil:
		l := v.Leader
		return fmt.Sprintf("leader %s, term %d, holder %s on %d/%d, %s", fmtValue(l.Value, 40), l.Term, l.Holder, l.On, v.Masters, fmtDeadline(l))
	case !v.Decided:
		return fmt.Sprintf("leader unknown: only %d of %d masters answered", v.Answered, v.Masters)
	}
	s := "no leader"
	if v.LockOn > 0 {
		s += fmt.Sprintf("; lock held by %s on %d/%d, its value not on a majority", v.LockHolder, v.LockOn, v.Masters)
	}
	if v.Last != nil {
		s += fmt.Sprintf("; last published: term %d, %s", v.Last.Term, fmtValue(v.Last.Value, 40))
	}
	return s
}

// printElection writes an election: each master's reading, then the
// leader a majority reports, or why there is none.
func printElection(w io.Writer, v *electionView) {
	fmt.Fprintf(w, "\nelection: lock key %s   record %s   fence counter %s\n", printable(v.Key), printable(v.RecordKey), printable(v.FenceKey))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MASTER\tKEY\tHOLDER\tPTTL\tTERM\tVALUE\tRECORD\tFENCE\t")
	for _, em := range v.Nodes {
		if !em.Answered {
			fmt.Fprintf(tw, "%s\t?\t-\t-\t-\t-\t-\t-\t%s\n", em.Addr, em.Error)
			continue
		}
		key, holder, pttl, term, value, record, fence := "no", "-", "-", "-", "-", "none", "-"
		if em.Present {
			key, holder, pttl = "yes", em.Holder, fmtPTTL(*em.PTTLMs)
		}
		if em.Record {
			term, value = strconv.FormatUint(em.Term, 10), fmtValue(em.Value, 32)
			record = "the holder's"
			if !em.Current {
				record = "by " + em.RecordHolder // a leader gone, or not yet published
			}
		}
		if em.Fence != nil {
			fence = strconv.FormatUint(*em.Fence, 10)
		}
		extra := ""
		if em.Error != "" {
			extra = "error: " + em.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", em.Addr, key, holder, pttl, term, value, record, fence, extra)
	}
	tw.Flush()
	fmt.Fprintln(w)
	switch {
	case v.Leader != nil:
		l := v.Leader
		fmt.Fprintf(w, "election: LEADER %s, term %d, holder %s, reported by %d of %d masters (majority %d)\n",
			fmtValue(l.Value, 200), l.Term, l.Holder, l.On, v.Masters, v.Majority)
		if l.NoExpiry {
			fmt.Fprintf(w, "          %s\n", fmtDeadline(l))
		} else {
			fmt.Fprintf(w, "          %s (%s): until then its keys stand on a majority unless it extends them\n"+
				"          (the %s largest remaining PTTL among the masters reporting it)\n",
				fmtDeadline(l), l.Deadline.Format(time.RFC3339Nano), ordinal(v.Majority))
		}
	case v.Decided:
		fmt.Fprintf(w, "election: NO LEADER: no leader is reported by a majority (%d) of the %d masters (%d answered)\n", v.Majority, v.Masters, v.Answered)
	default:
		fmt.Fprintf(w, "election: UNKNOWN: only %d of %d masters answered; the others could tip it either way\n", v.Answered, v.Masters)
	}
	if v.Leader == nil && v.LockOn > 0 {
		fmt.Fprintf(w, "          the election's lock is held by %s on %d of %d masters, but its value is not published there\n"+
			"          (a master reports a leader only where the record names the lock's holder)\n",
			v.LockHolder, v.LockOn, v.Masters)
	}
	if len(v.Reports) > 1 || v.Leader == nil && len(v.Reports) == 1 {
		fmt.Fprintf(w, "          leaders reported:")
		for _, r := range v.Reports {
			fmt.Fprintf(w, " term %d %s by %s on %d;", r.Term, fmtValue(r.Value, 40), r.Holder, r.On)
		}
		fmt.Fprintln(w)
	}
	if v.Leader == nil && v.Last != nil {
		fmt.Fprintf(w, "          last published: term %d, %s, by %s (on %d masters; the record stays after its leader goes)\n",
			v.Last.Term, fmtValue(v.Last.Value, 200), v.Last.Holder, v.Last.On)
	}
}

func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return strconv.Itoa(n) + suffix
}

// releaseElection force-releases the leader of the election under stem:
// a compare-and-delete of the election's lock key holding the leader's
// token (the library's release, which announces it to the campaigners),
// the token on a majority of the masters that answered, or the one
// f.token names. The record stays (it names no leader once the lock key
// is gone, as leader_read.lua decides) and so does the fence counter
// (terms must stay monotonic); a leader still running finds its
// leadership lost at its next extension. found is false when no master
// that answered has the election's lock key (held by the token f.token
// names, when given).
func (s *conns) releaseElection(ctx context.Context, resource, stem string, majority int, f releaseFlags, asJSON bool, stdout io.Writer,
	refuse func(code int, format string, a ...any) int) (code int, found bool) {
	lockKey, recordKey, fenceKey := electionKeys(stem)
	counts := map[string]int{}
	for _, em := range s.readElection(ctx, "release: the election's leader", stem) {
		if em.Present && (f.token == "" || matchToken(f.token, em.token)) {
			counts[em.token]++
		}
	}
	if len(counts) == 0 {
		return 0, false
	}
	target, chosen := "", "majority"
	for tok, n := range counts {
		if n >= majority || f.token != "" {
			target = tok
		}
	}
	switch {
	case f.token != "" && len(counts) > 1:
		return refuse(exitRefused, "-token matches %d different tokens; give more of it", len(counts)), true
	case f.token != "":
		chosen = "-token"
	case target == "":
		var seen []string
		for tok, n := range counts {
			seen = append(seen, fmt.Sprintf("%s on %d", shortToken(tok), n))
		}
		slices.Sort(seen)
		return refuse(exitRefused, "the election %q's lock is on no majority (%d): %s. Nothing was deleted. If you are sure, name one with -token",
			printable(resource), majority, strings.Join(seen, ", ")), true
	}
	return s.forceDelete(ctx, forced{
		event: "force-release", resource: resource, key: lockKey, target: target, chosen: chosen, majority: majority,
		note: fmt.Sprintf("election: its record %s and fence counter %s left as they are (terms must stay monotonic); the campaigners elect the next leader",
			printable(recordKey), printable(fenceKey)),
		del: func(ctx context.Context, c *redis.Client) (int64, error) {
			return compareAndDelete.Run(ctx, c, []string{lockKey}, target).Int64()
		},
	}, f, asJSON, stdout), true
}

// electionResetKeys are the keys reset deletes of the election under
// stem: its lock key, its record and the campaigners' queue; never the
// fence counter, whose values are the terms.
func electionResetKeys(stem string) []string {
	lock, record, _ := electionKeys(stem)
	return []string{lock, record, lock + ":waiters"}
}
