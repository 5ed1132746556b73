package redlock

import (
	"crypto/sha1"
	"encoding/hex"
	"slices"
	"strconv"
	"time"
)

// The grant state of the hand-off (docs/design.md §14.3): what a waiter
// that a release may hand the key to knows of the masters' grants, under
// the waker's mutex.

// grantState is what a waiter that a release may hand the key to knows
// of the grants (docs/design.md §14.3).
type grantState struct {
	// token is the current grant token (a give-back draws a new one),
	// digest its hex SHA-1, as release.lua names a grant.
	token  string
	digest string
	ttl    uint64 // ms
	// since is when the first join whose queue member carries token was
	// sent (zero before one is): a master hands the key to token only
	// after such a join reached it, so the key lives there at least TTL
	// from since.
	since time.Time
	off   bool   // no grant counts any more (the waiter gave back, with no new token)
	by    []bool // by master: its grant of token is counted
}

// member is the queue member of the waiter id carrying g's token.
func (g *grantState) member(id string) string {
	return id + " " + strconv.FormatUint(g.ttl, 10) + " " + g.token
}

// got counts master i's grant of the current token, and returns how many
// masters it now counts (0 when it does not count: counting is off, or the
// master's grant is counted already).
func (g *grantState) got(i int) int {
	if g.off || g.since.IsZero() || g.by[i] {
		return 0
	}
	g.by[i] = true
	return g.count()
}

func (g *grantState) count() int {
	n := 0
	for _, b := range g.by {
		if b {
			n++
		}
	}
	return n
}

// grantedSince is, when a majority of masters have handed wt the key, the
// send of the first join that carried its token: each of them set the key
// after such a join reached it, so the key lives there at least TTL from
// that instant.
func (w *waker) grantedSince(wt *waiter) (time.Time, []bool, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	g := wt.grant
	if g == nil || g.count() < w.need {
		return time.Time{}, nil, false
	}
	return g.since, slices.Clone(g.by), true
}

// grants is how many masters have handed wt the key (counted).
func (w *waker) grants(wt *waiter) int {
	if wt == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if wt.grant == nil {
		return 0
	}
	return wt.grant.count()
}

// grantSoFar is wt's grant token, its TTL in ms and which masters have
// handed it the key, while some have and no give-back has ended the
// token's count (by is nil otherwise).
func (w *waker) grantSoFar(wt *waiter) (token string, ttl uint64, by []bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	g := wt.grant
	if g == nil || g.off || g.since.IsZero() || g.count() == 0 {
		return "", 0, nil
	}
	return g.token, g.ttl, slices.Clone(g.by)
}

// countGrant counts master i, where a poll read token, wt's grant token, in the
// key, as a grant: the master set the key after a join carrying token
// reached it. A poll of a token given back since does not count.
func (w *waker) countGrant(wt *waiter, i int, token string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if g := wt.grant; g != nil && g.token == token {
		g.got(i)
	}
}

// resetGrants stops counting the grants of wt's token so far, and returns
// its queue member with that token. With next (not ""), wt's later joins
// carry next instead: a give-back of the old token, however late it runs
// on a master (a release parked while the master was not answering, or
// sent again after NOSCRIPT, runs after commands sent later), cannot
// delete a key handed to the new one, and a grant of the old token is
// never counted (its digest is not the new token's). Without next, no
// grant counts any more: wt leaves, or acquires by its rounds.
func (w *waker) resetGrants(wt *waiter, next string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	g := wt.grant
	old := g.member(wt.id)
	clear(g.by)
	if next == "" {
		g.off = true
		return old
	}
	g.token, g.digest, g.since = next, tokenDigest(next), time.Time{}
	return old
}

// clearGrant makes wt a waiter that releases name, no longer one they may
// hand the key to: its later joins carry its bare id, and no grant
// counts (wt gave its token back first).
func (w *waker) clearGrant(wt *waiter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wt.grant = nil
}

// tokenDigest is the hex SHA-1 of token, as release.lua names a grant.
func tokenDigest(token string) string {
	sum := sha1.Sum([]byte(token))
	return hex.EncodeToString(sum[:])
}

// hearsAll reports whether this Locker has a subscription on every
// master: only then can it be told of every grant.
func (w *waker) hearsAll() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.subs) == len(w.masters)
}

// setGrant makes wt a waiter a release may hand the key to.
func (w *waker) setGrant(wt *waiter, g *grantState) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wt.grant = g
}

// needsNewToken reports whether wt's grant token was first joined more
// than an eighth of its TTL before now: a join then gives it back and
// carries a new one (join).
func (w *waker) needsNewToken(wt *waiter, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	g := wt.grant
	return g != nil && !g.off && !g.since.IsZero() && now.Sub(g.since) > time.Duration(g.ttl)*time.Millisecond/8
}

// token is wt's grant token.
func (w *waker) token(wt *waiter) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return wt.grant.token
}

// member is wt's member in its key's queue: its id, or for a waiter a
// release may hand the key to, "<id> <TTL ms> <grant token>" (§14.3).
// With join (the member is about to be sent in a join, at now), it dates
// the grant token's first join.
func (w *waker) member(wt *waiter, join bool, now time.Time) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	g := wt.grant
	if g == nil {
		return wt.id
	}
	if join && g.since.IsZero() {
		g.since = now
	}
	return g.member(wt.id)
}
