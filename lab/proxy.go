package lab

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// proxy is a small in-process TCP fault proxy in front of one master.
//
// Why not github.com/Shopify/toxiproxy/v2 embedded (v2.5.0 was read for this):
// its Proxy.Stop waits only for the accept loop, never for the per-connection
// read/toxic/write goroutines, so goroutines outlive Close and a goleak check
// passes only by timing; NewProxy needs an ApiServer with a prometheus metrics
// container and a zerolog logger; toxics are added through JSON; and it dials
// the upstream inside its accept loop, so one slow dial stalls every new
// client. The three faults the lab needs fit in the code below, where every
// goroutine is tracked and joined by close.
type proxy struct {
	upstream string
	ln       net.Listener
	latency  atomic.Int64 // time.Duration added to each chunk, each way

	mu     sync.Mutex
	cut    bool
	closed bool
	links  map[*link]struct{} // forwarding connections
	held   map[net.Conn]struct{}

	wg sync.WaitGroup // accept loop, handlers and pipes
}

// link is one client connection and its upstream connection.
type link struct {
	client, server net.Conn
	done           chan struct{}
	once           sync.Once
	// up and down are time.Durations added for this link only
	// (delayOpen): toward the master, and back.
	up, down atomic.Int64
}

func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		_ = l.client.Close()
		_ = l.server.Close()
	})
}

// chunk is data read from one side, stamped with when it was read so that
// latency delays each chunk by d from its arrival rather than adding up.
type chunk struct {
	data []byte
	at   time.Time
}

// upstreamDialTimeout bounds one dial to the master; a paused master still
// completes the TCP handshake from its backlog, so this only trips when the
// host itself is unreachable.
const upstreamDialTimeout = 2 * time.Second

func startProxy(upstream string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{
		upstream: upstream,
		ln:       ln,
		links:    make(map[*link]struct{}),
		held:     make(map[net.Conn]struct{}),
	}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) acceptLoop() {
	defer p.wg.Done()
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
			// Transient accept errors (EMFILE and the like): back off briefly
			// unless the proxy is closing.
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
		case p.cut:
			// Blackhole: accept and hold without reading, as a partition
			// would; Heal or close drops it.
			p.held[conn] = struct{}{}
			p.mu.Unlock()
			continue
		}
		// The accept loop still holds a count, so this Add cannot race Wait.
		p.wg.Add(1)
		p.mu.Unlock()
		go p.handle(conn)
	}
}

func (p *proxy) handle(client net.Conn) {
	defer p.wg.Done()
	server, err := net.DialTimeout("tcp", p.upstream, upstreamDialTimeout)
	if err != nil {
		// Master down: the client sees its connection closed.
		_ = client.Close()
		return
	}
	l := &link{client: client, server: server, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed || p.cut {
		p.mu.Unlock()
		l.close()
		return
	}
	p.links[l] = struct{}{}
	p.wg.Add(4)
	p.mu.Unlock()
	go p.pipe(l, server, client, &l.up)
	go p.pipe(l, client, server, &l.down)
}

// pipe runs one direction with two goroutines: a reader that stamps chunks
// and a writer that releases each one latency after it arrived. Either side
// failing closes the whole link, which stops the other direction too.
func (p *proxy) pipe(l *link, dst, src net.Conn, extra *atomic.Int64) {
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
				case <-l.done:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	defer p.wg.Done()
	defer p.drop(l)
	for c := range ch {
		if d := time.Duration(p.latency.Load()+extra.Load()) - time.Since(c.at); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-l.done:
				t.Stop()
				return
			}
		}
		if _, err := dst.Write(c.data); err != nil {
			return
		}
	}
}

func (p *proxy) drop(l *link) {
	l.close()
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// setCut drops every open connection and blackholes new ones.
func (p *proxy) setCut() {
	p.mu.Lock()
	p.cut = true
	links := p.takeLinksLocked()
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
}

// heal forwards new connections again; connections held while cut are
// closed, so their clients reconnect rather than resume a stale stream.
func (p *proxy) heal() {
	p.mu.Lock()
	p.cut = false
	held := p.takeHeldLocked()
	p.mu.Unlock()
	for _, c := range held {
		_ = c.Close()
	}
}

func (p *proxy) setLatency(d time.Duration) { p.latency.Store(int64(d)) }

// delayOpen adds up (toward the master) and down (back) to the delay of
// the connections open now, on top of the latency; later connections are
// not delayed. It returns how many connections it delayed.
func (p *proxy) delayOpen(up, down time.Duration) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for l := range p.links {
		l.up.Store(int64(up))
		l.down.Store(int64(down))
	}
	return len(p.links)
}

func (p *proxy) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	links := p.takeLinksLocked()
	held := p.takeHeldLocked()
	p.mu.Unlock()
	_ = p.ln.Close()
	for _, l := range links {
		l.close()
	}
	for _, c := range held {
		_ = c.Close()
	}
	p.wg.Wait()
}

func (p *proxy) takeLinksLocked() []*link {
	out := make([]*link, 0, len(p.links))
	for l := range p.links {
		out = append(out, l)
	}
	clear(p.links)
	return out
}

func (p *proxy) takeHeldLocked() []net.Conn {
	out := make([]net.Conn, 0, len(p.held))
	for c := range p.held {
		out = append(out, c)
	}
	clear(p.held)
	return out
}
