package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/redlock"
	"github.com/quorumlab/redlock/validity"
)

const (
	scanCount    = 1000 // SCAN's COUNT hint
	maxScanCalls = 1000 // per master: SCAN examines at most ~maxScanCalls×scanCount keys
	getBatch     = 500  // keys per pipelined GET/PTTL batch
)

type listMaster struct {
	Addr      string `json:"addr"`
	Answered  bool   `json:"answered"`
	Error     string `json:"error,omitempty"`
	Keys      int    `json:"keys"` // of the listed resources, held here
	Truncated bool   `json:"truncated,omitempty"`
}

type listLock struct {
	Resource string `json:"resource"`
	Key      string `json:"key"`
	// Held: one token is on a majority; Decided: the masters that did not
	// answer cannot change that.
	Held    bool   `json:"held"`
	Decided bool   `json:"decided"`
	On      int    `json:"on"` // masters with the most common token
	Tokens  int    `json:"tokens"`
	Holder  string `json:"holder"`
	Label   string `json:"label,omitempty"`
	MaxPTTL int64  `json:"max_pttl_ms"` // among the masters with that token; -1: no expiry
}

type listResult struct {
	Prefix   string       `json:"prefix"`
	Match    string       `json:"match"`
	Limit    int          `json:"limit"`
	Masters  []listMaster `json:"masters"`
	Majority int          `json:"majority"`
	Locks    []listLock   `json:"locks"`
	// Primitives: semaphores, read-write locks and elections (their keys
	// hang off the name's lock key; see primitives.go and election.go),
	// by name.
	Primitives []listPrimitive `json:"primitives"`
	Truncated  bool            `json:"truncated"`
}

type keyValue struct {
	key, token string
	pttl       time.Duration
}

// globEscape escapes SCAN MATCH's special characters.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// cmdList lists the locks and primitives under the key prefix whose
// names start with resPrefix (at most limit of each), as a table or JSON,
// with on how many masters each lock's token is; without a majority of
// masters answering it exits exitQuorum.
func cmdList(ctx context.Context, s *conns, resPrefix string, limit int, asJSON bool, stdout io.Writer) int {
	opts := s.r.keyOpts
	match := globEscape(opts.KeyPrefix) + "*"
	n := len(s.clients)
	l := &listRun{s: s, opts: opts, resPrefix: resPrefix, limit: limit, n: n,
		res: listResult{Prefix: opts.KeyPrefix, Match: match, Limit: limit, Majority: validity.Majority(n), Locks: []listLock{}, Primitives: []listPrimitive{}}}
	errs := l.scan(ctx)
	l.pickNames()
	l.found = make([][]keyValue, n)
	errs2 := make([]error, n)
	if len(l.names) > 0 {
		errs2 = l.readKeys(ctx, errs)
	}
	errs3 := make([]error, n)
	if len(l.primNames) > 0 {
		l.res.Primitives, errs3 = s.listPrims(ctx, l.primNames, l.primStems, l.primKinds)
	}
	answered := l.tally(errs, errs2, errs3)
	res := l.res
	if asJSON {
		writeJSON(stdout, res)
	} else {
		printList(stdout, res, n)
	}
	if answered < res.Majority {
		fmt.Fprintf(s.stderr, "redlock: only %d of %d masters answered: cannot tell which locks are held (exit %d)\n", answered, n, exitQuorum)
		return exitQuorum
	}
	return exitOK
}

// listRun is one list command's state, round by round.
type listRun struct {
	s         *conns
	opts      *redlock.Options // KeyPrefix and RedsyncKeys
	resPrefix string
	limit     int
	n         int // masters
	res       listResult

	// Round 1, per master: lock keys, primitives' keys (semaphore,
	// read-write lock and election keys), and whether -limit or the
	// SCAN bound left keys out.
	scanned   [][]string
	prims     [][]string
	truncated []bool

	// The resources listed: the first -limit of the union, by name.
	union     map[string]string // resource → key
	names     []string
	primNames []string
	primStems map[string]string
	primKinds map[string]map[string]bool

	// Round 2: the listed keys' values on each master.
	found [][]keyValue
}

// scan is round 1: each master's lock keys, by SCAN. SCAN's order differs
// from master to master, so a bounded scan finds different keys on each.
func (l *listRun) scan(ctx context.Context) []error {
	s, opts, n, limit := l.s, l.opts, l.n, l.limit
	l.scanned, l.prims, l.truncated = make([][]string, n), make([][]string, n), make([]bool, n)
	scanned, prims, truncated := l.scanned, l.prims, l.truncated
	return s.each(ctx, "list: scanning "+l.res.Match, func(ctx context.Context, i int, c *redis.Client) error {
		var cursor uint64
		for calls := 0; ; calls++ {
			if calls == maxScanCalls || len(scanned[i]) >= limit {
				truncated[i] = true
				return nil
			}
			rctx, cancel := s.req(ctx)
			// Every type: a read-write lock's readers are a sorted set.
			batch, next, err := c.Scan(rctx, cursor, l.res.Match, scanCount).Result()
			cancel()
			if err != nil {
				return err
			}
			// A matching key left out for -limit means there may be
			// more, even when every master left out the same ones.
			for _, k := range batch {
				if r, _, ok := primitiveOf(opts, k); ok {
					if strings.HasPrefix(r, l.resPrefix) {
						prims[i], truncated[i] = keep(prims[i], k, limit, truncated[i])
					}
					continue
				}
				r, ok := resourceFor(opts, k)
				if ok && k != s.r.audit && strings.HasPrefix(r, l.resPrefix) {
					scanned[i], truncated[i] = keep(scanned[i], k, limit, truncated[i])
				}
			}
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	})
}

// pickNames takes, of the keys round 1 found, the first -limit locks and
// the first -limit primitives of the union, by name.
func (l *listRun) pickNames() {
	opts := l.opts
	l.union = map[string]string{}
	for i := range l.n {
		l.res.Truncated = l.res.Truncated || l.truncated[i]
		for _, k := range l.scanned[i] {
			r, _ := resourceFor(opts, k)
			l.union[r] = k
		}
	}
	l.primStems, l.primKinds = map[string]string{}, map[string]map[string]bool{}
	for i := range l.n {
		for _, k := range l.prims[i] {
			r, kind, _ := primitiveOf(opts, k)
			if l.primKinds[r] == nil {
				l.primKinds[r] = map[string]bool{}
				l.primStems[r] = opts.KeyPrefix
				if stem, _, err := keyFor(opts, r); err == nil {
					l.primStems[r] = stem
				}
			}
			l.primKinds[r][kind] = true
		}
	}
	l.primNames = make([]string, 0, len(l.primStems))
	for r := range l.primStems {
		l.primNames = append(l.primNames, r)
	}
	sort.Strings(l.primNames)
	if len(l.primNames) > l.limit {
		l.primNames, l.res.Truncated = l.primNames[:l.limit], true
	}
	l.names = make([]string, 0, len(l.union))
	for r := range l.union {
		l.names = append(l.names, r)
	}
	sort.Strings(l.names)
	if len(l.names) > l.limit {
		l.names, l.res.Truncated = l.names[:l.limit], true
	}
}

// readKeys is round 2: into found, the listed keys on every master (but those that
// failed round 1, errs), so that each resource is counted on all of them.
func (l *listRun) readKeys(ctx context.Context, errs []error) []error {
	s, names, union := l.s, l.names, l.union
	found := l.found
	return s.each(ctx, fmt.Sprintf("list: reading %d keys", len(names)), func(ctx context.Context, i int, c *redis.Client) error {
		if errs[i] != nil {
			return errs[i] // not asked twice
		}
		for start := 0; start < len(names); start += getBatch {
			part := names[start:min(start+getBatch, len(names))]
			rctx, cancel := s.req(ctx)
			cmds, err := c.Pipelined(rctx, func(p redis.Pipeliner) error {
				for _, r := range part {
					p.Get(rctx, union[r])
					p.PTTL(rctx, union[r])
				}
				return nil
			})
			cancel()
			if err != nil && !errors.Is(err, redis.Nil) && !isReplyError(err) {
				return err
			}
			for j, r := range part {
				v, err := cmds[2*j].(*redis.StringCmd).Result()
				if err != nil {
					continue // absent here, expired meanwhile, or not a string
				}
				found[i] = append(found[i], keyValue{key: union[r], token: v, pttl: cmds[2*j+1].(*redis.DurationCmd).Val()})
			}
		}
		return nil
	})
}

// listAgg is one resource's tokens across the masters: on how many each
// is, and its longest TTL among them.
type listAgg struct {
	key    string
	count  map[string]int
	maxTTL map[string]time.Duration
}

// tally fills res's masters (a master answered when none of its rounds
// failed) and locks from round 2, and returns how many masters answered.
func (l *listRun) tally(errs, errs2, errs3 []error) (answered int) {
	byRes := map[string]*listAgg{}
	for i := range l.n {
		err := cmp.Or(errs[i], errs2[i], errs3[i])
		lm := listMaster{Addr: l.s.r.masters[i].name, Answered: err == nil, Keys: len(l.found[i]), Truncated: l.truncated[i]}
		if err != nil {
			lm.Error = describe(err, l.s.r.timeout)
		} else {
			answered++
		}
		l.res.Masters = append(l.res.Masters, lm)
		for _, kv := range l.found[i] {
			r, _ := resourceFor(l.opts, kv.key)
			a := byRes[r]
			if a == nil {
				a = &listAgg{key: kv.key, count: map[string]int{}, maxTTL: map[string]time.Duration{}}
				byRes[r] = a
			}
			a.count[kv.token]++
			if d, ok := a.maxTTL[kv.token]; !ok || kv.pttl < 0 || (d >= 0 && kv.pttl > d) {
				a.maxTTL[kv.token] = kv.pttl
			}
		}
	}
	l.addLocks(byRes, l.n-answered)
	return answered
}

// addLocks adds a listLock per resource to res, sorted by name: its most
// common token (the smallest of those tied), on how many masters, and
// whether that is a majority that the unanswered masters cannot undo.
func (l *listRun) addLocks(byRes map[string]*listAgg, unanswered int) {
	res := &l.res
	for r, a := range byRes {
		top, on := "", 0
		for t, c := range a.count {
			if c > on || (c == on && t < top) {
				top, on = t, c
			}
		}
		label, _ := splitToken(top)
		ms := int64(-1)
		if d := a.maxTTL[top]; d >= 0 {
			ms = d.Milliseconds()
		}
		held := on >= res.Majority
		res.Locks = append(res.Locks, listLock{
			Resource: r, Key: a.key, Held: held, Decided: held || on+unanswered < res.Majority,
			On: on, Tokens: len(a.count), Holder: shortToken(top), Label: printable(label), MaxPTTL: ms,
		})
	}
	sort.Slice(res.Locks, func(i, j int) bool { return res.Locks[i].Resource < res.Locks[j].Resource })
}

func printList(w io.Writer, res listResult, n int) {
	for _, m := range res.Masters {
		if !m.Answered {
			fmt.Fprintf(w, "master %s: %s\n", m.Addr, m.Error)
		}
	}
	if len(res.Locks) == 0 && len(res.Primitives) == 0 {
		fmt.Fprintf(w, "no lock keys matching %s right now\n", printable(res.Match))
	} else if len(res.Locks) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "RESOURCE\tHELD\tON\tHOLDER\tMAX PTTL\t")
		for _, l := range res.Locks {
			held := "no"
			switch {
			case l.Held:
				held = "yes"
			case !l.Decided:
				held = "?"
			}
			holder := l.Holder
			if l.Tokens > 1 {
				holder += fmt.Sprintf(" (+%d other tokens)", l.Tokens-1)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%s\t\n", printable(l.Resource), held, l.On, n, holder, fmtPTTL(l.MaxPTTL))
		}
		tw.Flush()
	}
	printListPrims(w, res.Primitives, n)
	if res.Truncated {
		fmt.Fprintf(w, "(truncated at -limit %d resources, or %d SCAN calls per master: there may be more)\n", res.Limit, maxScanCalls)
	}
}

// keep appends k to keys while they are fewer than limit; past it, k is
// left out and the listing is truncated.
func keep(keys []string, k string, limit int, truncated bool) ([]string, bool) {
	if len(keys) < limit {
		return append(keys, k), truncated
	}
	return keys, true
}
