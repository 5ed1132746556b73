package transport

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/internal/slot"
	"github.com/quorumlab/redlock/quorum"
)

// Masters that are Redis Clusters. A *redis.ClusterClient master (without
// Options.ViaClient) is reached through a shardSet: one stream per shard
// master node, each a fast-path connection of its own with its own
// breaker, and a slot table that sends each command to the stream of the
// shard that owns its key's slot. A stalled shard therefore makes only the
// keys in its slots see the master as not answering; the other shards'
// keys go on as before. The quorum is still counted per master (cluster):
// a shard is part of its master, never a master of its own.
//
// The lock key and its fence counter share a hash tag ("<prefix>{R}" and
// "<prefix>{R}:fence"), so both are on one shard and every command for a
// resource goes to that shard's stream, in order: a release still follows
// the SET it cleans up on one connection.
//
// The slot table comes from CLUSTER SLOTS (or ClusterOptions.ClusterSlots
// when set), fetched on first use by a goroutine of the shardSet; commands
// submitted before it arrives wait for it, in order, and fail with the
// reason when it cannot be fetched. A MOVED or ASK reply fails its command
// (it is never retried on another node: that could reorder a SET and its
// release) and has the table fetched again before the next command; a
// failed connection to a shard does too.

// numSlots is the number of hash slots of a Redis Cluster.
const numSlots = slot.Count

// KeySlot returns key's Redis Cluster hash slot, by which a command goes
// to its shard (package internal/slot, which the lab uses too).
func KeySlot(key string) uint16 { return slot.Of(key) }

// shardSet is master i when it is a Redis Cluster: one stream per shard.
type shardSet struct {
	cfg    *Config
	seeds  []string
	node   redis.Options // for every node, Addr aside
	giveUp time.Duration
	slots  func(context.Context) ([]redis.ClusterSlot, error) // ClusterOptions.ClusterSlots
	ctx    context.Context                                    // ends with close
	cancel context.CancelFunc

	table atomic.Pointer[slotTable] // nil until the first fetch succeeded
	stale atomic.Bool               // a MOVED/ASK or a failed dial: fetch again

	mu       sync.Mutex
	nodes    map[string]*Stream // by address; never removed before close
	order    []string           // nodes' addresses, as first seen
	pending  []Command          // submitted before the first table
	fetching bool
	failedAt time.Time // last failed first fetch
	tried    bool      // the first fetch has ended
	invalid  error
	closed   bool
	wg       sync.WaitGroup
}

// slotTable maps each slot to the stream of the shard that owns it.
type slotTable struct {
	owner   [numSlots]uint16 // index into streams, or unowned
	streams []*Stream
	addrs   []string
}

const unowned = 0xFFFF

func newShardSet(cfg *Config, cc *redis.ClusterClient, node *redis.Options) *shardSet {
	co := cc.Options()
	ss := &shardSet{cfg: cfg, seeds: append([]string(nil), co.Addrs...), node: *node, slots: co.ClusterSlots, nodes: map[string]*Stream{}}
	ss.ctx, ss.cancel = context.WithCancel(context.Background())
	// ClusterOptions after go-redis's defaults: 0 is no timeout.
	if rt := node.ReadTimeout; rt > 0 {
		ss.giveUp = max(rt, cfg.NodeTimeout)
	}
	return ss
}

// Submit sends c to the stream of the shard owning c's key's slot. Before
// the first table, c waits for it (in order with the others waiting).
func (ss *shardSet) Submit(c Command, now time.Time) Submitted {
	if t := ss.table.Load(); t != nil && !ss.stale.Load() {
		return t.route(c, now)
	}
	ss.mu.Lock()
	if ss.closed || ss.invalid != nil {
		ss.mu.Unlock()
		return Refused
	}
	t := ss.table.Load()
	if t == nil {
		// Like a failed dial: skipped for MasterTimeout after a failed fetch.
		if !ss.fetching && !ss.failedAt.IsZero() && now.Sub(ss.failedAt) < ss.cfg.NodeTimeout {
			ss.mu.Unlock()
			return Refused
		}
		ss.pending = append(ss.pending, c)
		ss.fetchLocked()
		ss.mu.Unlock()
		return Sent
	}
	if ss.stale.Load() {
		ss.fetchLocked() // in the background; meanwhile the table we have
	}
	ss.mu.Unlock()
	return t.route(c, now)
}

// SkipError is the set's own invalid error, else the first of its shards,
// else ErrUnavailable.
func (ss *shardSet) SkipError() error {
	ss.mu.Lock()
	invalid, nodes := ss.invalid, make([]*Stream, 0, len(ss.order))
	for _, a := range ss.order {
		nodes = append(nodes, ss.nodes[a])
	}
	ss.mu.Unlock()
	if invalid != nil {
		return invalid
	}
	for _, s := range nodes {
		if err := s.SkipError(); !errors.Is(err, quorum.ErrUnavailable) {
			return err
		}
	}
	return quorum.ErrUnavailable
}

func (t *slotTable) route(c Command, now time.Time) Submitted {
	k := t.owner[KeySlot(c.Key())]
	if k == unowned {
		return Refused // no shard serves the slot: nothing was ever sent there
	}
	return t.streams[k].Submit(c, now)
}

// fetchLocked starts fetching the slot table, unless a fetch is running.
func (ss *shardSet) fetchLocked() {
	if ss.fetching || ss.closed {
		return
	}
	ss.fetching = true
	ss.stale.Store(false)
	ss.wg.Go(ss.refresh)
}

// refresh fetches the slot table, opens streams to new shard nodes, and
// sends what waited for the first table.
func (ss *shardSet) refresh() {
	slots, err := ss.fetch()
	var ids []string
	if err == nil {
		ids, err = checkSlots(slots)
	}
	for _, id := range ids {
		if err == nil {
			err = ss.cfg.IDs.Claim(ss.cfg.Master, id, true)
		}
	}
	now := ss.cfg.Env.Now()
	ss.mu.Lock()
	ss.fetching = false
	first := !ss.tried
	ss.tried = true
	if err != nil && ss.cfg.Proto.Invalid(err) {
		ss.invalid = err
	}
	if err != nil || ss.closed {
		failed := ss.pending
		ss.pending = nil
		if err != nil && ss.table.Load() == nil {
			ss.failedAt = now
		}
		ss.mu.Unlock()
		if first {
			ss.cfg.Tried.Add(1)
		}
		if err == nil {
			err = errClosedSet
		}
		// What waited for the first table was never sent anywhere: its
		// releases have nothing to clean up.
		rep := quorum.Reply{Outcome: quorum.Failed, Err: err}
		for _, c := range failed {
			c.Done(rep, now)
		}
		return
	}
	t := ss.buildLocked(slots)
	ss.failedAt = time.Time{}
	// In order, before the table is published: nothing submitted later
	// can overtake them.
	for _, c := range ss.pending {
		if t.route(c, now) == Refused {
			c.Done(quorum.Reply{Outcome: quorum.Unavailable, Err: quorum.ErrUnavailable}, now)
		}
	}
	clear(ss.pending)
	ss.pending = nil
	ss.table.Store(t)
	ss.mu.Unlock()
	if first {
		ss.cfg.Tried.Add(1)
	}
}

var errClosedSet = errors.New("redlock: the Locker is closed")

// checkSlots validates a CLUSTER SLOTS answer and returns the shard
// masters' node ids.
func checkSlots(slots []redis.ClusterSlot) ([]string, error) {
	if len(slots) == 0 {
		return nil, errors.New("redlock: CLUSTER SLOTS: no slot is served (is the cluster set up?)")
	}
	var ids []string
	for _, s := range slots {
		if s.Start < 0 || s.End >= numSlots || s.Start > s.End || len(s.Nodes) == 0 || s.Nodes[0].Addr == "" {
			return nil, fmt.Errorf("redlock: CLUSTER SLOTS: bad range %d-%d with %d nodes", s.Start, s.End, len(s.Nodes))
		}
		ids = append(ids, s.Nodes[0].ID)
	}
	return ids, nil
}

// buildLocked makes the table for slots, opening a stream for each shard
// master not seen before.
func (ss *shardSet) buildLocked(slots []redis.ClusterSlot) *slotTable {
	t := &slotTable{}
	for k := range t.owner {
		t.owner[k] = unowned
	}
	index := map[string]uint16{}
	for _, s := range slots {
		addr := s.Nodes[0].Addr // the master; the rest are replicas
		k, ok := index[addr]
		if !ok {
			k = uint16(len(t.streams))
			index[addr] = k
			t.streams = append(t.streams, ss.streamLocked(addr))
			t.addrs = append(t.addrs, addr)
		}
		for slot := s.Start; slot <= s.End; slot++ {
			t.owner[slot] = k
		}
	}
	return t
}

// streamLocked returns the stream to the shard master at addr, opening
// one if needed.
func (ss *shardSet) streamLocked(addr string) *Stream {
	if s, ok := ss.nodes[addr]; ok {
		return s
	}
	o := ss.node
	o.Addr = addr
	var s *Stream
	dial := func() (Link, string, error) {
		ln, runID, err := s.dialRESP(&o)
		if err != nil {
			ss.stale.Store(true) // the shard may have moved
		}
		return ln, runID, err
	}
	s = NewStream(ss.cfg, dial, ss.giveUp)
	s.mu.Lock()
	s.shard, s.onRedirect = true, func() { ss.stale.Store(true) }
	s.mu.Unlock()
	ss.nodes[addr] = s
	ss.order = append(ss.order, addr)
	return s
}

// fetch asks for the slot table: ClusterOptions.ClusterSlots when set,
// else CLUSTER SLOTS on every seed and known node at once, the first
// answer winning. It is bounded by the DialTimeout (5 s when unset).
func (ss *shardSet) fetch() ([]redis.ClusterSlot, error) {
	timeout := ss.node.DialTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ss.ctx, timeout)
	defer cancel()
	if ss.slots != nil {
		return ss.slots(ctx)
	}
	ss.mu.Lock()
	addrs := append(append([]string(nil), ss.order...), ss.seeds...)
	ss.mu.Unlock()
	seen := map[string]bool{}
	type answer struct {
		slots []redis.ClusterSlot
		err   error
	}
	answers := make(chan answer, len(addrs))
	var wg sync.WaitGroup
	for _, a := range addrs {
		if seen[a] {
			continue
		}
		seen[a] = true
		o := ss.node
		o.Addr, o.ContextTimeoutEnabled, o.MaxRetries, o.PoolSize, o.DisableIdentity = a, true, -1, 1, true
		o.ReadTimeout = 0
		wg.Go(func() {
			c := redis.NewClient(&o)
			defer c.Close()
			s, err := c.ClusterSlots(ctx).Result()
			if err != nil {
				err = fmt.Errorf("%s: %w", a, err)
			}
			answers <- answer{s, err}
		})
	}
	var errs []error
	var slots []redis.ClusterSlot
	for range seen {
		a := <-answers
		if a.err == nil {
			slots = a.slots
			cancel() // the others give up
			break
		}
		errs = append(errs, a.err)
	}
	wg.Wait()
	if slots != nil {
		return slots, nil
	}
	return nil, fmt.Errorf("redlock: CLUSTER SLOTS on master %d: %w", ss.cfg.Master, errors.Join(errs...))
}

// Stats sums the shards: Skipped while any shard is skipped (part of the
// key space is not being sent to), with each shard's own stats in Shards.
func (ss *shardSet) Stats() Stats {
	ss.mu.Lock()
	st := Stats{Addr: ss.cfg.Addr}
	if ss.table.Load() == nil && !ss.failedAt.IsZero() && ss.cfg.Env.Now().Sub(ss.failedAt) < ss.cfg.NodeTimeout {
		st.Skipped = true
	}
	addrs := append([]string(nil), ss.order...)
	streams := make([]*Stream, len(addrs))
	for k, a := range addrs {
		streams[k] = ss.nodes[a]
	}
	ss.mu.Unlock()
	for k, s := range streams {
		sh := s.Stats()
		sh.Addr = addrs[k]
		st.Skipped = st.Skipped || sh.Skipped
		st.Deferred += sh.Deferred
		st.Dropped += sh.Dropped
		st.Written += sh.Written
		st.Shards = append(st.Shards, sh)
	}
	return st
}

// Close stops fetching, drops what waits for the first table, and closes
// every shard's stream.
func (ss *shardSet) Close() {
	ss.mu.Lock()
	if ss.closed {
		ss.mu.Unlock()
		return
	}
	ss.closed = true
	ss.mu.Unlock()
	ss.cancel()
	ss.wg.Wait()
	ss.mu.Lock()
	streams := make([]*Stream, 0, len(ss.nodes))
	for _, a := range ss.order {
		streams = append(streams, ss.nodes[a])
	}
	ss.mu.Unlock()
	for _, s := range streams {
		s.Close()
	}
}
