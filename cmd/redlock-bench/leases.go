package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/quorumlab/redlock/redlock"
)

// The leases scenario (only when named): one Locker keeps -leases leases
// with Lock and Keep for -duration, and the bench reports what keeping them costs
// the client. It is not a throughput cell, so it has its own table.

// leasesResult is what the leases scenario measured.
type leasesResult struct {
	Leases          int
	TTL             time.Duration
	Acquire         time.Duration // to take every lease
	HeapPerLease    float64       // bytes: live heap after GC with the leases kept, minus before, per lease
	Goroutines      int           // runtime.NumGoroutine while kept (the whole process)
	GoroutinesEmpty int           // before any lease
	CPUCores        float64       // client CPU (getrusage, user+system) over the window, per second of wall time
	CallsPerS       float64       // commands written to master 0 over the window, per second (one per extension, or per batch of them)
	ExtensionsPerS  float64       // keys master 0 PEXPIREd over the window, per second (INFO commandstats; 0 if unknown)
	Lost            int           // leases whose Held reported a loss
	Release         time.Duration // to unlock every lease
}

// runLeases takes n leases on resources lease-0 … lease-(n−1), keeps them
// for d, and releases them.
func runLeases(ctx context.Context, ms *masters, n int, ttl, d time.Duration, stderr io.Writer) (res leasesResult, err error) {
	res = leasesResult{Leases: n, TTL: ttl}
	o, err := openOurs(ms.opts, redlock.Options{TTL: ttl, KeyPrefix: keyPrefix})
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, o.close()) }()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	res.GoroutinesEmpty = runtime.NumGoroutine()

	hs := make([]*redlock.Lock, n)
	began := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, 64)
	for w := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				h, err := o.l.Lock(ctx, fmt.Sprintf("lease-%d", i))
				if err == nil {
					if err = h.Keep(); err != nil {
						h.Unlock(context.Background())
					}
				}
				if err != nil {
					errs[w] = fmt.Errorf("lease %d: %w", i, err)
					return
				}
				hs[i] = h
			}
		}()
	}
	wg.Wait()
	res.Acquire = time.Since(began)
	defer func() {
		began := time.Now()
		for _, h := range hs {
			if h != nil {
				h.Unlock(context.Background())
			}
		}
		res.Release = time.Since(began)
	}()
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	fmt.Fprintf(stderr, "leases: %d taken in %v; keeping them for %v\n", n, res.Acquire.Round(time.Millisecond), d)

	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	res.HeapPerLease = (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(n)
	res.Goroutines = runtime.NumGoroutine()

	p0 := pexpires(ctx, o)
	w0, c0, t0 := o.l.Stats()[0].Written, cpuTime(), time.Now()
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return res, ctx.Err()
	}
	w1, c1, wall := o.l.Stats()[0].Written, cpuTime(), time.Since(t0)
	res.Goroutines = max(res.Goroutines, runtime.NumGoroutine())
	res.CPUCores = (c1 - c0).Seconds() / wall.Seconds()
	res.CallsPerS = float64(w1-w0) / wall.Seconds()
	if p1 := pexpires(ctx, o); p0 >= 0 && p1 >= p0 {
		res.ExtensionsPerS = float64(p1-p0) / wall.Seconds()
	}
	for _, h := range hs {
		if h.Err() != nil {
			res.Lost++
		}
	}
	return res, nil
}

// pexpires is how many PEXPIRE master 0 has executed, scripts' included
// (INFO commandstats), or −1 when it cannot tell.
func pexpires(ctx context.Context, o *ours) int64 {
	if len(o.clients) == 0 {
		return -1
	}
	info, err := o.clients[0].Info(ctx, "commandstats").Result()
	if err != nil {
		return -1
	}
	counts, err := parseCommandstats(info)
	if err != nil {
		return -1
	}
	return counts["pexpire"]
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// renderLeases prints the leases scenario's result.
func renderLeases(w io.Writer, r leasesResult, masters string) error {
	_, err := fmt.Fprintf(w, `leases: one Locker keeping %d leases with Lock and Keep (TTL %v) on %s
  taken in          %v
  heap per lease    %.0f B (live heap after GC, minus before any lease)
  goroutines        %d kept (%d before any lease; whole process)
  client CPU        %.3f cores (getrusage user+system over the window)
  extensions/s      %.0f (keys master 0 PEXPIREd, INFO commandstats)
  calls/s           %.0f (commands written to master 0)
  leases lost       %d
  released in       %v
`, r.Leases, r.TTL, masters, r.Acquire.Round(time.Millisecond), r.HeapPerLease, r.Goroutines, r.GoroutinesEmpty,
		r.CPUCores, r.ExtensionsPerS, r.CallsPerS, r.Lost, r.Release.Round(time.Millisecond))
	return err
}
