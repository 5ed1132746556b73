package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// What the masters did during a cell, read through the admin clients:
// the commands they executed (INFO commandstats, before the workers start
// and after the implementation is closed) and their PING round trip.

// errNoCommandstats: a master does not report INFO commandstats (miniredis
// answers INFO commandstats with an error). The cell then reports no
// command counts; it is not a failure.
var errNoCommandstats = errors.New("INFO commandstats not supported")

// benchOwnCommands are commands that only the bench sends inside a cell's
// window, never an implementation: they are left out of the counts.
// CLIENT PAUSE stops -addrs masters in the stall scenario (the connection
// that sends it also says HELLO and CLIENT SETINFO, a handful per stop,
// which stay in).
var benchOwnCommands = map[string]bool{"client|pause": true}

// commandCounts is calls by command name on one master, as INFO
// commandstats names them ("set", "evalsha", "client|setinfo").
type commandCounts map[string]int64

// parseCommandstats reads the reply to INFO commandstats: lines
// "cmdstat_<name>:calls=<n>,usec=...". A reply without any cmdstat line is
// valid (a master that has executed nothing since its start or CONFIG
// RESETSTAT), and readCommandWindow tells it from an unsupported section.
func parseCommandstats(info string) (commandCounts, error) {
	out := commandCounts{}
	for line := range strings.Lines(info) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		rest, ok := strings.CutPrefix(line, "cmdstat_")
		if !ok {
			return nil, fmt.Errorf("unexpected line %q in INFO commandstats", line)
		}
		name, fields, ok := strings.Cut(rest, ":")
		if !ok || name == "" {
			return nil, fmt.Errorf("unexpected line %q in INFO commandstats", line)
		}
		var calls string
		for f := range strings.SplitSeq(fields, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				calls = v
				break
			}
		}
		n, err := strconv.ParseInt(calls, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("no call count in %q of INFO commandstats", line)
		}
		out[strings.ToLower(name)] += n
	}
	return out, nil
}

// statsBound caps one reading of every master; a master that does not
// answer makes the counts unknown rather than hang the run.
const statsBound = 5 * time.Second

// readCommandstats reads INFO commandstats on every master at once. It
// returns errNoCommandstats (wrapped) when a master answers with an error
// reply: the section is not supported there.
func readCommandstats(ctx context.Context, admin []*redis.Client) ([]commandCounts, error) {
	out := make([]commandCounts, len(admin))
	err := eachMaster(ctx, admin, func(ctx context.Context, i int, c *redis.Client) error {
		s, err := c.Info(ctx, "commandstats").Result()
		var rerr redis.Error
		switch {
		case errors.As(err, &rerr):
			return fmt.Errorf("%w (%v)", errNoCommandstats, err)
		case err != nil:
			return fmt.Errorf("INFO commandstats: %w", err)
		}
		out[i], err = parseCommandstats(s)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// eachMaster runs read on every master at once, within statsBound, and
// returns the errors joined, each naming its master.
func eachMaster(ctx context.Context, admin []*redis.Client, read func(ctx context.Context, i int, c *redis.Client) error) error {
	ctx, cancel := context.WithTimeout(ctx, statsBound)
	defer cancel()
	errs := make([]error, len(admin))
	var wg sync.WaitGroup
	for i, c := range admin {
		wg.Go(func() {
			if err := read(ctx, i, c); err != nil {
				errs[i] = fmt.Errorf("master %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// commandWindow is what the masters executed between two readings, summed
// over masters, without the bench's own commands.
type commandWindow struct {
	total  int64
	byName map[string]int64 // only names with calls
}

// diffCommandstats returns after − before, without the bench's own
// commands. A master counts a command once it has executed it, so the
// first reading's INFO is in the second reading and the second's is not:
// one "info" per master is the bench's. It returns errNoCommandstats
// (wrapped) when a master's second reading does not show that INFO (the
// section is empty where it is not supported), and an error when a count
// went down (the counters were reset, e.g. CONFIG RESETSTAT or a restart).
func diffCommandstats(before, after []commandCounts) (commandWindow, error) {
	w := commandWindow{byName: map[string]int64{}}
	if len(before) != len(after) {
		return w, fmt.Errorf("readings of %d and %d masters", len(before), len(after))
	}
	for i := range after {
		if after[i]["info"] < before[i]["info"]+1 {
			return w, fmt.Errorf("master %d: %w (the bench's INFO is not counted)", i, errNoCommandstats)
		}
		for _, name := range slices.Sorted(maps.Keys(after[i])) {
			d := after[i][name] - before[i][name]
			if name == "info" {
				d-- // the first reading
			}
			if d < 0 {
				return w, fmt.Errorf("master %d: %s calls went from %d to %d: the counters were reset during the cell",
					i, name, before[i][name], after[i][name])
			}
			if d == 0 || benchOwnCommands[name] {
				continue
			}
			w.byName[name] += d
			w.total += d
		}
		for name, n := range before[i] {
			if _, ok := after[i][name]; !ok && n > 0 {
				return w, fmt.Errorf("master %d: %s calls went from %d to none: the counters were reset during the cell", i, name, n)
			}
		}
	}
	return w, nil
}

// pingRounds is how many PINGs measure a master's round trip, after
// pingWarmUp unmeasured ones.
const (
	pingWarmUp = 20
	pingRounds = 200
)

// pingSamples are PING round trips per master. A cell measures them just
// before its window and again just after it, so the median reflects the
// machine's load on both sides of the cell.
type pingSamples [][]time.Duration

// measure sends sequential PINGs to each master in turn, on one connection
// of its admin client held for the purpose, and adds pingRounds round
// trips per master. Masters are measured one after another so they do not
// compete for the CPU with each other. A master that fails adds nothing.
func (p pingSamples) measure(ctx context.Context, admin []*redis.Client) error {
	for i, c := range admin {
		rtt, err := pingRTTs(ctx, c)
		if err != nil {
			return fmt.Errorf("master %d: PING: %w", i, err)
		}
		p[i] = append(p[i], rtt...)
	}
	return nil
}

// medians returns each master's median round trip in milliseconds, nil
// unless every master has samples.
func (p pingSamples) medians() []float64 {
	if len(p) == 0 {
		return nil
	}
	out := make([]float64, len(p))
	for i, s := range p {
		if len(s) == 0 {
			return nil
		}
		out[i] = percentile(durationsMs(s), 50)
	}
	return out
}

func pingRTTs(ctx context.Context, c *redis.Client) ([]time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, statsBound)
	defer cancel()
	conn := c.Conn()
	defer conn.Close()
	for range pingWarmUp {
		if err := conn.Ping(ctx).Err(); err != nil {
			return nil, err
		}
	}
	rtt := make([]time.Duration, pingRounds)
	for i := range rtt {
		t0 := time.Now()
		if err := conn.Ping(ctx).Err(); err != nil {
			return nil, err
		}
		rtt[i] = time.Since(t0)
	}
	return rtt, nil
}

// setMasterStats fills the masters' side of a result: the PING round trip
// (rtt per master, nil when not measured) and the commands (nil when not
// counted).
func (r *Result) setMasterStats(rtt []float64, cmds *commandWindow) {
	if len(rtt) > 0 {
		sorted := slices.Sorted(slices.Values(rtt))
		med := percentile(sorted, 50)
		r.PingRTTMs, r.PingRTTPerMasterMs = &med, rtt
	}
	if cmds != nil {
		total := cmds.total
		r.Commands, r.CommandsByName = &total, cmds.byName
		if r.AcquireMs.Count > 0 {
			per := float64(total) / float64(r.AcquireMs.Count)
			r.CommandsPerAcquisition = &per
		}
	}
}

// loadedPingEvery is how often, during a cell, each master is PINGed to
// read its round trip under the cell's own load.
const loadedPingEvery = 10 * time.Millisecond

// loadedPings samples every master's PING round trip during the cell's
// window, on the same machine and under the same load as the lock
// traffic (the idle round trip before and after the cell is much shorter
// on a busy machine: it leaves out the scheduling delays every lock
// command meets). One connection and one goroutine per master, one PING
// every loadedPingEvery. The PINGs it sends are taken out of the cell's
// command counts.
type loadedPings struct {
	conns   []*redis.Conn
	samples pingSamples
	sent    atomic.Int64
	wg      sync.WaitGroup
}

// openLoadedPings dials one connection per master and PINGs it once, so
// that dialling is done before the cell's commands are counted.
func openLoadedPings(ctx context.Context, admin []*redis.Client) (*loadedPings, error) {
	p := &loadedPings{samples: make(pingSamples, len(admin))}
	ctx, cancel := context.WithTimeout(ctx, statsBound)
	defer cancel()
	for i, c := range admin {
		conn := c.Conn()
		p.conns = append(p.conns, conn)
		if err := conn.Ping(ctx).Err(); err != nil {
			p.close()
			return nil, fmt.Errorf("master %d: PING: %w", i, err)
		}
	}
	return p, nil
}

// run samples until ctx ends; wait joins it.
func (p *loadedPings) run(ctx context.Context) {
	for i, conn := range p.conns {
		p.wg.Go(func() {
			t := time.NewTicker(loadedPingEvery)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statsBound)
				t0 := time.Now()
				err := conn.Ping(pctx).Err()
				d := time.Since(t0)
				cancel()
				p.sent.Add(1)
				if err == nil {
					p.samples[i] = append(p.samples[i], d)
				}
			}
		})
	}
}

func (p *loadedPings) wait() { p.wg.Wait() }

func (p *loadedPings) close() {
	for _, c := range p.conns {
		c.Close()
	}
}

// median is the median over masters of each master's median, in ms; nil
// unless every master has samples.
func (p *loadedPings) median() *float64 {
	m := p.samples.medians()
	if m == nil {
		return nil
	}
	med := percentile(slices.Sorted(slices.Values(m)), 50)
	return &med
}

// discount takes the sampler's PINGs out of w.
func (p *loadedPings) discount(w *commandWindow) {
	n := min(p.sent.Load(), w.byName["ping"])
	w.byName["ping"] -= n
	if w.byName["ping"] == 0 {
		delete(w.byName, "ping")
	}
	w.total -= n
}
