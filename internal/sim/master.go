package sim

import (
	"crypto/sha1"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Kind is the RESP type of a Reply. The values are those of
// driver.ReplyKind (Nil, Status, Error, Int, Bulk, then Array for
// driver.ReplyOther), so that converting is a cast.
type Kind uint8

// The kinds of reply.
const (
	Nil    Kind = iota // a null bulk or array
	Status             // a simple string, in Text
	Error              // an error reply, in Text ("NOSCRIPT ...")
	Int                // an integer, in Int
	Bulk               // a bulk string, in Text
	Array              // an array, in Array
)

// Reply is one reply of a Master.
type Reply struct {
	Kind  Kind
	Int   int64
	Text  string
	Array []Reply
}

// String renders r the way redis-cli would, on one line, for test output.
func (r Reply) String() string {
	switch r.Kind {
	case Nil:
		return "(nil)"
	case Status:
		return "+" + r.Text
	case Error:
		return "-" + r.Text
	case Int:
		return "(integer) " + strconv.FormatInt(r.Int, 10)
	case Bulk:
		return strconv.Quote(r.Text)
	}
	parts := make([]string, len(r.Array))
	for i, e := range r.Array {
		parts[i] = e.String()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// Conn names one client connection of a Master, for its subscriptions.
type Conn int64

// Master is one simulated Redis master: a keyspace, a script cache, the
// pub/sub subscriptions and an outbox of published messages. It executes
// each command synchronously in Do, on the time it is given; it starts no
// goroutines and is not safe for concurrent use.
type Master struct {
	name     string
	scripts  *Scripts
	restarts int
	runID    string

	keys   map[string]entry
	loaded map[string]model // SHA1 -> its model (nil: loaded, but no model)
	spare  *zset            // a sorted set emptied and deleted, for the next one made

	subs map[string][]Conn // channel -> subscribed connections, ascending

	out   []Message
	outTo []Conn // every message's recipients, back to back
}

// Message is one PUBLISH, as the master sent it.
type Message struct {
	Channel, Payload string
	to               [2]int // outTo[to[0]:to[1]]
}

// New returns an empty master named name (the name seeds its run_id, so
// two masters differ and a restart changes it, deterministically). Its
// EVALSHA runs the models of scripts; nil gives a master that knows no
// script (EVALSHA of a loaded script then fails with an ERR reply).
func New(name string, scripts *Scripts) *Master {
	m := &Master{name: name, scripts: scripts, keys: map[string]entry{}, loaded: map[string]model{},
		subs: map[string][]Conn{}}
	m.setRunID()
	return m
}

func (m *Master) setRunID() {
	sum := sha1.Sum([]byte(m.name + "/" + strconv.Itoa(m.restarts)))
	m.runID = hex.EncodeToString(sum[:])
}

// Restart is a restart of the server: every connection closes (so every
// subscription ends, and messages not yet drained are lost), the script
// cache is empty (EVALSHA answers NOSCRIPT until SCRIPT LOAD), the run_id
// changes, and with keepData false the keyspace is empty too. A key kept
// keeps its absolute expiry, as one loaded from an RDB or AOF file does.
func (m *Master) Restart(keepData bool) {
	m.restarts++
	m.setRunID()
	clear(m.loaded)
	clear(m.subs)
	m.out, m.outTo = m.out[:0], m.outTo[:0]
	if !keepData {
		clear(m.keys)
	}
}

// RunID is the run_id INFO reports.
func (m *Master) RunID() string { return m.runID }

// Do executes one command, args[0] its name (in any case), at now: the
// master's own clock, as a duration since the Unix epoch (TIME answers it;
// a key set with PX d at now expires once the clock passes now + d, in
// whole milliseconds, as Redis counts them).
func (m *Master) Do(now time.Duration, args []string) Reply {
	return m.exec(toMs(now), int64(now/time.Microsecond), args)
}

// toMs is now in whole milliseconds, rounded down as Redis's mstime is.
func toMs(now time.Duration) int64 {
	ms := int64(now / time.Millisecond)
	if now < 0 && now%time.Millisecond != 0 {
		ms--
	}
	return ms
}

// Subscribe subscribes conn to channels (SUBSCRIBE); subscribing again is
// a no-op.
func (m *Master) Subscribe(conn Conn, channels ...string) {
	for _, ch := range channels {
		list := m.subs[ch]
		i, found := slices.BinarySearch(list, conn)
		if !found {
			m.subs[ch] = slices.Insert(list, i, conn)
		}
	}
}

// Unsubscribe ends conn's subscriptions to channels (UNSUBSCRIBE).
func (m *Master) Unsubscribe(conn Conn, channels ...string) {
	for _, ch := range channels {
		list := m.subs[ch]
		if i, found := slices.BinarySearch(list, conn); found {
			list = slices.Delete(list, i, i+1)
			if len(list) == 0 {
				delete(m.subs, ch)
			} else {
				m.subs[ch] = list
			}
		}
	}
}

// Disconnect ends every subscription of conn, as its connection closing
// does.
func (m *Master) Disconnect(conn Conn) {
	for ch, list := range m.subs { // order does not matter: each channel is on its own
		if i, found := slices.BinarySearch(list, conn); found {
			list = slices.Delete(list, i, i+1)
			if len(list) == 0 {
				delete(m.subs, ch)
			} else {
				m.subs[ch] = list
			}
		}
	}
}

// Subscribers is how many connections are subscribed to channel (what
// PUBLISH counts and PUBSUB NUMSUB reports).
func (m *Master) Subscribers(channel string) int { return len(m.subs[channel]) }

// Drain calls fn for each message published since the last Drain, in the
// order published, with the connections subscribed to its channel at the
// time (to is valid only during the call), and empties the outbox. A
// message published to no subscriber is there too, with no recipient.
func (m *Master) Drain(fn func(msg Message, to []Conn)) {
	for _, msg := range m.out {
		fn(msg, m.outTo[msg.to[0]:msg.to[1]])
	}
	clear(m.out) // let the strings go
	m.out, m.outTo = m.out[:0], m.outTo[:0]
}

// Pending is how many published messages wait in the outbox.
func (m *Master) Pending() int { return len(m.out) }

func (m *Master) publish(channel, payload string) int64 {
	list := m.subs[channel]
	start := len(m.outTo)
	m.outTo = append(m.outTo, list...)
	m.out = append(m.out, Message{Channel: channel, Payload: payload, to: [2]int{start, len(m.outTo)}})
	return int64(len(list))
}
