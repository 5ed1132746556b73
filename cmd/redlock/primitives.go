package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/internal/keys"
	"github.com/quorumlab/redlock/redlock"
	"github.com/quorumlab/redlock/validity"
)

// The keys of a semaphore and of a read-write lock hang off the stem (the
// name's lock key, see redlock/semaphore.go and redlock/rwmutex.go):
// stem+":meta" (the permits record), stem+":s:<j>" (slot j, a Redlock key),
// stem+":w" (the writer key), stem+":wi" (a waiting writer's intent) and
// stem+":r" (the readers: a sorted set, token → expiry in the master's ms).
const (
	kindSemaphore = "semaphore"
	kindRWLock    = "rwlock"
)

// primitiveOf returns the resource and kind whose key key is, and false
// when key is none of a semaphore's, read-write lock's or election's keys
// (its lock key or record, election.go) under opts. A Locker with
// RedsyncKeys makes none of them (redlock.Locker.Semaphore, RWMutex and
// Election refuse it), so under that naming every key is a mutex's.
func primitiveOf(opts *redlock.Options, key string) (resource, kind string, ok bool) {
	if opts.RedsyncKeys {
		return "", "", false
	}
	if r, ok := electionOf(opts, key); ok {
		return r, kindElection, true
	}
	var stem, suffix string
	for _, suf := range []string{":meta", ":wi", ":w", ":r", ":s:"} {
		i := strings.LastIndex(key, suf)
		if i < 0 {
			continue
		}
		rest := key[i+len(suf):]
		if suf == ":s:" {
			if n, err := strconv.Atoi(rest); err != nil || n < 1 || n > keys.MaxPermits || strconv.Itoa(n) != rest {
				continue
			}
		} else if rest != "" {
			continue
		}
		stem, suffix = key[:i], suf
		break
	}
	if stem == "" {
		return "", "", false
	}
	r, ok := resourceFor(opts, stem)
	if !ok {
		return "", "", false
	}
	if suffix == ":meta" || suffix == ":s:" {
		return r, kindSemaphore, true
	}
	return r, kindRWLock, true
}

// keyHolder is one key's token on one master.
type keyHolder struct {
	Holder string `json:"holder"`
	Label  string `json:"label,omitempty"`
	PTTLMs int64  `json:"pttl_ms"` // -1: no expiry

	token string
}

// slotHolder is slot Slot's holder on one master.
type slotHolder struct {
	Slot int `json:"slot"`
	keyHolder
}

// primMaster is what one master holds of a semaphore and a read-write lock.
type primMaster struct {
	Addr     string `json:"addr"`
	Answered bool   `json:"answered"`
	Error    string `json:"error,omitempty"`
	// Permits is the semaphore's permits record (0: none).
	Permits int          `json:"permits,omitempty"`
	Slots   []slotHolder `json:"slots,omitempty"`
	// Readers counts the live readers (by this master's clock).
	Readers int        `json:"readers"`
	Writer  *keyHolder `json:"writer,omitempty"`
	Intent  *keyHolder `json:"intent,omitempty"`

	readerTokens []string // the live readers' tokens
}

func holderOf(get *redis.StringCmd, pttl *redis.DurationCmd) (*keyHolder, error) {
	v, err := get.Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	label, _ := splitToken(v)
	ms := int64(-1)
	if d := pttl.Val(); d >= 0 {
		ms = d.Milliseconds()
	}
	return &keyHolder{Holder: shortToken(v), Label: printable(label), PTTLMs: ms, token: v}, nil
}

// readPrimOn reads stem's semaphore and read-write keys on one master,
// atomically (MULTI/EXEC). Every slot up to MaxPermits is read: the
// permits record may be missing or differ between masters.
func readPrimOn(ctx context.Context, c *redis.Client, stem string) (primMaster, error) {
	var pm primMaster
	var now *redis.TimeCmd
	var meta, w, wi *redis.StringCmd
	var wp, wip *redis.DurationCmd
	var readers *redis.ZSliceCmd
	gets := make([]*redis.StringCmd, keys.MaxPermits)
	pttls := make([]*redis.DurationCmd, keys.MaxPermits)
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		now = p.Time(ctx)
		meta = p.Get(ctx, stem+":meta")
		for j := range keys.MaxPermits {
			k := stem + ":s:" + strconv.Itoa(j+1)
			gets[j], pttls[j] = p.Get(ctx, k), p.PTTL(ctx, k)
		}
		w, wp = p.Get(ctx, stem+":w"), p.PTTL(ctx, stem+":w")
		wi, wip = p.Get(ctx, stem+":wi"), p.PTTL(ctx, stem+":wi")
		readers = p.ZRangeWithScores(ctx, stem+":r", 0, -1)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) && !isReplyError(err) {
		return pm, err
	}
	if v, err := meta.Result(); err == nil {
		if pm.Permits, err = strconv.Atoi(v); err != nil {
			return pm, fmt.Errorf("permits record %q is not a number", printable(v))
		}
	} else if !errors.Is(err, redis.Nil) {
		return pm, fmt.Errorf("reading %s:meta: %w", stem, err)
	}
	for j := range keys.MaxPermits {
		h, err := holderOf(gets[j], pttls[j])
		if err != nil {
			return pm, fmt.Errorf("reading slot %d: %w", j+1, err)
		}
		if h != nil {
			pm.Slots = append(pm.Slots, slotHolder{Slot: j + 1, keyHolder: *h})
		}
	}
	if pm.Writer, err = holderOf(w, wp); err != nil {
		return pm, fmt.Errorf("reading %s:w: %w", stem, err)
	}
	if pm.Intent, err = holderOf(wi, wip); err != nil {
		return pm, fmt.Errorf("reading %s:wi: %w", stem, err)
	}
	zs, err := readers.Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return pm, fmt.Errorf("reading %s:r: %w", stem, err)
	}
	ms := float64(now.Val().UnixMilli())
	for _, z := range zs {
		if z.Score > ms { // as rw_read.lua: expired at score <= now
			pm.Readers++
			if tok, ok := z.Member.(string); ok {
				pm.readerTokens = append(pm.readerTokens, tok)
			}
		}
	}
	pm.Answered = true
	return pm, nil
}

// tokenCount is the most common token of one key over the masters.
type tokenCount struct {
	Held   bool   `json:"held"` // on a majority
	Holder string `json:"holder"`
	Label  string `json:"label,omitempty"`
	On     int    `json:"on"`
	Tokens int    `json:"tokens"` // distinct tokens seen
	// MaxPTTLMs is the largest PTTL among the masters with that token.
	MaxPTTLMs int64    `json:"max_pttl_ms"`
	Masters   []string `json:"masters"` // those masters
}

func countTokens(hs []*keyHolder, addrs []string, majority int) *tokenCount {
	count := map[string]int{}
	top := ""
	for _, h := range hs {
		if h == nil {
			continue
		}
		count[h.token]++
		if c := count[h.token]; c > count[top] || (c == count[top] && h.token < top) {
			top = h.token
		}
	}
	if len(count) == 0 {
		return nil
	}
	tc := &tokenCount{On: count[top], Tokens: len(count), MaxPTTLMs: -2}
	for i, h := range hs {
		if h == nil || h.token != top {
			continue
		}
		tc.Holder, tc.Label = h.Holder, h.Label
		tc.Masters = append(tc.Masters, addrs[i])
		if tc.MaxPTTLMs == -2 || h.PTTLMs < 0 || (tc.MaxPTTLMs >= 0 && h.PTTLMs > tc.MaxPTTLMs) {
			tc.MaxPTTLMs = h.PTTLMs
		}
	}
	tc.Held = tc.On >= majority
	return tc
}

type slotView struct {
	Slot int `json:"slot"`
	tokenCount
}

type semView struct {
	Permits int        `json:"permits"` // the record on most masters (0: none)
	Held    int        `json:"held"`    // slots with one token on a majority
	Slots   []slotView `json:"slots"`
}

type rwView struct {
	// Readers is each master's count of live readers (-1: no answer).
	Readers []int       `json:"readers"`
	Writer  *tokenCount `json:"writer,omitempty"`
	Intent  *tokenCount `json:"intent,omitempty"`
}

type primView struct {
	Nodes     []primMaster `json:"nodes"`
	Semaphore *semView     `json:"semaphore,omitempty"`
	RWLock    *rwView      `json:"rwlock,omitempty"`
}

// primView sums the masters' reports; nil when no master has any key.
func newPrimView(nodes []primMaster) *primView {
	n := len(nodes)
	majority := validity.Majority(n)
	addrs := make([]string, n)
	for i, pm := range nodes {
		addrs[i] = pm.Addr
	}
	v := &primView{Nodes: nodes}
	permits := map[int]int{}
	slots := map[int][]*keyHolder{}
	var writers, intents []*keyHolder
	rw := &rwView{}
	anyRW := false
	for i, pm := range nodes {
		writers, intents = append(writers, pm.Writer), append(intents, pm.Intent)
		if !pm.Answered {
			rw.Readers = append(rw.Readers, -1)
			continue
		}
		rw.Readers = append(rw.Readers, pm.Readers)
		anyRW = anyRW || pm.Readers > 0 || pm.Writer != nil || pm.Intent != nil
		if pm.Permits > 0 {
			permits[pm.Permits]++
		}
		for _, sh := range pm.Slots {
			if slots[sh.Slot] == nil {
				slots[sh.Slot] = make([]*keyHolder, n)
			}
			slots[sh.Slot][i] = &sh.keyHolder
		}
	}
	if len(permits) > 0 || len(slots) > 0 {
		sv := &semView{Slots: []slotView{}}
		for p, c := range permits {
			if c > permits[sv.Permits] || (c == permits[sv.Permits] && p < sv.Permits) {
				sv.Permits = p
			}
		}
		for j, hs := range slots {
			tc := countTokens(hs, addrs, majority)
			sv.Slots = append(sv.Slots, slotView{Slot: j, tokenCount: *tc})
			if tc.Held {
				sv.Held++
			}
		}
		sort.Slice(sv.Slots, func(a, b int) bool { return sv.Slots[a].Slot < sv.Slots[b].Slot })
		v.Semaphore = sv
	}
	if anyRW {
		rw.Writer, rw.Intent = countTokens(writers, addrs, majority), countTokens(intents, addrs, majority)
		v.RWLock = rw
	}
	if v.Semaphore == nil && v.RWLock == nil {
		return nil
	}
	return v
}

// readPrim asks every master for stem's semaphore and read-write keys.
func (s *conns) readPrim(ctx context.Context, what, stem string) []primMaster {
	nodes := make([]primMaster, len(s.clients))
	errs := s.each(ctx, what, func(ctx context.Context, i int, c *redis.Client) error {
		rctx, cancel := s.req(ctx)
		defer cancel()
		var err error
		nodes[i], err = readPrimOn(rctx, c, stem)
		return err
	})
	for i := range nodes {
		nodes[i].Addr = s.r.masters[i].name
		if errs[i] != nil {
			nodes[i].Answered, nodes[i].Error = false, describe(errs[i], s.r.timeout)
		}
	}
	return nodes
}

func fmtTokenCount(tc *tokenCount, n int) string {
	if tc == nil {
		return "none"
	}
	s := fmt.Sprintf("%s on %d/%d (%s), max pttl %s", tc.Holder, tc.On, n, strings.Join(tc.Masters, ","), fmtPTTL(tc.MaxPTTLMs))
	if tc.Tokens > 1 {
		s += fmt.Sprintf(" (+%d other tokens)", tc.Tokens-1)
	}
	return s
}

func fmtReaders(rs []int) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = "?"
		if r >= 0 {
			parts[i] = strconv.Itoa(r)
		}
	}
	return strings.Join(parts, " ")
}

// printPrim writes the semaphore and read-write lock found under a name.
func printPrim(w io.Writer, v *primView) {
	n := len(v.Nodes)
	majority := validity.Majority(n)
	if sv := v.Semaphore; sv != nil {
		fmt.Fprintf(w, "\nsemaphore: %d of %d permits held (a slot is held when one token is on a majority, %d, of the %d masters)\n",
			sv.Held, sv.Permits, majority, n)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SLOT\tHELD\tON\tHOLDER\tMASTERS\tMAX PTTL\t")
		for _, s := range sv.Slots {
			held := "no"
			if s.Held {
				held = "yes"
			}
			holder := s.Holder
			if s.Tokens > 1 {
				holder += fmt.Sprintf(" (+%d other tokens)", s.Tokens-1)
			}
			fmt.Fprintf(tw, "%d\t%s\t%d/%d\t%s\t%s\t%s\t\n", s.Slot, held, s.On, n, holder, strings.Join(s.Masters, ","), fmtPTTL(s.MaxPTTLMs))
		}
		tw.Flush()
	}
	if rw := v.RWLock; rw != nil {
		fmt.Fprintf(w, "\nread-write lock:\n")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MASTER\tREADERS\tWRITER\tPTTL\tINTENT\tPTTL\t")
		for _, pm := range v.Nodes {
			if !pm.Answered {
				fmt.Fprintf(tw, "%s\t?\t-\t-\t-\t-\t%s\n", pm.Addr, pm.Error)
				continue
			}
			wr, wp, in, ip := "-", "-", "-", "-"
			if pm.Writer != nil {
				wr, wp = pm.Writer.Holder, fmtPTTL(pm.Writer.PTTLMs)
			}
			if pm.Intent != nil {
				in, ip = pm.Intent.Holder, fmtPTTL(pm.Intent.PTTLMs)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t\n", pm.Addr, pm.Readers, wr, wp, in, ip)
		}
		tw.Flush()
		fmt.Fprintf(w, "writer: %s\nintent: %s\n", fmtTokenCount(rw.Writer, n), fmtTokenCount(rw.Intent, n))
	}
}

// semSummary and rwSummary are list's one-line states.
func semSummary(sv *semView, n int) string {
	s := fmt.Sprintf("%d of %d permits held", sv.Held, sv.Permits)
	for _, sl := range sv.Slots {
		s += fmt.Sprintf("; slot %d: %s on %d/%d", sl.Slot, sl.Holder, sl.On, n)
	}
	return s
}

func rwSummary(rw *rwView, n int) string {
	return fmt.Sprintf("readers per master [%s]; writer %s; intent %s", fmtReaders(rw.Readers), fmtTokenCount(rw.Writer, n), fmtTokenCount(rw.Intent, n))
}

// listPrimitive is one semaphore, read-write lock or election in list's
// output.
type listPrimitive struct {
	Resource  string        `json:"resource"`
	Stem      string        `json:"stem"`
	Kinds     []string      `json:"kinds"`
	Semaphore *semView      `json:"semaphore,omitempty"`
	RWLock    *rwView       `json:"rwlock,omitempty"`
	Election  *electionView `json:"election,omitempty"`
}

// listPrims reads each named primitive on every master, one round per
// master (the names' reads in turn), and sums them. A name whose keys the
// scan found only an election's is not read as a semaphore or read-write
// lock, nor the other way round.
func (s *conns) listPrims(ctx context.Context, names []string, stems map[string]string, kinds map[string]map[string]bool) ([]listPrimitive, []error) {
	n := len(s.clients)
	nodes := make([][]primMaster, len(names)) // [name][master]
	elections := make([][]electionMaster, len(names))
	for k := range nodes {
		nodes[k] = make([]primMaster, n)
		elections[k] = make([]electionMaster, n)
	}
	errs := s.each(ctx, fmt.Sprintf("list: reading %d semaphores, read-write locks and elections", len(names)), func(ctx context.Context, i int, c *redis.Client) error {
		for k, r := range names {
			if kinds[r][kindSemaphore] || kinds[r][kindRWLock] {
				rctx, cancel := s.req(ctx)
				pm, err := readPrimOn(rctx, c, stems[r])
				cancel()
				if err != nil {
					return err
				}
				nodes[k][i] = pm
			}
			if kinds[r][kindElection] {
				lockKey, recordKey, fenceKey := electionKeys(stems[r])
				rctx, cancel := s.req(ctx)
				em, err := readElectionOn(rctx, c, lockKey, recordKey, fenceKey)
				cancel()
				if err != nil {
					return err
				}
				elections[k][i] = em
			}
		}
		return nil
	})
	out := []listPrimitive{}
	for k, r := range names {
		for i := range n {
			nodes[k][i].Addr, elections[k][i].Addr = s.r.masters[i].name, s.r.masters[i].name
			if errs[i] != nil {
				nodes[k][i] = primMaster{Addr: s.r.masters[i].name, Error: describe(errs[i], s.r.timeout)}
				elections[k][i] = electionMaster{masterState: masterState{Addr: s.r.masters[i].name, Error: describe(errs[i], s.r.timeout)}}
			}
		}
		lp := listPrimitive{Resource: r, Stem: stems[r]}
		for kind := range kinds[r] {
			lp.Kinds = append(lp.Kinds, kind)
		}
		sort.Strings(lp.Kinds)
		if kinds[r][kindSemaphore] || kinds[r][kindRWLock] {
			if v := newPrimView(nodes[k]); v != nil {
				lp.Semaphore, lp.RWLock = v.Semaphore, v.RWLock
			}
		}
		if kinds[r][kindElection] {
			if v := newElectionView(stems[r], elections[k]); v != nil {
				v.Nodes = nil // inspect shows them
				lp.Election = v
			}
		}
		if lp.Semaphore == nil && lp.RWLock == nil && lp.Election == nil {
			continue // gone meanwhile
		}
		out = append(out, lp)
	}
	return out, errs
}

func printListPrims(w io.Writer, ps []listPrimitive, n int) {
	if len(ps) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RESOURCE\tKIND\tSTATE\t")
	for _, p := range ps {
		if p.Semaphore != nil {
			fmt.Fprintf(tw, "%s\t%s\t%s\t\n", printable(p.Resource), kindSemaphore, semSummary(p.Semaphore, n))
		}
		if p.RWLock != nil {
			fmt.Fprintf(tw, "%s\t%s\t%s\t\n", printable(p.Resource), kindRWLock, rwSummary(p.RWLock, n))
		}
		if p.Election != nil {
			fmt.Fprintf(tw, "%s\t%s\t%s\t\n", printable(p.Resource), kindElection, leaderSummary(p.Election))
		}
	}
	tw.Flush()
}
