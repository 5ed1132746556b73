package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/validity"
)

// masterState is what one master says about a lock key.
type masterState struct {
	Addr     string `json:"addr"`
	Answered bool   `json:"answered"`
	Error    string `json:"error,omitempty"`
	Present  bool   `json:"present"`
	// Holder is the token shortened (label whole, random part cut).
	Holder string `json:"holder,omitempty"`
	Label  string `json:"label,omitempty"`
	// PTTLMs is the key's remaining time to live in ms; -1: no expiry.
	PTTLMs *int64 `json:"pttl_ms,omitempty"`
	// Fence is the fence counter (Options.Fencing), when there is one.
	Fence *uint64 `json:"fence,omitempty"`

	token string    // whole; never printed
	at    time.Time // when the reply arrived
}

// holderCount is one distinct token and on how many masters it is.
type holderCount struct {
	Holder  string `json:"holder"`
	Label   string `json:"label,omitempty"`
	Masters int    `json:"masters"`

	token string
}

// quorumView is the lock's state as a Locker would see it.
type quorumView struct {
	Masters  int `json:"masters"`
	Majority int `json:"majority"`
	Answered int `json:"answered"`
	// Decided: enough masters answered that the unanswered ones cannot
	// change Held.
	Decided bool `json:"decided"`
	// Held: one token is on a majority of the masters.
	Held    bool          `json:"held"`
	Holder  string        `json:"holder,omitempty"`
	Label   string        `json:"label,omitempty"`
	On      int           `json:"on"`
	Holders []holderCount `json:"holders"`
	// ValidUntil is the latest time the holder's lock can still be valid:
	// the reply time plus the largest PTTL among the masters holding its
	// token. An upper bound: the holder's own deadline is earlier by the
	// drift allowance and its safety margin.
	ValidUntil *time.Time `json:"valid_until,omitempty"`
	NoExpiry   bool       `json:"no_expiry,omitempty"`

	top string // the top token, whole
}

type inspectResult struct {
	Resource string        `json:"resource"`
	Key      string        `json:"key"`
	FenceKey string        `json:"fence_key"`
	Time     time.Time     `json:"time"`
	Nodes    []masterState `json:"nodes"`
	Quorum   quorumView    `json:"quorum"`
	// Primitives: the semaphore and read-write lock of that name, when a
	// master has any of their keys.
	Primitives *primView `json:"primitives,omitempty"`
	// Election: the election of that name, when a master has its lock
	// key or its record.
	Election *electionView `json:"election,omitempty"`
}

// readState asks every master for the lock key, its PTTL and the fence
// counter, atomically per master (MULTI/EXEC).
func (s *conns) readState(ctx context.Context, what, key, fenceKey string) []masterState {
	states := make([]masterState, len(s.clients))
	errs := s.each(ctx, what, func(ctx context.Context, i int, c *redis.Client) error {
		ctx, cancel := s.req(ctx)
		defer cancel()
		var get *redis.StringCmd
		var pttl *redis.DurationCmd
		var fence *redis.StringCmd
		_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			get = p.Get(ctx, key)
			pttl = p.PTTL(ctx, key)
			fence = p.HGet(ctx, fenceKey, "fence")
			return nil
		})
		st := &states[i]
		st.at = time.Now()
		if err != nil && !errors.Is(err, redis.Nil) && !isReplyError(err) {
			return err // no answer; a reply error is per command, below
		}
		v, gerr := get.Result()
		if gerr != nil && !errors.Is(gerr, redis.Nil) {
			// The key's state on this master is unknown (a refused
			// command, say): that is no answer, never "not held".
			return fmt.Errorf("reading %s: %w", key, gerr)
		}
		st.Answered = true
		if gerr == nil {
			st.Present, st.token = true, v
			st.Label, _ = splitToken(v)
			st.Label = printable(st.Label)
			st.Holder = shortToken(v)
		}
		if st.Present {
			ms := int64(-1)
			if d := pttl.Val(); d >= 0 {
				ms = d.Milliseconds()
			}
			st.PTTLMs = &ms
		}
		if v, err := fence.Result(); err == nil {
			if f, err := strconv.ParseUint(v, 10, 64); err == nil {
				st.Fence = &f
			} else {
				st.Error = fmt.Sprintf("fence counter %q is not a decimal number", printable(v))
			}
		} else if !errors.Is(err, redis.Nil) {
			st.Error = "reading " + fenceKey + ": " + err.Error()
		}
		return nil
	})
	for i := range states {
		states[i].Addr = s.r.masters[i].name
		if errs[i] != nil {
			states[i].Error = describe(errs[i], s.r.timeout)
		}
	}
	return states
}

// view counts the masters' tokens into the quorum view.
func view(states []masterState) quorumView {
	n := len(states)
	v := quorumView{Masters: n, Majority: validity.Majority(n), Holders: []holderCount{}}
	idx := map[string]int{}
	for _, st := range states {
		if !st.Answered {
			continue
		}
		v.Answered++
		if !st.Present {
			continue
		}
		j, ok := idx[st.token]
		if !ok {
			j = len(v.Holders)
			idx[st.token] = j
			v.Holders = append(v.Holders, holderCount{Holder: st.Holder, Label: st.Label, token: st.token})
		}
		v.Holders[j].Masters++
	}
	sort.SliceStable(v.Holders, func(a, b int) bool { return v.Holders[a].Masters > v.Holders[b].Masters })
	top := 0
	if len(v.Holders) > 0 {
		top = v.Holders[0].Masters
	}
	unanswered := n - v.Answered
	v.Held = top >= v.Majority
	v.Decided = v.Held || top+unanswered < v.Majority
	if v.Held {
		h := v.Holders[0]
		v.Holder, v.Label, v.On, v.top = h.Holder, h.Label, h.Masters, h.token
		var latest time.Time
		for _, st := range states {
			if st.Answered && st.Present && st.token == h.token {
				if *st.PTTLMs < 0 {
					v.NoExpiry = true
					continue
				}
				if t := st.at.Add(time.Duration(*st.PTTLMs) * time.Millisecond); t.After(latest) {
					latest = t
				}
			}
		}
		if !v.NoExpiry {
			latest = latest.UTC()
			v.ValidUntil = &latest
		}
	}
	return v
}

func cmdInspect(ctx context.Context, s *conns, resource string, asJSON bool, stdout io.Writer) int {
	key, fenceKey, err := keyFor(s.r.keyOpts, resource)
	if err != nil {
		fmt.Fprintf(s.stderr, "redlock: resource %q: %v\n", printable(resource), err)
		return exitUsage
	}
	now := time.Now()
	states := s.readState(ctx, "inspect", key, fenceKey)
	res := inspectResult{Resource: resource, Key: key, FenceKey: fenceKey, Time: now.UTC(), Nodes: states, Quorum: view(states)}
	res.Primitives = newPrimView(s.readPrim(ctx, "inspect: semaphore and read-write keys", key))
	if !s.r.keyOpts.RedsyncKeys {
		res.Election = newElectionView(key, s.readElection(ctx, "inspect: election keys", key))
	}
	if asJSON {
		writeJSON(stdout, res)
	} else {
		printInspect(stdout, res)
	}
	if !res.Quorum.Decided {
		fmt.Fprintf(s.stderr, "redlock: only %d of %d masters answered: cannot tell whether %q is held (exit %d)\n",
			res.Quorum.Answered, res.Quorum.Masters, printable(resource), exitQuorum)
		return exitQuorum
	}
	if e := res.Election; e != nil && !e.Decided {
		fmt.Fprintf(s.stderr, "redlock: only %d of %d masters answered: cannot tell who leads the election %q (exit %d)\n",
			e.Answered, e.Masters, printable(resource), exitQuorum)
		return exitQuorum
	}
	return exitOK
}

func printInspect(w io.Writer, res inspectResult) {
	fmt.Fprintf(w, "resource %s   key %s   fence counter %s\n\n", printable(res.Resource), printable(res.Key), printable(res.FenceKey))
	if q := res.Quorum; (res.Primitives != nil || res.Election != nil) && len(q.Holders) == 0 {
		fmt.Fprintf(w, "mutex: the key is on none of the %d masters that answered (of %d)\n", q.Answered, q.Masters)
		if res.Primitives != nil {
			printPrim(w, res.Primitives)
		}
		if res.Election != nil {
			printElection(w, res.Election)
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MASTER\tKEY\tHOLDER\tPTTL\tFENCE\t")
	for _, st := range res.Nodes {
		if !st.Answered {
			fmt.Fprintf(tw, "%s\t?\t-\t-\t-\t%s\n", st.Addr, st.Error)
			continue
		}
		key, holder, pttl, fence := "no", "-", "-", "-"
		if st.Present {
			key, holder = "yes", st.Holder
			pttl = fmtPTTL(*st.PTTLMs)
		}
		if st.Fence != nil {
			fence = strconv.FormatUint(*st.Fence, 10)
		}
		extra := ""
		if st.Error != "" {
			extra = "error: " + st.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", st.Addr, key, holder, pttl, fence, extra)
	}
	tw.Flush()
	q := res.Quorum
	fmt.Fprintln(w)
	switch {
	case q.Held:
		fmt.Fprintf(w, "quorum: HELD by %s on %d of %d masters (majority %d)\n", q.Holder, q.On, q.Masters, q.Majority)
		if q.NoExpiry {
			fmt.Fprintf(w, "        the key has NO expiry on some master: it was not set by a Locker, or was changed by hand\n")
		} else {
			fmt.Fprintf(w, "        valid until at most %s (in %v): reply time + the largest PTTL among its masters;\n"+
				"        the holder's own deadline is earlier by its drift allowance and safety margin\n",
				q.ValidUntil.Format(time.RFC3339Nano), time.Until(*q.ValidUntil).Round(time.Millisecond))
		}
	case q.Decided:
		fmt.Fprintf(w, "quorum: NOT HELD: no token on a majority (%d) of the %d masters (%d answered)\n", q.Majority, q.Masters, q.Answered)
	default:
		fmt.Fprintf(w, "quorum: UNKNOWN: only %d of %d masters answered; the others could tip it either way\n", q.Answered, q.Masters)
	}
	if len(q.Holders) > 1 || (!q.Held && len(q.Holders) == 1) {
		fmt.Fprintf(w, "        tokens seen:")
		for _, h := range q.Holders {
			fmt.Fprintf(w, " %s on %d;", h.Holder, h.Masters)
		}
		fmt.Fprintln(w)
	}
	if res.Primitives != nil {
		printPrim(w, res.Primitives)
	}
	if res.Election != nil {
		printElection(w, res.Election)
	}
}

func fmtPTTL(ms int64) string {
	if ms < 0 {
		return "no expiry"
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

// isReplyError reports whether err is an error reply from the server (the
// master answered), not a failure to reach it.
func isReplyError(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}
