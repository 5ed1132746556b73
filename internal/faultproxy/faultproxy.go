// Package faultproxy is an in-process TCP proxy in front of one server that
// can stall, cut, refuse and delay the connections through it. Package lab
// and package redlocktest put one in front of each master.
package faultproxy

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Why not github.com/Shopify/toxiproxy/v2 embedded (v2.5.0 was read for
// this): its Proxy.Stop waits only for the accept loop, never for the
// per-connection goroutines, so goroutines outlive Close and a goleak check
// passes only by timing; NewProxy needs an ApiServer with a prometheus
// metrics container and a zerolog logger; toxics are added through JSON;
// and it dials the upstream inside its accept loop, so one slow dial stalls
// every new client. Here every goroutine is tracked and joined by Close.

// A Proxy forwards each accepted connection to its upstream. Its faults:
//
//   - Stall/Resume: nothing is forwarded either way, connections stay
//     open (a frozen server); Resume hands on what waited, in order.
//   - Cut: open connections are closed, new ones are accepted and held
//     unread (a partition: clients time out).
//   - Refuse: open connections are reset, and every new one (a host that
//     is down: clients fail at once).
//   - Heal ends Cut and Refuse: new connections are forwarded again and
//     those held while cut are closed.
//   - SetLatency and DelayOpen delay data.
type Proxy struct {
	upstream string
	ln       net.Listener
	latency  atomic.Int64 // time.Duration added to each chunk, each way

	mu       sync.Mutex
	gate     chan struct{} // closed while forwarding; open (blocking) while stalled
	cut      bool
	refusing bool
	closed   bool
	pairs    map[*pair]struct{} // forwarding connections
	held     map[net.Conn]struct{}

	wg sync.WaitGroup // accept loop, dials and pipes
}

// pair is one client connection and its upstream connection.
type pair struct {
	client, server net.Conn
	done           chan struct{}
	once           sync.Once
	// up and down are time.Durations added for this pair only
	// (DelayOpen): toward the upstream, and back.
	up, down atomic.Int64
}

// shut closes both ends; reset makes the client's end send a TCP RST
// instead of a FIN, as a host refusing the connection would.
func (c *pair) shut(reset bool) {
	c.once.Do(func() {
		close(c.done)
		if reset {
			setReset(c.client)
		}
		_ = c.client.Close()
		_ = c.server.Close()
	})
}

// setReset makes Close send an RST (SO_LINGER 0).
func setReset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
}

// chunk is data read from one side, stamped with when it was read so that
// latency delays each chunk by d from its arrival rather than adding up.
type chunk struct {
	data []byte
	at   time.Time
}

// upstreamDialTimeout bounds one dial to the upstream; a paused server
// still completes the TCP handshake from its backlog, so this only trips
// when the host itself is unreachable.
const upstreamDialTimeout = 2 * time.Second

// Start listens on a random loopback port and forwards to upstream.
func Start(upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	gate := make(chan struct{})
	close(gate)
	p := &Proxy{
		upstream: upstream,
		ln:       ln,
		gate:     gate,
		pairs:    make(map[*pair]struct{}),
		held:     make(map[net.Conn]struct{}),
	}
	p.wg.Go(p.acceptLoop)
	return p, nil
}

// Addr is the "127.0.0.1:port" clients dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) acceptLoop() {
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// Transient accept errors (EMFILE and the like): back off
			// briefly unless the proxy is closing.
			p.mu.Lock()
			closed := p.closed
			p.mu.Unlock()
			if closed {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		p.mu.Lock()
		switch {
		case p.closed:
			p.mu.Unlock()
			_ = conn.Close()
			continue
		case p.refusing:
			p.mu.Unlock()
			setReset(conn)
			_ = conn.Close()
			continue
		case p.cut:
			// Accept and hold without reading, as a partition would;
			// Heal or Close drops it.
			p.held[conn] = struct{}{}
			p.mu.Unlock()
			continue
		}
		// The accept loop still holds a count, so this Add cannot race Wait.
		p.wg.Add(1)
		p.mu.Unlock()
		go p.connect(conn)
	}
}

// connect dials the upstream for one client connection and starts
// forwarding both ways.
func (p *Proxy) connect(client net.Conn) {
	defer p.wg.Done()
	server, err := net.DialTimeout("tcp", p.upstream, upstreamDialTimeout)
	if err != nil {
		// Upstream down: the client sees its connection closed.
		_ = client.Close()
		return
	}
	c := &pair{client: client, server: server, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed || p.cut || p.refusing {
		reset := p.refusing
		p.mu.Unlock()
		c.shut(reset)
		return
	}
	p.pairs[c] = struct{}{}
	p.wg.Add(4)
	p.mu.Unlock()
	go p.pipe(c, server, client, &c.up)
	go p.pipe(c, client, server, &c.down)
}

// pipe runs one direction with two goroutines: a reader that stamps chunks
// and a writer that hands each one on once the proxy is not stalled and
// its latency has passed since it arrived. Either side failing closes the
// pair, which stops the other direction too.
func (p *Proxy) pipe(c *pair, dst, src net.Conn, extra *atomic.Int64) {
	ch := make(chan chunk, 64)
	go func() {
		defer p.wg.Done()
		defer close(ch)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				select {
				case ch <- chunk{data: buf[:n], at: time.Now()}:
				case <-c.done:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	defer p.wg.Done()
	defer p.drop(c)
	for k := range ch {
		p.mu.Lock()
		gate := p.gate
		p.mu.Unlock()
		select {
		case <-gate:
		case <-c.done:
			return
		}
		if d := time.Duration(p.latency.Load()+extra.Load()) - time.Since(k.at); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-c.done:
				t.Stop()
				return
			}
		}
		if _, err := dst.Write(k.data); err != nil {
			return
		}
	}
}

func (p *Proxy) drop(c *pair) {
	c.shut(false)
	p.mu.Lock()
	delete(p.pairs, c)
	p.mu.Unlock()
}

// Stall stops forwarding in both directions: connections stay open, what
// clients send waits and nothing is answered. A chunk already being
// written may still get through.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
		p.gate = make(chan struct{})
	default: // already stalled
	}
}

// Resume forwards again after Stall, starting with what waited.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

// Cut closes every open connection and holds new ones unread until Heal.
func (p *Proxy) Cut() { p.fault(&p.cut, false) }

// Refuse resets every open connection and every new one until Heal.
func (p *Proxy) Refuse() { p.fault(&p.refusing, true) }

// fault sets the fault flag and ends every open connection.
func (p *Proxy) fault(flag *bool, reset bool) {
	p.mu.Lock()
	*flag = true
	pairs := p.takePairsLocked()
	p.mu.Unlock()
	for _, c := range pairs {
		c.shut(reset)
	}
}

// Heal ends Cut and Refuse: new connections are forwarded again; those
// held while cut are closed, so that their clients reconnect rather than
// resume a stale stream.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.cut, p.refusing = false, false
	held := p.takeHeldLocked()
	p.mu.Unlock()
	for _, c := range held {
		_ = c.Close()
	}
}

// SetLatency delays every chunk by d each way, from its arrival, on open
// connections and new ones; 0 removes it.
func (p *Proxy) SetLatency(d time.Duration) { p.latency.Store(int64(d)) }

// DelayOpen adds up (toward the upstream) and down (back) to the delay of
// the connections open now, until they close; later connections are not
// delayed. It returns how many connections it delayed.
func (p *Proxy) DelayOpen(up, down time.Duration) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.pairs {
		c.up.Store(int64(up))
		c.down.Store(int64(down))
	}
	return len(p.pairs)
}

// Close stops accepting, closes every connection and joins every
// goroutine. It is idempotent.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	pairs := p.takePairsLocked()
	held := p.takeHeldLocked()
	p.mu.Unlock()
	_ = p.ln.Close()
	for _, c := range pairs {
		c.shut(false)
	}
	for _, c := range held {
		_ = c.Close()
	}
	p.wg.Wait()
}

func (p *Proxy) takePairsLocked() []*pair {
	out := make([]*pair, 0, len(p.pairs))
	for c := range p.pairs {
		out = append(out, c)
	}
	clear(p.pairs)
	return out
}

func (p *Proxy) takeHeldLocked() []net.Conn {
	out := make([]net.Conn, 0, len(p.held))
	for c := range p.held {
		out = append(out, c)
	}
	clear(p.held)
	return out
}
