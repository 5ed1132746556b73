package transport

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The fast path: one dedicated connection per master, written by whoever
// owns the stream's write side and read by one reader goroutine, with
// replies matched to commands by order (RESP2 pipelining). It speaks only
// the handful of commands the Locker sends. It uses the go-redis client's
// options (address, dialer, TLS, user and password, DB, dial timeout) but
// not its pool, hooks or read/write timeouts: the Locker bounds rounds
// itself, and the connection is kept open across a stalled master so that
// what was written to it stays in order.

type respLink struct {
	s          *Stream
	conn       net.Conn
	respWriter // owned by the stream's writer
	nt         time.Duration
	// rearm is when the write deadline is next moved forward (writer-owned).
	rearm time.Time
	once  sync.Once
	// id and runID identify the connection on its server (CLIENT ID, and
	// INFO's run_id), so that a later connection can end it there (kill).
	id    int64
	runID string
}

func (k *respLink) Direct() bool { return true }

func (k *respLink) Close() { k.once.Do(func() { k.conn.Close() }) }

// dialRESP connects to the master of o, authenticates, selects the DB,
// loads the scripts and reads the server's run_id, all in one round trip
// bounded by the client's DialTimeout; then starts the reader.
func (s *Stream) dialRESP(o *redis.Options) (Link, string, error) {
	timeout := o.DialTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(s.ctx, timeout)
	defer cancel()
	network := o.Network
	if network == "" {
		network = "tcp"
	}
	// go-redis fills in Options.Dialer (its own dialer does TLS and TCP
	// keep-alives); NewDialer is the same for options that lack one.
	dial := o.Dialer
	if dial == nil {
		dial = redis.NewDialer(o)
	}
	conn, err := dial(ctx, network, o.Addr)
	if err != nil {
		return nil, "", fmt.Errorf("redlock: connecting to %s: %w", o.Addr, err)
	}
	k := &respLink{s: s, conn: conn, respWriter: respWriter{bw: bufio.NewWriterSize(conn, 32<<10)}, nt: s.cfg.NodeTimeout}
	br := bufio.NewReaderSize(conn, 32<<10)
	// Close cuts the handshake short too (the stream's context).
	stop := s.cfg.Env.AfterDone(ctx, func() { conn.Close() })
	runID, err := k.handshake(br, o, s.cfg.Env.Now().Add(timeout))
	if err == nil {
		err = k.kill(br, s.staleLink(), s.cfg.Env.Now().Add(timeout))
	}
	if !stop() && err == nil {
		err = ctx.Err()
	}
	if err != nil {
		conn.Close()
		return nil, "", fmt.Errorf("redlock: setting up the connection to %s: %w", o.Addr, err)
	}
	s.wg.Go(func() { k.read(br) })
	return k, runID, nil
}

func (k *respLink) handshake(br *bufio.Reader, o *redis.Options, deadline time.Time) (string, error) {
	k.conn.SetDeadline(deadline)
	defer k.conn.SetDeadline(time.Time{})
	var names []string
	if o.Password != "" {
		if o.Username != "" {
			k.array("AUTH", o.Username, o.Password)
		} else {
			k.array("AUTH", o.Password)
		}
		names = append(names, "AUTH")
	}
	if o.DB != 0 {
		k.array("SELECT", strconv.Itoa(o.DB))
		names = append(names, "SELECT")
	}
	p := k.s.cfg.Proto
	for _, src := range p.Scripts {
		k.array("SCRIPT", "LOAD", src)
		names = append(names, "SCRIPT LOAD")
	}
	k.array("INFO", "server")
	names = append(names, "INFO server")
	k.array("CLIENT", "ID")
	if err := k.bw.Flush(); err != nil {
		return "", err
	}
	var runID string
	for i, name := range names {
		r, err := readRaw(br, true)
		if err != nil {
			return "", err
		}
		last := i == len(names)-1
		if r.Type == '-' {
			if last && p.Refusal(name, r.Text) == nil {
				break // a server without INFO server (miniredis): no run_id to check
			}
			return "", p.setupError(name, r.Text)
		}
		if last {
			runID = runIDOf(r.Text)
		}
	}
	// CLIENT ID: a server or a user that refuses it only loses kill.
	r, err := readRaw(br, false)
	if err != nil {
		return "", err
	}
	if r.Type == ':' {
		k.id = r.N
	}
	k.runID = runID
	return runID, nil
}

// kill ends old, the connection this one replaces, on the server, before
// anything else is sent on this one: commands still travelling to the
// server on old are then dropped with it, so none can run after a later
// command sent here (a release after its SET, see docs/design.md §10).
// It needs the CLIENT KILL permission; without it the Locker warns once
// and goes on, with that guarantee lost. It does nothing when old is
// nil, or when the server is not the one old was connected to (a restart
// ended old; its client ids are reused).
func (k *respLink) kill(br *bufio.Reader, old *respLink, deadline time.Time) error {
	if old == nil || old.runID == "" || old.runID != k.runID {
		return nil
	}
	if old.id == 0 {
		k.warnNoKill("CLIENT ID denied")
		return nil
	}
	k.conn.SetDeadline(deadline)
	defer k.conn.SetDeadline(time.Time{})
	k.array("CLIENT", "KILL", "ID", strconv.FormatInt(old.id, 10))
	if err := k.bw.Flush(); err != nil {
		return err
	}
	r, err := readRaw(br, false)
	if err != nil {
		return err
	}
	if r.Type == '-' {
		k.warnNoKill(r.Text)
	}
	return nil
}

func (k *respLink) warnNoKill(why string) {
	k.s.noKill.Do(func() {
		k.s.cfg.Log.Warn("redlock: cannot end the previous connection on the server (grant +client|id +client|kill): a release sent after this reconnect may run before a SET still in flight on it", "master", k.s.cfg.Addr, "reason", why)
	})
}

// Write encodes batch and writes it in one go. The write deadline keeps a
// master that stopped reading (its socket buffer full) from holding the
// writer: the connection is then broken.
func (k *respLink) Write(batch []Command) error {
	for _, c := range batch {
		k.encode(c)
	}
	// Re-arming the deadline costs a timer update; once a second is
	// enough for a bound of seconds.
	if now := k.s.cfg.Env.Now(); now.After(k.rearm) {
		k.conn.SetWriteDeadline(now.Add(max(k.nt, time.Second) + time.Second))
		k.rearm = now.Add(time.Second)
	}
	return k.bw.Flush()
}

// encode writes c: its Args as a RESP array.
func (k *respLink) encode(c Command) {
	k.args = c.Args(k.args[:0])
	k.command(k.args)
	clear(k.args) // keep no keys or tokens alive
}

// read hands each reply to the stream until the connection fails.
func (k *respLink) read(br *bufio.Reader) {
	var now time.Time
	for {
		fresh := br.Buffered() == 0 // this reply needs a read from the socket
		r, err := readRaw(br, false)
		if err != nil {
			k.s.Broken(k, err)
			return
		}
		if fresh {
			now = k.s.cfg.Env.Now() // once per read, not per reply
		}
		k.s.Answer(k, r, now)
	}
}
