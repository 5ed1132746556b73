package redlocktest

import (
	"errors"
	"net"
	"sync"
	"time"
)

// front is the TCP front door of one in-process master: clients connect to
// it, and it forwards bytes both ways to the miniredis behind it. It is
// what makes a master stall (nothing forwarded, connections kept open) or
// refuse (every connection reset), while the miniredis itself stays
// reachable in-process for assertions.
//
// Every goroutine it starts is tracked by wg and joined by close.
type front struct {
	upstream string
	ln       net.Listener

	mu       sync.Mutex
	gate     chan struct{} // closed while forwarding; open (blocking) while stalled
	refusing bool
	closed   bool
	pipes    map[*pipe]struct{}

	wg sync.WaitGroup
}

// pipe is one client connection and its connection to the miniredis.
type pipe struct {
	client, server net.Conn
	done           chan struct{}
	once           sync.Once
}

// shut closes both ends; reset makes the client's end send a TCP RST
// instead of a FIN, as a host refusing the connection would.
func (p *pipe) shut(reset bool) {
	p.once.Do(func() {
		close(p.done)
		if reset {
			setReset(p.client)
		}
		_ = p.client.Close()
		_ = p.server.Close()
	})
}

// setReset makes Close send an RST (SO_LINGER 0).
func setReset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
}

func closedGate() chan struct{} {
	g := make(chan struct{})
	close(g)
	return g
}

func startFront(upstream string) (*front, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &front{upstream: upstream, ln: ln, gate: closedGate(), pipes: make(map[*pipe]struct{})}
	f.wg.Go(f.accept)
	return f, nil
}

func (f *front) addr() string { return f.ln.Addr().String() }

func (f *front) accept() {
	for {
		conn, err := f.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient error (out of file descriptors, say): try again
			// shortly, unless the front is closing.
			f.mu.Lock()
			closed := f.closed
			f.mu.Unlock()
			if closed {
				return
			}
			time.Sleep(5 * time.Millisecond)
			continue
		}
		f.mu.Lock()
		if f.closed || f.refusing {
			f.mu.Unlock()
			setReset(conn)
			_ = conn.Close()
			continue
		}
		// accept itself holds a count of wg here, so this Add cannot race
		// close's Wait.
		f.wg.Add(1)
		f.mu.Unlock()
		go f.connect(conn)
	}
}

// connect dials the miniredis for one client connection and starts
// forwarding both ways.
func (f *front) connect(client net.Conn) {
	defer f.wg.Done()
	server, err := net.DialTimeout("tcp", f.upstream, 2*time.Second)
	if err != nil {
		setReset(client)
		_ = client.Close()
		return
	}
	p := &pipe{client: client, server: server, done: make(chan struct{})}
	f.mu.Lock()
	if f.closed || f.refusing {
		f.mu.Unlock()
		p.shut(true)
		return
	}
	f.pipes[p] = struct{}{}
	f.wg.Add(2)
	f.mu.Unlock()
	go f.forward(p, server, client)
	go f.forward(p, client, server)
}

// forward copies src to dst, holding each chunk while the front is
// stalled. Either direction ending closes the pipe, which ends the other.
func (f *front) forward(p *pipe, dst, src net.Conn) {
	defer f.wg.Done()
	defer f.drop(p)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			f.mu.Lock()
			gate := f.gate
			f.mu.Unlock()
			select {
			case <-gate:
			case <-p.done:
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (f *front) drop(p *pipe) {
	p.shut(false)
	f.mu.Lock()
	delete(f.pipes, p)
	f.mu.Unlock()
}

// stall stops forwarding in both directions: connections stay open, what
// clients send waits (in the front's buffers and the kernel's) and nothing
// is answered, as with a SIGSTOPped redis-server. A chunk already being
// written when stall is called may still get through.
func (f *front) stall() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.gate:
		f.gate = make(chan struct{})
	default: // already stalled
	}
}

// resume forwards again, starting with what waited.
func (f *front) resume() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.gate:
	default:
		close(f.gate)
	}
}

// refuse resets every open connection and every new one.
func (f *front) refuse() {
	f.mu.Lock()
	f.refusing = true
	pipes := f.takePipesLocked()
	f.mu.Unlock()
	for _, p := range pipes {
		p.shut(true)
	}
}

// accept again after refuse.
func (f *front) allow() {
	f.mu.Lock()
	f.refusing = false
	f.mu.Unlock()
}

func (f *front) takePipesLocked() []*pipe {
	out := make([]*pipe, 0, len(f.pipes))
	for p := range f.pipes {
		out = append(out, p)
	}
	clear(f.pipes)
	return out
}

// close stops accepting, closes every connection and joins every goroutine.
func (f *front) close() {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.closed = true
	pipes := f.takePipesLocked()
	f.mu.Unlock()
	_ = f.ln.Close()
	for _, p := range pipes {
		p.shut(false)
	}
	f.wg.Wait()
}
