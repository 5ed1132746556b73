package sim_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/quorumlab/redlock/internal/sim"
)

// respConn is a bare RESP2 connection to a real server, so that replies
// keep their exact kind (go-redis reads a status and a bulk string alike).
type respConn struct {
	c  net.Conn
	br *bufio.Reader
	bw *bufio.Writer
}

func dialRESP(addr string) (*respConn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &respConn{c: c, br: bufio.NewReader(c), bw: bufio.NewWriter(c)}, nil
}

func (r *respConn) close() { r.c.Close() }

// send writes one command and flushes it.
func (r *respConn) send(args ...string) error {
	fmt.Fprintf(r.bw, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(r.bw, "$%d\r\n%s\r\n", len(a), a)
	}
	return r.bw.Flush()
}

// do sends one command and reads its reply.
func (r *respConn) do(args ...string) (sim.Reply, error) {
	r.c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := r.send(args...); err != nil {
		return sim.Reply{}, err
	}
	return r.read()
}

func (r *respConn) read() (sim.Reply, error) {
	r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := r.br.ReadString('\n')
	if err != nil {
		return sim.Reply{}, err
	}
	if len(line) < 3 {
		return sim.Reply{}, fmt.Errorf("short line %q", line)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+':
		return sim.Reply{Kind: sim.Status, Text: body}, nil
	case '-':
		return sim.Reply{Kind: sim.Error, Text: body}, nil
	case ':':
		n, err := strconv.ParseInt(body, 10, 64)
		return sim.Reply{Kind: sim.Int, Int: n}, err
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil {
			return sim.Reply{}, err
		}
		if n < 0 {
			return sim.Reply{Kind: sim.Nil}, nil
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(r.br, b); err != nil {
			return sim.Reply{}, err
		}
		return sim.Reply{Kind: sim.Bulk, Text: string(b[:n])}, nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil {
			return sim.Reply{}, err
		}
		if n < 0 {
			return sim.Reply{Kind: sim.Nil}, nil
		}
		out := make([]sim.Reply, n)
		for i := range out {
			if out[i], err = r.read(); err != nil {
				return sim.Reply{}, err
			}
		}
		return sim.Reply{Kind: sim.Array, Array: out}, nil
	}
	return sim.Reply{}, fmt.Errorf("bad reply line %q", line)
}
