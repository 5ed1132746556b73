package world

import (
	"time"

	"github.com/quorumlab/redlock/internal/sim"
)

type evKind uint8

const (
	_        evKind = iota
	evStart         // client x's Start
	evStop          // client x's Stop
	evPipe          // the head of pair x's pipe fam arrives
	evTimer         // client x's timer id
	evBroken        // pair x's lost commands are told
	evResub         // pair x's pub/sub connection is back
	evFault         // fault x begins
	evHeal          // fault x ends
)

// What an item of a pub/sub connection's messages is (its tag).
const (
	msgPublished uint64 = iota
	msgSubscribed
	msgUnsubscribed
)

// The pipes of a pair.
const (
	famReq uint8 = iota
	famRep
	famSub
	famMsg
)

// event is one entry of the schedule. Events run in order of at, then of
// seq (the order they were scheduled in): nothing else decides.
type event struct {
	at    time.Duration
	seq   uint64
	id    uint64
	x     int32
	epoch uint32
	kind  evKind
	fam   uint8
}

func (a *event) before(b *event) bool {
	return a.at < b.at || a.at == b.at && a.seq < b.seq
}

// schedule puts ev on the heap (a binary min-heap on a slice: no
// interface calls, no allocation once the slice has grown; the sifts move
// a hole rather than swap).
func (w *World) schedule(ev event) {
	if ev.at < w.now {
		ev.at = w.now
	}
	w.seq++
	ev.seq = w.seq
	h := append(w.heap, ev)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !ev.before(&h[p]) {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = ev
	w.heap = h
}

func (w *World) pop() event {
	h := w.heap
	top := h[0]
	last := len(h) - 1
	ev := h[last]
	h = h[:last]
	if last > 0 {
		i := 0
		for {
			c := 2*i + 1
			if c >= last {
				break
			}
			if r := c + 1; r < last && h[r].before(&h[c]) {
				c = r
			}
			if !h[c].before(&ev) {
				break
			}
			h[i] = h[c]
			i = c
		}
		h[i] = ev
	}
	w.heap = h
	return top
}

func (w *World) step() {
	ev := w.pop()
	w.now = ev.at
	w.n++
	switch ev.kind {
	case evStart:
		c := &w.clients[ev.x]
		c.started = true
		w.deliver(int(ev.x), delivery{kind: dStart})
	case evStop:
		w.deliver(int(ev.x), delivery{kind: dStop})
	case evPipe:
		w.arrive(int(ev.x), ev.fam, ev.epoch)
	case evTimer:
		w.deliver(int(ev.x), delivery{kind: dTimer, tag: ev.id})
	case evBroken:
		w.broken(int(ev.x))
	case evResub:
		p := &w.pairs[ev.x]
		if p.subCut == 0 && w.masters[p.m].down == 0 {
			w.deliver(p.c, delivery{kind: dResub, master: p.m})
		}
	case evFault:
		w.begin(int(ev.x))
	case evHeal:
		w.heal(int(ev.x))
	}
}

// pipe is one direction of a connection: a FIFO of items, each with the
// time it arrives (never before the item ahead of it, as TCP delivers).
// Only its head has an event on the schedule (armed); epoch tells that
// event stale once the pipe was cut.
type pipe[T any] struct {
	q     []queued[T]
	head  int
	last  time.Duration
	epoch uint32
	armed bool
}

type queued[T any] struct {
	at  time.Duration
	tag uint64
	v   T
}

func (p *pipe[T]) push(at time.Duration, tag uint64, v T) {
	at = max(at, p.last)
	p.last = at
	if p.head > 0 && p.head == len(p.q) {
		clear(p.q)
		p.q, p.head = p.q[:0], 0
	} else if p.head >= 64 && 2*p.head >= len(p.q) {
		n := copy(p.q, p.q[p.head:])
		clear(p.q[n:])
		p.q, p.head = p.q[:n], 0
	}
	p.q = append(p.q, queued[T]{at: at, tag: tag, v: v})
}

func (p *pipe[T]) empty() bool { return p.head == len(p.q) }

func (p *pipe[T]) pop() queued[T] {
	q := p.q[p.head]
	var zero queued[T]
	p.q[p.head] = zero
	p.head++
	return q
}

// cut empties the pipe and makes its scheduled event stale; fn sees each
// item dropped, in order.
func (p *pipe[T]) cut(fn func(tag uint64)) {
	for _, q := range p.q[p.head:] {
		if fn != nil {
			fn(q.tag)
		}
	}
	clear(p.q)
	p.q, p.head = p.q[:0], 0
	p.epoch++
	p.armed = false
}

// arm schedules the head of a pair's pipe, if it has one and none is
// scheduled.
func (w *World) arm(x int, fam uint8) {
	p := &w.pairs[x]
	var at time.Duration
	var ep uint32
	switch fam {
	case famReq:
		if p.req.armed || p.req.empty() || p.stalled > 0 || p.parked {
			return
		}
		p.req.armed, at, ep = true, p.req.q[p.req.head].at, p.req.epoch
	case famRep:
		if p.rep.armed || p.rep.empty() || p.stalled > 0 {
			return
		}
		p.rep.armed, at, ep = true, p.rep.q[p.rep.head].at, p.rep.epoch
	case famSub:
		if p.sub.armed || p.sub.empty() {
			return
		}
		p.sub.armed, at, ep = true, p.sub.q[p.sub.head].at, p.sub.epoch
	case famMsg:
		if p.msg.armed || p.msg.empty() {
			return
		}
		p.msg.armed, at, ep = true, p.msg.q[p.msg.head].at, p.msg.epoch
	}
	w.schedule(event{at: at, kind: evPipe, x: int32(x), fam: fam, epoch: ep})
}

// arrive handles the arrival of the head of a pair's pipe.
func (w *World) arrive(x int, fam uint8, epoch uint32) {
	p := &w.pairs[x]
	switch fam {
	case famReq:
		if epoch != p.req.epoch {
			return
		}
		p.req.armed = false
		if p.stalled > 0 {
			return // heal re-arms
		}
		m := &w.masters[p.m]
		if m.stalled > 0 {
			p.parked = true
			m.waiting = append(m.waiting, x)
			return
		}
		q := p.req.pop()
		w.execute(x, q.tag, q.v)
		w.arm(x, famReq)
	case famRep:
		if epoch != p.rep.epoch {
			return
		}
		p.rep.armed = false
		if p.stalled > 0 {
			return
		}
		q := p.rep.pop()
		w.arm(x, famRep)
		w.deliver(p.c, delivery{kind: dReply, master: p.m, tag: q.tag, reply: q.v})
	case famSub:
		if epoch != p.sub.epoch {
			return
		}
		p.sub.armed = false
		q := p.sub.pop()
		m := w.masters[p.m].m
		if q.v.on {
			m.Subscribe(sim.Conn(p.c+1), q.v.channel)
		} else {
			m.Unsubscribe(sim.Conn(p.c+1), q.v.channel)
		}
		w.mixEvent(evPipe, x, uint64(famSub))
		w.mixString(q.v.channel)
		w.arm(x, famSub)
		// The confirmation comes back on the pub/sub connection, in order
		// with the messages (and is not lost: it is TCP's).
		confirm := uint64(msgUnsubscribed)
		if q.v.on {
			confirm = msgSubscribed
		}
		p.msg.push(w.now+w.opts.PubSubDelay.draw(w.rng), confirm, sim.Message{Channel: q.v.channel})
		w.arm(x, famMsg)
	case famMsg:
		if epoch != p.msg.epoch {
			return
		}
		p.msg.armed = false
		q := p.msg.pop()
		w.arm(x, famMsg)
		d := delivery{kind: dMessage, master: p.m, channel: q.v.Channel, payload: q.v.Payload}
		if q.tag != msgPublished {
			d.kind, d.tag = dSubscribed, q.tag
		}
		w.deliver(p.c, d)
	}
}

// execute runs a command on its master, queues the reply and sends what
// the master published to the subscribers' pub/sub connections.
func (w *World) execute(x int, tag uint64, args []string) {
	p := &w.pairs[x]
	m := &w.masters[p.m]
	r := m.m.Do(m.clk.read(w.now), args)
	w.mixEvent(evPipe, x, tag)
	for _, a := range args {
		w.mixString(a)
	}
	w.mixReply(r)
	if w.opts.Trace {
		w.trace = append(w.trace, TraceEvent{At: w.now, What: "exec", Client: p.c, Master: p.m, Tag: tag, Args: args, Reply: r})
	}
	p.rep.push(w.now+w.opts.Delay.draw(w.rng), tag, r)
	w.arm(x, famRep)
	if m.m.Pending() > 0 {
		w.publish(p.m)
	}
}

func (w *World) publish(mi int) {
	base := mi
	w.masters[mi].m.Drain(func(msg sim.Message, to []sim.Conn) {
		for _, conn := range to {
			x := (int(conn)-1)*len(w.masters) + base
			p := &w.pairs[x]
			if p.subCut > 0 {
				continue
			}
			if w.opts.PubSubLoss > 0 && w.rng.Float64() < w.opts.PubSubLoss {
				continue
			}
			p.msg.push(w.now+w.opts.PubSubDelay.draw(w.rng), 0, msg)
			if w.opts.PubSubDup > 0 && w.rng.Float64() < w.opts.PubSubDup {
				p.msg.push(w.now+w.opts.PubSubDelay.draw(w.rng), 0, msg)
			}
			w.arm(x, famMsg)
		}
	})
}

// broken tells a client of its commands lost with a connection.
func (w *World) broken(x int) {
	p := &w.pairs[x]
	p.broken = false
	tags := p.lost
	p.lost = p.spare[:0]
	for _, tag := range tags {
		w.deliver(p.c, delivery{kind: dLost, master: p.m, tag: tag})
	}
	p.spare = tags[:0]
}

func (w *World) lose(x int, tag uint64) {
	p := &w.pairs[x]
	p.lost = append(p.lost, tag)
	if !p.broken {
		p.broken = true
		// At least a microsecond on: a client that resends at once on Lost
		// to a link still down must not loop at one instant.
		w.schedule(event{at: w.now + max(w.opts.Delay.Min, time.Microsecond), kind: evBroken, x: int32(x)})
	}
}
