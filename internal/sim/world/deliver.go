package world

import (
	"slices"
	"time"

	"github.com/quorumlab/redlock/internal/sim"
)

type dKind uint8

const (
	_ dKind = iota
	dStart
	dStop
	dReply
	dLost
	dMessage
	dResub
	dTimer
	dSubscribed
)

var dNames = [...]string{"", "Start", "Stop", "Reply", "Lost", "Message", "Resubscribe", "Timer", "Subscribed"}

// delivery is one event for a client.
type delivery struct {
	kind             dKind
	master           int
	tag              uint64
	reply            sim.Reply
	channel, payload string
}

// deliver hands an event to client c (or keeps it for later, while c is
// paused) and carries out the actions it returns.
func (w *World) deliver(c int, d delivery) {
	cl := &w.clients[c]
	if cl.paused > 0 {
		cl.deferred = append(cl.deferred, d)
		return
	}
	now := cl.clk.read(w.now)
	w.mixEvent(evKind(100+d.kind), c, d.tag)
	w.mixInt(uint64(d.master))
	if w.opts.Trace {
		w.trace = append(w.trace, TraceEvent{At: w.now, What: dNames[d.kind], Client: c, Master: d.master, Tag: d.tag,
			Reply: d.reply, Channel: d.channel, Payload: d.payload})
	}
	var acts []Action
	switch d.kind {
	case dStart:
		acts = cl.c.Start(now)
	case dStop:
		acts = cl.c.Stop(now)
	case dReply:
		w.mixReply(d.reply)
		acts = cl.c.Reply(now, d.master, d.tag, d.reply)
	case dLost:
		acts = cl.c.Lost(now, d.master, d.tag)
	case dMessage:
		w.mixString(d.channel)
		w.mixString(d.payload)
		acts = cl.c.Message(now, d.master, d.channel, d.payload)
	case dSubscribed:
		w.mixString(d.channel)
		acts = cl.c.Subscribed(now, d.master, d.channel, d.tag == msgSubscribed)
	case dResub:
		acts = cl.c.Resubscribe(now, d.master)
	case dTimer:
		acts = cl.c.Timer(now, d.tag)
	}
	w.act(c, acts)
}

// act carries out a client's actions.
func (w *World) act(c int, acts []Action) {
	for i := range acts {
		a := &acts[i]
		switch a.Kind {
		case Send:
			if i, ok := w.closing[c]; ok {
				cl := &w.hist.Closings[i]
				if cl.SentAfter == 0 {
					cl.FirstAfter = w.now
				}
				cl.SentAfter++
			}
			x := c*len(w.masters) + a.Master
			p := &w.pairs[x]
			if w.opts.Trace {
				w.trace = append(w.trace, TraceEvent{At: w.now, What: "send", Client: c, Master: a.Master, Tag: a.Tag, Args: a.Args})
			}
			if p.cut > 0 || w.masters[a.Master].down > 0 {
				w.lose(x, a.Tag)
				continue
			}
			p.req.push(w.now+w.opts.Delay.draw(w.rng), a.Tag, a.Args)
			w.arm(x, famReq)
		case Subscribe, Unsubscribe:
			x := c*len(w.masters) + a.Master
			p := &w.pairs[x]
			if p.subCut > 0 || w.masters[a.Master].down > 0 {
				continue // Resubscribe follows once it is back
			}
			p.sub.push(w.now+w.opts.Delay.draw(w.rng), 0, subOp{channel: a.Channel, on: a.Kind == Subscribe})
			w.arm(x, famSub)
		case After:
			w.schedule(event{at: w.now + w.clients[c].clk.span(a.Delay), kind: evTimer, x: int32(c), id: a.Tag})
		case Record:
			w.note(c, &a.Note)
		}
	}
}

// note adds a client's note to the history, on the global clock.
func (w *World) note(c int, n *Note) {
	clk := w.clients[c].clk
	k := callKey{c, n.Call}
	w.mixEvent(evKind(200+n.Kind), c, n.Call)
	if w.opts.Trace {
		w.trace = append(w.trace, TraceEvent{At: w.now, What: "note", Client: c, Master: -1, Note: *n})
	}
	switch n.Kind {
	case Begin:
		limit := Never
		if n.Limit > 0 {
			limit = w.now + clk.span(n.Limit)
		}
		w.calls[k] = len(w.hist.Calls)
		w.hist.Calls = append(w.hist.Calls, Call{Client: c, Call: n.Call, Resource: n.Resource, Start: w.now, End: Never, Limit: limit})
	case Acquired, Failed:
		res := n.Resource
		if i, ok := w.calls[k]; ok {
			call := &w.hist.Calls[i]
			call.End, call.Acquired = w.now, n.Kind == Acquired
			if n.Kind == Failed && n.Limit > 0 {
				call.Limit = min(call.Limit, w.now)
			}
			res = call.Resource
			delete(w.calls, k)
		}
		if n.Kind == Acquired {
			w.open[k] = len(w.hist.Intervals)
			w.hist.Intervals = append(w.hist.Intervals, Interval{Client: c, Call: n.Call, Resource: res, Mode: n.Mode,
				Fence: n.Fence, Enter: w.now, Exit: Never, Deadline: deadline(clk, n.Deadline), Done: Never, Lineage: n.Lineage})
		}
	case Observed:
		w.hist.Observations = append(w.hist.Observations, Observation{Client: c, Observer: n.Call, Resource: n.Resource,
			Mode: n.Mode, Start: clk.global(n.Since), End: w.now, Value: n.Fence})
	case Closed:
		cl := Closing{Client: c, At: w.now, Shutdown: n.Limit > 0, Released: n.Fence == 1}
		for ck := range w.calls {
			if ck.client == c {
				cl.Running = append(cl.Running, ck.call)
			}
		}
		slices.Sort(cl.Running)
		w.closing[c] = len(w.hist.Closings)
		w.hist.Closings = append(w.hist.Closings, cl)
	case Extended, Done, Exit, Read:
		i, ok := w.open[k]
		if !ok {
			return
		}
		iv := &w.hist.Intervals[i]
		switch n.Kind {
		case Read:
			w.hist.Readings = append(w.hist.Readings, Reading{Interval: i, At: w.now, Fence: n.Fence})
		case Extended:
			iv.Deadline = deadline(clk, n.Deadline)
		case Done:
			iv.Done = min(iv.Done, w.now)
		case Exit:
			iv.Exit = w.now
			if n.Lineage != 0 {
				iv.Lineage = n.Lineage
			}
			delete(w.open, k)
		}
	}
}

// deadline puts a holder's deadline on the global clock (0: none, the
// holder counts on the lock until it exits).
func deadline(clk clock, local time.Duration) time.Duration {
	if local == 0 {
		return Never
	}
	return clk.global(local)
}
