package world

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quorumlab/redlock/internal/sim"
)

// TraceEvent is one event of a traced run (Options.Trace): a command a
// client sent (send) or a master executed (exec), an event delivered to a
// client (Reply, Lost, Message, Timer…), a note, a fault or its end.
type TraceEvent struct {
	At               time.Duration
	What             string
	Client, Master   int
	Tag              uint64
	Args             []string
	Reply            sim.Reply
	Channel, Payload string
	Note             Note
}

// String renders e on one line, its time first.
func (e TraceEvent) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%12v %-8s", e.At, e.What)
	switch e.What {
	case "send", "exec":
		fmt.Fprintf(&b, " c%d→m%d #%d", e.Client, e.Master, e.Tag)
		for _, a := range e.Args {
			if len(a) > 40 { // a script's source
				a = a[:40] + "…"
			}
			b.WriteString(" " + a)
		}
		if e.What == "exec" {
			fmt.Fprintf(&b, " = %v", e.Reply)
		}
	case "Reply":
		fmt.Fprintf(&b, " m%d→c%d #%d %v", e.Master, e.Client, e.Tag, e.Reply)
	case "Lost":
		fmt.Fprintf(&b, " m%d→c%d #%d", e.Master, e.Client, e.Tag)
	case "Message":
		fmt.Fprintf(&b, " m%d→c%d %s %q", e.Master, e.Client, e.Channel, e.Payload)
	case "Subscribed":
		state := "off"
		if e.Tag == msgSubscribed {
			state = "on"
		}
		fmt.Fprintf(&b, " m%d→c%d %s (%s)", e.Master, e.Client, e.Channel, state)
	case "Timer":
		fmt.Fprintf(&b, " c%d id %d", e.Client, e.Tag)
	case "note":
		n := e.Note
		fmt.Fprintf(&b, " c%d %v call %d", e.Client, n.Kind, n.Call)
		if n.Resource != "" {
			fmt.Fprintf(&b, " %q", n.Resource)
		}
		if n.Kind == Acquired || n.Kind == Extended {
			fmt.Fprintf(&b, " %v fence %d deadline %v (client clock)", n.Mode, n.Fence, n.Deadline)
		}
	case "Start", "Stop", "Resubscribe":
		fmt.Fprintf(&b, " c%d", e.Client)
		if e.What == "Resubscribe" {
			fmt.Fprintf(&b, " m%d", e.Master)
		}
	}
	return b.String()
}

// TraceAround returns the traced events (Options.Trace) around at: the
// faults that began or ended from since to at (the cause is often
// earlier than the symptom), then the last before events up to at and
// the first after events after it.
func (w *World) TraceAround(at, since time.Duration, before, after int) []TraceEvent {
	i, _ := slices.BinarySearchFunc(w.trace, at+1, func(e TraceEvent, t time.Duration) int { return cmp.Compare(e.At, t) })
	lo, hi := max(0, i-before), min(len(w.trace), i+after)
	var out []TraceEvent
	for _, e := range w.trace[:lo] {
		if e.At >= since && (strings.HasPrefix(e.What, "fault") || strings.HasPrefix(e.What, "heal")) {
			out = append(out, e)
		}
	}
	return append(out, w.trace[lo:hi]...)
}
