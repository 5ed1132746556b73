// Package driver is the interface between a redlock.Locker and a Redis
// client: what a client must do to serve as one of the Locker's masters
// (Master, and Subscriber for wake on release), and GoRedis, which makes
// a go-redis client one.
//
// A Locker over go-redis clients (redlock.New) or URLs
// (redlock.NewFromURLs) needs nothing from this package. It is for
// redlock.NewMasters: the modules under adapters/ (rueidis, valkey-go,
// redigo) implement Master for their client, and a Locker may mix clients
// of different kinds, one per master.
//
// The Locker only ever sends a Master generic command lines (SET,
// EVALSHA, SCRIPT LOAD, ZADD, ...): a Master need not know what they are
// for, nor handle NOSCRIPT (the Locker loads its scripts again and
// resends).
package driver

import (
	"context"
	"time"
)

// Master is one Redis master.
//
// A Master that is not a go-redis one (GoRedis) gets the client path: the
// Locker calls Do with one batch at a time per master, in order, so a
// release is never sent before the SET it cleans up. A master that
// stalls holds its batch until Do returns (the Locker bounds it with the
// context, see ClientTimeout); rounds do not wait for it longer than
// redlock's Options.MasterTimeout, and nothing new is sent to it
// meanwhile (docs/design.md §10).
type Master interface {
	// Do sends cmds, in order, as one pipeline, and returns one reply per
	// command, in order. An error reply from the server is a Reply of
	// kind ReplyError, not an error; an error means the outcome of the
	// batch is unknown (a network error, ctx ended).
	Do(ctx context.Context, cmds [][]string) ([]Reply, error)
	// Addr names the master in the Locker's stats and errors, and two
	// masters with the same non-empty Addr are refused as one.
	Addr() string
}

// ReplyKind is the RESP type of a Reply.
type ReplyKind uint8

// The kinds of reply a Master returns. RESP3 types map to the nearest
// RESP2 one: a verbatim string is ReplyBulk, a map or set ReplyOther.
const (
	ReplyNil    ReplyKind = iota // a null (nil bulk, nil array, RESP3 null)
	ReplyStatus                  // a simple string, such as OK
	ReplyError                   // an error reply; Text is as the server sent it ("NOSCRIPT ...")
	ReplyInt                     // an integer, in Int
	ReplyBulk                    // a bulk or verbatim string, in Text (a client that cannot tell may give a simple string as one)
	ReplyOther                   // anything else (arrays, maps, ...)
)

// Reply is one reply of a Master's Do.
type Reply struct {
	Kind ReplyKind
	Int  int64
	Text string
}

// ClientTimeout bounds one Do on the client path (or the Locker's
// MasterTimeout, when that is longer): past it the batch's outcome is
// unknown, and the Locker reconnects (calls Do again with its scripts)
// before it sends anything else to that master. It plays the role of
// go-redis's default ReadTimeout on the go-redis plain path.
const ClientTimeout = 3 * time.Second

// Subscriber is a Master on the client path that can also carry the
// Locker's wake-on-release subscription (docs/design.md §14): waiters are
// then woken by the holder's release, as on the fast path. A Master
// without it has no subscription, and its waiters wake by their backoff.
type Subscriber interface {
	Master
	// Subscribe opens a connection for pub/sub. deliver is called for
	// each message, from one goroutine at a time, until the Subscription
	// is closed.
	Subscribe(ctx context.Context, deliver func(channel, payload string)) (Subscription, error)
}

// Subscription is one pub/sub connection of a Subscriber. An error from
// Subscribe or Unsubscribe makes the Locker close it and open another,
// subscribed to everything again, on its next change.
type Subscription interface {
	Subscribe(ctx context.Context, channels ...string) error
	Unsubscribe(ctx context.Context, channels ...string) error
	// Close ends the connection; deliver is not called after it returns.
	Close() error
}
