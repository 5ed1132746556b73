package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"
)

// The stall and partition scenarios: uncontended cells whose phases take
// masters away and bring them back (a phase's paused masters), by stopping
// them (stall) or cutting them off the network (partition). runCell runs
// drivePhases beside the workers of every cell; a scenario without phases
// has the one implicit phase "all", in which it does nothing.

// Stall timeline: healthy, then one master SIGSTOPped, then two, then all
// back. Ours should hold its healthy throughput in the middle phases (it
// stops waiting for a master after MasterTimeout and then skips it until it
// answers); redsync by default waits for every master's reply, i.e. for
// go-redis's 3 s ReadTimeout and its retries.
var stallPhases = []phase{
	{name: "healthy", from: 0, to: 0.2},
	{name: "1 stopped", from: 0.2, to: 0.5, paused: []int{0}},
	{name: "2 stopped", from: 0.5, to: 0.8, paused: []int{0, 1}},
	{name: "recovered", from: 0.8, to: 1},
}

// Partition timeline: the stall timeline with cuts instead of stops.
var partitionPhases = []phase{
	{name: "healthy", from: 0, to: 0.2},
	{name: "1 cut", from: 0.2, to: 0.5, paused: []int{0}},
	{name: "2 cut", from: 0.5, to: 0.8, paused: []int{0, 1}},
	{name: "recovered", from: 0.8, to: 1},
}

// fault is how a scenario takes a master away and brings it back.
type fault struct {
	stop   func(ctx context.Context, i int, for_ time.Duration) error
	resume func(i int) error
}

// fault returns the scenario's way of faulting ms's masters.
func (s scenario) fault(ms *masters) fault {
	if s.partition && ms.cut != nil {
		return fault{stop: func(_ context.Context, i int, _ time.Duration) error { return ms.cut(i) }, resume: ms.heal}
	}
	return fault{stop: ms.pause, resume: ms.resume}
}

// drivePhases stops and resumes masters at each phase's start, then waits
// for the end of the cell and resumes every master it stopped.
func drivePhases(ctx context.Context, ms *masters, f fault, phases []phase, start time.Time, d time.Duration) []error {
	var errs []error
	paused := map[int]bool{}
	defer func() {
		for _, i := range slices.Sorted(maps.Keys(paused)) {
			if err := f.resume(i); err != nil {
				errs = append(errs, fmt.Errorf("resuming master %d: %w", i, err))
			}
		}
	}()
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for pi, ph := range phases {
		if ph.from > 0 {
			timer.Reset(time.Until(start.Add(frac(d, ph.from))))
			select {
			case <-ctx.Done():
				return errs
			case <-timer.C:
			}
		}
		want := map[int]bool{}
		for _, i := range ph.paused {
			if i < ms.info.N {
				want[i] = true
			}
		}
		for _, i := range slices.Sorted(maps.Keys(paused)) {
			if !want[i] {
				delete(paused, i)
				if err := f.resume(i); err != nil {
					return append(errs, fmt.Errorf("resuming master %d: %w", i, err))
				}
			}
		}
		for _, i := range slices.Sorted(maps.Keys(want)) {
			if paused[i] {
				continue
			}
			// How long it stays stopped: through every following phase
			// that keeps it stopped.
			until := ph.to
			for _, next := range phases[pi+1:] {
				if !slices.Contains(next.paused, i) {
					break
				}
				until = next.to
			}
			if err := f.stop(ctx, i, frac(d, until-ph.from)); err != nil {
				return append(errs, fmt.Errorf("stopping master %d: %w", i, err))
			}
			paused[i] = true
		}
	}
	<-ctx.Done()
	return errs
}
