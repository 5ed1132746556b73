package world

import (
	"time"

	"github.com/quorumlab/redlock/internal/sim"
)

// Client is one simulated process that uses the masters: a state machine
// the world drives. Each method is one event, delivered at now, the
// client's own clock (its offset and rate are the world's draw, so now
// is comparable only with the client's own readings); it returns the
// actions to take. A method must not block, start a goroutine or read a
// clock, and may draw randomness only from the world's Rand: then a seed
// replays the client too. Code that counts in time.Time (internal/wait,
// quorum.Round) takes a fixed base plus now, e.g. time.Unix(0, 0).Add(now):
// with no monotonic reading in it, Add, Sub and Before work as usual.
//
// The returned slice is read before the next event is delivered, so a
// client may reuse one buffer for it. The Args of a Send are kept (until
// the master runs them, and for ever in a trace): a client must not
// change a slice it has sent.
//
// The events are what a driver of a sans-I/O client gets from its
// connections and timers: the reply to a command (matched by Tag, as a
// pipelining connection matches replies in order), a command lost with its
// connection, a pub/sub message, a subscription confirmed, the pub/sub
// connection's subscriptions lost, a timer.
type Client interface {
	// Start is the first event.
	Start(now time.Duration) []Action
	// Reply is master's reply to the command sent with tag.
	Reply(now time.Duration, master int, tag uint64, r sim.Reply) []Action
	// Lost: the command sent with tag will get no reply: its connection
	// broke (cut, or the master restarted) before the reply came back. It
	// may or may not have run. Lost comes a little after the break (the
	// network's least delay), so a client that resends at once on a link
	// still down does not loop in no time; it should back off all the
	// same.
	Lost(now time.Duration, master int, tag uint64) []Action
	// Message is a pub/sub message that master published on channel, to
	// which the client's pub/sub connection to master was subscribed
	// (possibly lost, delayed or duplicated on its way).
	Message(now time.Duration, master int, channel, payload string) []Action
	// Subscribed: master confirmed a Subscribe (subscribed true) or an
	// Unsubscribe of channel. The confirmation comes on the pub/sub
	// connection in order with the messages, as Redis sends it: messages
	// published after the subscription took effect come after it.
	Subscribed(now time.Duration, master int, channel string, subscribed bool) []Action
	// Resubscribe: the pub/sub connection to master broke and is back; its
	// subscriptions are gone, and messages published meanwhile were lost.
	Resubscribe(now time.Duration, master int) []Action
	// Timer is the timer set with After and id. Timers cannot be
	// cancelled: a client ignores the ids it no longer waits for.
	Timer(now time.Duration, id uint64) []Action
	// Stop: begin no more Lock calls; finish (release) what is held. The
	// world runs until no event is left, so a client that stops must in
	// the end stop setting timers and sending.
	Stop(now time.Duration) []Action
}

// ActionKind is what an Action does.
type ActionKind uint8

// The kinds of action.
const (
	_ ActionKind = iota
	// Send sends Args to Master on the client's command connection; the
	// reply (or Lost) carries Tag.
	Send
	// Subscribe and Unsubscribe change the subscriptions of the client's
	// pub/sub connection to Master: to Channel.
	Subscribe
	Unsubscribe
	// After sets the timer Tag to fire Delay from now, on the client's
	// clock.
	After
	// Record adds Note to the history, stamped with the global time.
	Record
)

var actionNames = [...]string{"", "Send", "Subscribe", "Unsubscribe", "After", "Record"}

// String returns the kind's name, e.g. "Send".
func (k ActionKind) String() string {
	if int(k) < len(actionNames) {
		return actionNames[k]
	}
	return "ActionKind(?)"
}

// Action is one thing a Client asks the world to do.
type Action struct {
	Kind    ActionKind
	Master  int
	Tag     uint64
	Args    []string
	Channel string
	Delay   time.Duration
	Note    Note
}

// NoteKind is what a Note records.
type NoteKind uint8

// The kinds of note. A Lock call is Begin, then Acquired or Failed; an
// acquired lock is then Extended any number of times, Done when its Done
// channel closes (if it does), and Exit when the holder leaves its
// critical section (calls Unlock). Read: while holding, the holder read
// who holds the lock (an election's leader), and Fence is the term read.
// Observed: a reading by any client, holding or not, that returned now:
// Mode Permit, how many permits of the semaphore Resource are held (a
// Holders call; Fence the count); Exclusive, who leads the election
// Resource (a Leader call or an Observe delivery; Fence the term). Since
// is when the reading began, Call names the observer (its readings form
// a sequence: one Observe channel, say). Closed: the client's Shutdown
// (Limit > 0) or Close returned now; Fence is 1 when Shutdown returned
// nil.
const (
	_ NoteKind = iota
	Begin
	Acquired
	Failed
	Extended
	Done
	Exit
	Read
	Observed
	Closed
)

var noteNames = [...]string{"", "Begin", "Acquired", "Failed", "Extended", "Done", "Exit", "Read", "Observed", "Closed"}

// String returns the kind's name, e.g. "Acquired".
func (k NoteKind) String() string {
	if int(k) < len(noteNames) {
		return noteNames[k]
	}
	return "NoteKind(?)"
}

// Note is one entry of a client's history. Times in it are on the
// client's clock; the world puts them on the global clock.
type Note struct {
	Kind NoteKind
	// Call names the Lock call among the client's (any number the client
	// chooses, unique per client).
	Call uint64
	// Begin: the resource, and Limit: how long the call's context allows
	// (0: no limit). Failed with Limit > 0: the caller ended the call's
	// context before its limit (a process shutting down), now; liveness
	// does not judge the call past it.
	Resource string
	Limit    time.Duration
	// Acquired: the mode and fence (0: none). Acquired and Extended: the
	// deadline, the instant on the client's clock until which it may act
	// on the lock (0: none; the holder counts on the lock until it exits).
	Mode     Mode
	Fence    uint64
	Deadline time.Duration
	// Acquired or Exit: the lock's lineage (0: none). A lock handed over
	// by its token (Adopt) is one lock held in turn: its holders share a
	// lineage, and its fence.
	Lineage uint64
	// Observed: when the reading began, on the client's clock.
	Since time.Duration
}
