// Package quorum fans one call out to N nodes in parallel and decides as
// soon as the outcome is known: when the needed number of nodes said yes, or
// when so many said no (or did not answer) that the rest cannot make it up.
//
// Each call gets its own deadline, and Run stops waiting for a node at that
// deadline whether or not the call honours its context. This matters for
// Redis: go-redis v9 ignores context deadlines for socket I/O unless
// ContextTimeoutEnabled is set, so a call to a SIGSTOPped master otherwise
// blocks for the client's ReadTimeout (seconds).
//
// A call that overran its deadline keeps running (Go cannot stop it) but it
// stays owned: it is counted, it is joined by Group.Close, and its node is
// marked unavailable. Until that node answers again, new calls to it fail at
// once with Unavailable instead of piling up goroutines and pooled
// connections behind the stalled ones; one probe call at a time finds out
// when it is back. How long an overrunning call lives is bounded by the
// callee (for go-redis, its ReadTimeout and WriteTimeout; a client with no
// timeouts against a frozen server can hold Close forever).
//
// The package knows nothing about Redis: a call is any
// func(ctx, node) (T, error), and a call refuses by returning an error that
// wraps ErrRefused.
package quorum
