package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// CPU per acquisition: what one successful Lock (and its Unlock) cost in
// CPU, on the client (this process) and on the masters, and the masters'
// floor: the time their command handlers ran, which leaves out reading,
// parsing and writing (the event loop's own share).

// masterCPU is one reading of one master: its process CPU time (INFO cpu:
// used_cpu_user + used_cpu_sys, every thread) and the microseconds its
// command handlers have run (INFO commandstats: the sum of usec).
type masterCPU struct {
	seconds float64
	cmdUsec int64
}

// errNoCPUInfo: a master does not report its CPU time (miniredis). The
// cell then reports no CPU figures; it is not a failure.
var errNoCPUInfo = errors.New("INFO cpu not supported")

// parseInfoCPU reads used_cpu_sys and used_cpu_user from INFO cpu.
func parseInfoCPU(info string) (float64, error) {
	var sum float64
	found := 0
	for line := range strings.Lines(info) {
		name, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (name != "used_cpu_sys" && name != "used_cpu_user") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 {
			return 0, fmt.Errorf("unexpected line %q in INFO cpu", line)
		}
		sum += f
		found++
	}
	if found != 2 {
		return 0, errNoCPUInfo
	}
	return sum, nil
}

// parseCommandUsec sums the usec fields of INFO commandstats, but for
// INFO's (the bench's own readings).
func parseCommandUsec(info string) (int64, error) {
	var sum int64
	for line := range strings.Lines(info) {
		name, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" {
			continue
		}
		for f := range strings.SplitSeq(fields, ",") {
			if v, ok := strings.CutPrefix(f, "usec="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || n < 0 {
					return 0, fmt.Errorf("no usec in %q of INFO commandstats", line)
				}
				sum += n
				break
			}
		}
	}
	return sum, nil
}

// readMasterCPU reads every master's CPU time and command time at once.
func readMasterCPU(ctx context.Context, admin []*redis.Client) ([]masterCPU, error) {
	out := make([]masterCPU, len(admin))
	err := eachMaster(ctx, admin, func(ctx context.Context, i int, c *redis.Client) error {
		s, err := c.Info(ctx, "cpu").Result()
		if rerr := redis.Error(nil); errors.As(err, &rerr) {
			err = fmt.Errorf("%w (%v)", errNoCPUInfo, err)
		}
		if err == nil {
			out[i].seconds, err = parseInfoCPU(s)
		}
		if err == nil {
			s, err = c.Info(ctx, "commandstats").Result()
		}
		if err == nil {
			out[i].cmdUsec, err = parseCommandUsec(s)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// cpuWindow is the CPU a cell used: the client's (this process, every
// goroutine: the implementation's and the bench's own sampling), the
// masters' process time and their command handlers' time, summed over
// masters.
type cpuWindow struct {
	client, server, commands time.Duration
}

// cpuMeter takes the readings at both ends of a cell. With proc set (the
// masters' process: embedded) the server's reading is that process's CPU
// time, and there is no command time.
type cpuMeter struct {
	client  time.Duration
	masters []masterCPU
	proc    func(context.Context) (time.Duration, error)
	server  time.Duration // proc's reading at the start
	err     error
}

func startCPU(ctx context.Context, ms *masters) *cpuMeter {
	m := &cpuMeter{proc: ms.cpu}
	if m.proc != nil {
		m.server, m.err = m.proc(ctx)
	} else {
		m.masters, m.err = readMasterCPU(ctx, ms.admin)
	}
	if m.err == nil {
		m.client, m.err = processCPU()
	}
	return m
}

// stop returns the window since start, or an error when a reading failed
// or a master's counters went down (a restart or CONFIG RESETSTAT).
func (m *cpuMeter) stop(ctx context.Context, admin []*redis.Client) (cpuWindow, error) {
	if m.err != nil {
		return cpuWindow{}, m.err
	}
	client, err := processCPU()
	if err != nil {
		return cpuWindow{}, err
	}
	if m.proc != nil {
		server, err := m.proc(ctx)
		if err != nil {
			return cpuWindow{}, err
		}
		return cpuWindow{client: client - m.client, server: server - m.server}, nil
	}
	after, err := readMasterCPU(ctx, admin)
	if err != nil {
		return cpuWindow{}, err
	}
	w := cpuWindow{client: client - m.client}
	for i := range after {
		ds, dc := after[i].seconds-m.masters[i].seconds, after[i].cmdUsec-m.masters[i].cmdUsec
		if ds < 0 || dc < 0 {
			return cpuWindow{}, fmt.Errorf("master %d: CPU counters went down during the cell", i)
		}
		w.server += time.Duration(ds * float64(time.Second))
		w.commands += time.Duration(dc) * time.Microsecond
	}
	return w, nil
}

// setCPU fills the CPU per successful Lock.
func (r *Result) setCPU(w cpuWindow) {
	n := r.AcquireMs.Count
	if n == 0 {
		return
	}
	per := func(d time.Duration) *float64 {
		v := float64(d) / float64(time.Microsecond) / float64(n)
		return &v
	}
	r.ClientCPUUsPerAcquisition = per(w.client)
	r.ServerCPUUsPerAcquisition = per(w.server)
	r.ServerCommandUsPerAcquisition = per(w.commands)
}
