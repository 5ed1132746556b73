package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// election-handover: -campaigners campaigners, each with clients of its
// own, campaign in a loop; the leader holds for handoverHold, then
// resigns and campaigns again (election.go has what both election
// scenarios share).

// handover runs election-handover: for each repeat, each implementation
// for -duration, interleaved.
func (r electionRun) handover(ctx context.Context) ([]ElectionResult, error) {
	samples := map[string]*electionSamples{}
	for _, n := range r.impls {
		samples[n] = &electionSamples{}
	}
	for k := range max(r.repeat, 1) {
		for _, n := range r.order(k) {
			spec, _ := electionByName(n)
			name := fmt.Sprintf("%s/e/handover/%s/%d", r.runID, n, k)
			fmt.Fprintf(r.stderr, "redlock-bench: %s × %s, %d campaigners, %v (round %d)\n", handoverScenario, n, r.campaigners, r.duration, k+1)
			if err := handoverRun(ctx, spec, r.env, name, r.campaigners, r.duration, samples[n]); err != nil {
				return nil, fmt.Errorf("%s: %w", n, err)
			}
		}
	}
	var out []ElectionResult
	for _, n := range r.impls {
		out = append(out, samples[n].result(handoverScenario, n, r.campaigners, false))
	}
	return out, nil
}

// handoverRun has n campaigners campaign in a loop for d: each, once
// leading, holds for handoverHold, resigns and campaigns again. A sample
// is from a Resign's start to the next Campaign's return (mutual exclusion
// makes that the successor).
func handoverRun(ctx context.Context, spec electionSpec, env electionEnv, name string, n int, d time.Duration, s *electionSamples) error {
	cs, err := openCampaigners(spec, env, name, n)
	if err != nil {
		return fmt.Errorf("opening %d campaigners: %w", n, err)
	}
	s.noteTTL(ctx, cs[0], env.ttl)
	start := time.Now()
	runCtx, cancel := context.WithDeadline(ctx, start.Add(d))
	defer cancel()
	var (
		lastResign atomic.Int64 // offset from start of the latest Resign's start, +1 (0: none yet)
		wg         sync.WaitGroup
	)
	for i, c := range cs {
		value := fmt.Sprintf("campaigner-%d", i)
		wg.Go(func() {
			stop := context.WithoutCancel(runCtx)
			for runCtx.Err() == nil {
				err := c.campaign(runCtx, value)
				t1 := time.Since(start)
				if err != nil {
					if runCtx.Err() == nil {
						s.fail(failureKind(err), err)
						sleepCtx(runCtx, handoverHold) // an error is not a busy loop
					}
					continue
				}
				if u := lastResign.Load(); u > 0 && runCtx.Err() == nil {
					s.add(t1 - time.Duration(u-1))
				}
				sleepCtx(runCtx, handoverHold)
				lastResign.Store(int64(time.Since(start)) + 1)
				rctx, rcancel := context.WithTimeout(stop, electionCloseBound)
				err = c.resign(rctx)
				rcancel()
				if err != nil {
					s.fail("resign_"+failureKind(err), err)
				}
			}
		})
	}
	wg.Wait()
	return closeCampaigners(cs)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
