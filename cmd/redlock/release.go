package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// compareAndDelete is the library's own release (scripts/release.lua):
// delete the key only while it holds the token, and announce it to the
// Lockers waiting for it. 1 deleted, 0 absent, -1 another token.

// auditMaxLen bounds the audit stream (XADD MAXLEN ~).
const auditMaxLen = 10000

type releaseFlags struct {
	force  bool
	reason string
	token  string
	who    string
}

// who is the operator behind a forced release.
type who struct {
	Name   string `json:"name"` // -who, else the OS user
	OSUser string `json:"os_user"`
	Host   string `json:"host"`
	PID    int    `json:"pid"`
}

// auditMaster is what the release did on one master.
type auditMaster struct {
	Addr    string `json:"addr"`
	Deleted bool   `json:"deleted"`
	// Found is what the compare-and-delete found: "token" (deleted),
	// "absent", "other" (another token, left alone), or "" on error.
	Found string `json:"found,omitempty"`
	Error string `json:"error,omitempty"`
}

// auditRecord is written to stderr and to the audit stream on the masters.
type auditRecord struct {
	Event    string        `json:"event"` // "force-release"
	Time     string        `json:"time"`  // RFC 3339, UTC
	Who      who           `json:"who"`
	Reason   string        `json:"reason"`
	Resource string        `json:"resource"`
	Key      string        `json:"key"`
	Token    string        `json:"token"` // shortened
	Chosen   string        `json:"chosen"`
	Masters  []auditMaster `json:"masters"`
}

type releaseResult struct {
	auditRecord
	Released     bool     `json:"released"`
	Deleted      int      `json:"deleted"`
	MayStillHold int      `json:"may_still_hold"`
	AuditStream  string   `json:"audit_stream"`
	AuditWritten []string `json:"audit_written"`
	AuditErrors  []string `json:"audit_errors,omitempty"`
}

func whoAmI(override string) who {
	w := who{PID: os.Getpid()}
	if u, err := user.Current(); err == nil {
		w.OSUser = u.Username
	} else {
		w.OSUser = os.Getenv("USER")
	}
	w.Host, _ = os.Hostname()
	w.Name = w.OSUser
	if override != "" {
		w.Name = override
	}
	return w
}

// checkRelease refuses a release or a reset (cmd) called without -force
// or a reason, before any master is contacted.
func checkRelease(cmd string, f releaseFlags) error {
	if !f.force {
		return usagef("%s deletes other processes' locks: it needs -force, and -reason TEXT", cmd)
	}
	if strings.TrimSpace(f.reason) == "" {
		return usagef("%s -force needs -reason TEXT (it goes into the audit record)", cmd)
	}
	return nil
}

func cmdRelease(ctx context.Context, s *conns, resource string, f releaseFlags, asJSON bool, stdout io.Writer) int {
	key, fenceKey, err := keyFor(s.r.keyOpts, resource)
	if err != nil {
		fmt.Fprintf(s.stderr, "redlock: resource %q: %v\n", printable(resource), err)
		return exitUsage
	}
	states := s.readState(ctx, "release: reading the holder", key, fenceKey)
	q := view(states)
	n := len(states)
	refuse := func(code int, format string, a ...any) int {
		fmt.Fprintf(s.stderr, "redlock: release declined: "+format+" (exit %d)\n", append(a, code)...)
		return code
	}
	if q.Answered < q.Majority {
		return refuse(exitQuorum, "only %d of %d masters answered; a forced release needs a majority (%d) to see who holds the lock", q.Answered, n, q.Majority)
	}
	var target, chosen string
	switch {
	case f.token != "":
		var matches []holderCount
		for _, h := range q.Holders {
			if matchToken(f.token, h.token) {
				matches = append(matches, h)
			}
		}
		switch len(matches) {
		case 0:
			if code, found := s.releasePrimitive(ctx, resource, key, q.Majority, f, asJSON, stdout, refuse); found {
				return code
			}
			if code, found := s.releaseElection(ctx, resource, key, q.Majority, f, asJSON, stdout, refuse); found {
				return code
			}
			return refuse(exitRefused, "the token given with -token is on none of the %d masters that answered", q.Answered)
		case 1:
			target, chosen = matches[0].token, "-token"
		default:
			return refuse(exitRefused, "-token matches %d different tokens; give more of it", len(matches))
		}
	case !q.Decided:
		return refuse(exitQuorum, "only %d of %d masters answered and the answers do not settle who holds the lock; retry when more answer, or name the token with -token", q.Answered, n)
	case q.Held:
		target, chosen = q.top, "majority"
	case len(q.Holders) == 0:
		if code, found := s.releaseElection(ctx, resource, key, q.Majority, f, asJSON, stdout, refuse); found {
			return code
		}
		if v := newPrimView(s.readPrim(ctx, "release: semaphore and read-write keys", key)); v != nil {
			return refuse(exitRefused, "%q names a semaphore or read-write lock, not a mutex: name the permit, reader or writer "+
				"to release with -token (inspect %s shows them), or reset it (reset -force)", printable(resource), printable(resource))
		}
		return refuse(exitRefused, "%q is not held on any master that answered: nothing to release", printable(resource))
	default:
		var seen []string
		for _, h := range q.Holders {
			seen = append(seen, fmt.Sprintf("%s on %d", h.Holder, h.Masters))
		}
		return refuse(exitRefused, "no token is on a majority (%d of %d): the masters disagree (%s). Nothing was deleted. "+
			"If you are sure, name one with -token (as shown, e.g. -token %s)", q.Majority, n, strings.Join(seen, ", "), q.Holders[0].Holder)
	}

	return s.forceDelete(ctx, forced{
		event: "force-release", resource: resource, key: key, target: target, chosen: chosen, majority: q.Majority,
		note: fmt.Sprintf("fence counter %s left as it is (fences must stay monotonic)", printable(fenceKey)),
		del: func(ctx context.Context, c *redis.Client) (int64, error) {
			return compareAndDelete.Run(ctx, c, []string{key}, target).Int64()
		},
	}, f, asJSON, stdout)
}

// forced is one forced deletion on every master: what the audit record
// names, and del, which runs on one master and returns 1 deleted, 0
// absent, or -1 another token (left alone).
type forced struct {
	event, resource, key, target, chosen, note string
	majority                                   int
	del                                        func(ctx context.Context, c *redis.Client) (int64, error)
}

// forceDelete runs d.del on every master, writes the audit record to
// stderr and to the audit stream, and reports; it fails (exitRefused)
// when so many masters did not answer that the target may still be on a
// majority.
func (s *conns) forceDelete(ctx context.Context, d forced, f releaseFlags, asJSON bool, stdout io.Writer) int {
	res := s.deleteOnEach(ctx, d, f)
	line, err := json.Marshal(res.auditRecord)
	if err != nil {
		fmt.Fprintf(s.stderr, "redlock: encoding the audit record: %v\n", err)
		return exitRefused
	}
	s.mu.Lock()
	fmt.Fprintf(s.stderr, "%s\n", line)
	s.mu.Unlock()
	s.writeAudit(ctx, d, line, &res)
	if asJSON {
		writeJSON(stdout, res)
	} else {
		printForced(stdout, d, res, len(s.clients), s.r.audit)
	}
	if !res.Released {
		fmt.Fprintf(s.stderr, "redlock: %d masters did not answer the delete: it may still be on a majority (exit %d)\n", res.MayStillHold, exitRefused)
		return exitRefused
	}
	return exitOK
}

// deleteOnEach runs d.del on every master and returns the result with its
// audit record: what each master held and whether it deleted it.
func (s *conns) deleteOnEach(ctx context.Context, d forced, f releaseFlags) releaseResult {
	rec := auditRecord{
		Event: d.event, Who: whoAmI(f.who), Reason: f.reason,
		Resource: d.resource, Key: d.key, Token: shortToken(d.target), Chosen: d.chosen,
		Masters: make([]auditMaster, len(s.clients)),
	}
	what := d.event + ": compare-and-delete of " + shortToken(d.target)
	if d.target == "" {
		what = d.event + ": deleting the keys"
	}
	errs := s.each(ctx, what, func(ctx context.Context, i int, c *redis.Client) error {
		ctx, cancel := s.req(ctx)
		defer cancel()
		r, err := d.del(ctx, c)
		if err != nil {
			return err
		}
		m := &rec.Masters[i]
		switch {
		case r > 0:
			m.Deleted, m.Found = true, "token"
			if d.target == "" {
				m.Found = fmt.Sprintf("%d keys", r)
			}
		case r == 0:
			m.Found = "absent"
		default:
			m.Found = "other"
		}
		return nil
	})
	rec.Time = time.Now().UTC().Format(time.RFC3339Nano)
	res := releaseResult{AuditStream: s.r.audit, AuditWritten: []string{}}
	for i := range rec.Masters {
		rec.Masters[i].Addr = s.r.masters[i].name
		if errs[i] != nil {
			rec.Masters[i].Error = describe(errs[i], s.r.timeout)
			res.MayStillHold++
		}
		if rec.Masters[i].Deleted {
			res.Deleted++
		}
	}
	res.auditRecord = rec
	// Released: the token can now be on fewer masters than a majority.
	res.Released = res.MayStillHold < d.majority
	return res
}

// writeAudit adds the audit record (line, its JSON) to the audit stream
// on every master, noting in res where it was written and where not.
func (s *conns) writeAudit(ctx context.Context, d forced, line []byte, res *releaseResult) {
	rec := res.auditRecord
	aerrs := s.each(ctx, d.event+": writing the audit record to "+s.r.audit, func(ctx context.Context, i int, c *redis.Client) error {
		ctx, cancel := s.req(ctx)
		defer cancel()
		return c.XAdd(ctx, &redis.XAddArgs{
			Stream: s.r.audit, MaxLen: auditMaxLen, Approx: true,
			Values: []any{"event", rec.Event, "resource", d.resource, "reason", rec.Reason, "who", rec.Who.Name, "record", string(line)},
		}).Err()
	})
	for i, err := range aerrs {
		if err != nil {
			res.AuditErrors = append(res.AuditErrors, s.r.masters[i].name+": "+describe(err, s.r.timeout))
		} else {
			res.AuditWritten = append(res.AuditWritten, s.r.masters[i].name)
		}
	}
	if len(res.AuditWritten) == 0 {
		fmt.Fprintf(s.stderr, "redlock: WARNING: the audit record reached no master; keep the JSON line above\n")
	}
}

// printForced writes a forced delete's result for people: on how many of
// the n masters it deleted, what each held, and where the audit record
// (stream audit) went.
func printForced(w io.Writer, d forced, res releaseResult, n int, audit string) {
	if d.target == "" {
		fmt.Fprintf(w, "%s: reset: deleted its keys on %d of %d masters\n", printable(d.resource), res.Deleted, n)
	} else {
		fmt.Fprintf(w, "%s: deleted %s (%s) on %d of %d masters\n", printable(d.resource), res.Token, printable(d.key), res.Deleted, n)
	}
	for _, m := range res.Masters {
		what := m.Found
		switch {
		case m.Error != "":
			what = m.Error
		case m.Deleted && d.target != "":
			what = "deleted"
		case m.Deleted:
			what = "deleted " + m.Found
		case m.Found == "other":
			what = "holds another token: left alone"
		}
		fmt.Fprintf(w, "  %s: %s\n", m.Addr, what)
	}
	if d.note != "" {
		fmt.Fprintln(w, d.note)
	}
	fmt.Fprintf(w, "audit record in %s on %d of %d masters\n", audit, len(res.AuditWritten), n)
}

// place is where a semaphore's or read-write lock's holder is: a key that
// holds its token (a slot, the writer, the intent), or the readers' set.
type place struct {
	key    string
	reader bool
}

// releasePrimitive releases, on every master, the holder of a semaphore
// permit, a read lock, a write lock or a writer's intent under stem key
// whose token f.token names: a compare-and-delete of its key (the
// library's release, which also announces it to waiters), or for a
// reader its removal from the readers' set. found is false when f.token
// names none of them.
func (s *conns) releasePrimitive(ctx context.Context, resource, stem string, majority int, f releaseFlags, asJSON bool, stdout io.Writer,
	refuse func(code int, format string, a ...any) int) (code int, found bool) {
	nodes := s.readPrim(ctx, "release: semaphore and read-write keys", stem)
	seen := map[string]map[place]int{} // token → where → on how many masters
	note := func(tok string, p place) {
		if !matchToken(f.token, tok) {
			return
		}
		if seen[tok] == nil {
			seen[tok] = map[place]int{}
		}
		seen[tok][p]++
	}
	for _, pm := range nodes {
		for _, sh := range pm.Slots {
			note(sh.token, place{key: stem + ":s:" + strconv.Itoa(sh.Slot)})
		}
		if pm.Writer != nil {
			note(pm.Writer.token, place{key: stem + ":w"})
		}
		if pm.Intent != nil {
			note(pm.Intent.token, place{key: stem + ":wi"})
		}
		for _, tok := range pm.readerTokens {
			note(tok, place{key: stem + ":r", reader: true})
		}
	}
	switch len(seen) {
	case 0:
		return 0, false
	case 1:
	default:
		return refuse(exitRefused, "-token matches %d different tokens; give more of it", len(seen)), true
	}
	var target string
	var where place
	for tok, ps := range seen {
		target = tok
		best := -1
		for p, n := range ps {
			if n > best || (n == best && p.key < where.key) {
				where, best = p, n
			}
		}
	}
	d := forced{event: "force-release", resource: resource, key: where.key, target: target, chosen: "-token", majority: majority}
	if where.reader {
		d.del = func(ctx context.Context, c *redis.Client) (int64, error) {
			return c.ZRem(ctx, where.key, target).Result()
		}
	} else {
		d.del = func(ctx context.Context, c *redis.Client) (int64, error) {
			return compareAndDelete.Run(ctx, c, []string{where.key}, target).Int64()
		}
	}
	if strings.HasSuffix(where.key, ":w") {
		d.note = fmt.Sprintf("fence counter %s left as it is (fences must stay monotonic)", printable(where.key+":fence"))
	}
	return s.forceDelete(ctx, d, f, asJSON, stdout), true
}
