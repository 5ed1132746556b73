package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// election-failover: the leader is a child process (this binary,
// re-executed: runChildCampaigner), SIGKILLed once it leads; the other
// campaigners campaign in this process (election.go has what both
// election scenarios share).

// failover runs election-failover: -failovers rounds, each implementation
// once per round, interleaved.
func (r electionRun) failover(ctx context.Context) ([]ElectionResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this binary to re-execute as the leader: %w", err)
	}
	child, err := childMasters(r.env.masters)
	if err != nil {
		return nil, err
	}
	samples := map[string]*electionSamples{}
	for _, n := range r.impls {
		samples[n] = &electionSamples{}
	}
	for k := range r.failovers {
		for _, n := range r.order(k) {
			spec, _ := electionByName(n)
			fmt.Fprintf(r.stderr, "redlock-bench: %s × %s, round %d of %d\n", failoverScenario, n, k+1, r.failovers)
			// A round that fails (e.g. its leader cannot lead) is counted
			// and tried again, on an election of its own, a few times.
			var errs []error
			for try := range failoverTries {
				name := fmt.Sprintf("%s/e/failover/%s/%d.%d", r.runID, n, k, try)
				cs := childSpec{Impl: n, Election: name, Value: "child", TTLMs: r.env.ttl.Milliseconds(), Masters: child, Etcd: r.env.etcd}
				lat, err := failoverRound(ctx, exe, cs, spec, r.env, r.campaigners, samples[n])
				if err == nil {
					samples[n].add(lat)
					errs = nil
					break
				}
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				samples[n].fail("round_failed", err)
				fmt.Fprintf(r.stderr, "redlock-bench: %s × %s, round %d, try %d failed: %v\n", failoverScenario, n, k+1, try+1, err)
				errs = append(errs, err)
			}
			if len(errs) > 0 {
				return nil, fmt.Errorf("%s, round %d: %d tries failed: %w", n, k+1, failoverTries, errors.Join(errs...))
			}
		}
	}
	var out []ElectionResult
	for _, n := range r.impls {
		out = append(out, samples[n].result(failoverScenario, n, r.campaigners, true))
	}
	return out, nil
}

// failoverRound starts the leader as a child process, has n−1 campaigners
// of this process campaign behind it, SIGKILLs the child after a settle
// time (with jitter over a third of the TTL, so the kill falls anywhere in
// the leader's extension or keep-alive cycle), and returns the time from
// the kill to the first of them leading.
func failoverRound(ctx context.Context, exe string, spec childSpec, es electionSpec, env electionEnv, n int, s *electionSamples) (time.Duration, error) {
	leader, err := startLeader(ctx, exe, spec)
	if err != nil {
		return 0, err
	}
	defer leader.end()

	cs, err := openCampaigners(es, env, spec.Election, n-1)
	if err != nil {
		return 0, fmt.Errorf("opening %d campaigners: %w", n-1, err)
	}
	s.noteTTL(ctx, cs[0], env.ttl)
	cctx, cancel := context.WithCancel(ctx)
	won := make(chan win, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			if err := c.campaign(cctx, fmt.Sprintf("campaigner-%d", i)); err == nil {
				won <- win{i, time.Now()}
			} else if cctx.Err() == nil {
				won <- win{i: -1}
				s.fail(failureKind(err), err)
			}
		})
	}
	res, roundErr := leader.killAndTime(ctx, won, env.ttl)
	// killAndTime may return before its kill (a campaigner led first, or
	// ctx ended): end kills the leader then, and waits for it.
	leader.end()
	cancel()
	wg.Wait()
	// The winner resigns (the others' Campaign ended with cctx); then
	// every campaigner closes.
	close(won)
	closeErr := resignAndClose(ctx, cs, won)
	if roundErr != nil {
		return 0, roundErr
	}
	if closeErr != nil {
		s.notes = append(s.notes, "closing after a failover: "+closeErr.Error())
	}
	return res, nil
}

// win is a campaigner of a failover round that led, and when; i is -1
// for one whose Campaign failed.
type win struct {
	i  int
	at time.Time
}

// leaderProc is a failover round's leader: this binary, re-executed as a
// child campaigner (runChildCampaigner).
type leaderProc struct {
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	childErr *strings.Builder // the first 4 KiB of its stderr
	killed   bool
	ended    bool
}

// startLeader starts the leader process with spec and waits until it says
// it leads; on error the process is ended.
func startLeader(ctx context.Context, exe string, spec childSpec) (*leaderProc, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childCampaignerEnv+"="+string(b))
	cmd.SysProcAttr = childProcAttr()
	p := &leaderProc{cmd: cmd, childErr: &strings.Builder{}}
	cmd.Stderr = &limitedWriter{w: p.childErr, n: 4096}
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the leader process: %w", err)
	}
	if err := p.awaitLeading(ctx, stdout); err != nil {
		p.end()
		return nil, err
	}
	return p, nil
}

// awaitLeading waits for the leader's childLeadingLine on its stdout, for
// at most campaignBound.
func (p *leaderProc) awaitLeading(ctx context.Context, stdout io.Reader) error {
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		close(lines)
	}()
	select {
	case l, ok := <-lines:
		if !ok || l != childLeadingLine {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
			p.killed = true
			return fmt.Errorf("the leader process did not lead (%q): %s", l, strings.TrimSpace(p.childErr.String()))
		}
	case <-time.After(campaignBound):
		return fmt.Errorf("the leader process did not lead within %v: %s", campaignBound, strings.TrimSpace(p.childErr.String()))
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// killAndTime SIGKILLs the leader after a settle time (failoverSettleFloor
// and a third of ttl of jitter) and returns the time from the kill to the
// first campaigner on won leading. A campaigner that leads before the
// kill, or none leading in time, is an error.
func (p *leaderProc) killAndTime(ctx context.Context, won <-chan win, ttl time.Duration) (time.Duration, error) {
	settle := failoverSettleFloor + mrand.N(ttl/3+1)
	select {
	case w := <-won:
		return 0, fmt.Errorf("campaigner %d led (or failed) before the leader was killed", w.i)
	case <-time.After(settle):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	t0 := time.Now()
	if err := p.cmd.Process.Kill(); err != nil {
		return 0, fmt.Errorf("SIGKILL: %w", err)
	}
	p.killed = true
	select {
	case w := <-won:
		res := w.at.Sub(t0)
		if w.i < 0 {
			return res, errors.New("a campaigner failed after the kill (see the failures)")
		}
		return res, nil
	case <-time.After(campaignBound + 3*ttl):
		return 0, fmt.Errorf("no campaigner led within %v of the kill", campaignBound+3*ttl)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// end kills the leader unless it was killed, closes its stdin and waits
// for it; once.
func (p *leaderProc) end() {
	if p.ended {
		return
	}
	p.ended = true
	if !p.killed {
		_ = p.cmd.Process.Kill()
		p.killed = true
	}
	_ = p.stdin.Close()
	_ = p.cmd.Wait()
}

// resignAndClose has each campaigner on won (closed) that led resign, then
// closes every campaigner of cs.
func resignAndClose(ctx context.Context, cs []campaigner, won <-chan win) error {
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), electionCloseBound)
	defer rcancel()
	var errs []error
	for w := range won {
		if w.i >= 0 {
			errs = append(errs, cs[w.i].resign(rctx))
		}
	}
	errs = append(errs, closeCampaigners(cs))
	return errors.Join(errs...)
}

// limitedWriter keeps the first n bytes written to it.
type limitedWriter struct {
	mu sync.Mutex
	w  io.Writer
	n  int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n > 0 {
		k := min(len(p), l.n)
		l.n -= k
		_, _ = l.w.Write(p[:k])
	}
	return len(p), nil
}

// ---- the child campaigner ----

// childSpec is what the leader process of a failover round is given, in
// its environment (childCampaignerEnv) as JSON.
type childSpec struct {
	Impl     string        `json:"impl"`
	Election string        `json:"election"`
	Value    string        `json:"value"`
	TTLMs    int64         `json:"ttl_ms"`
	Masters  []childMaster `json:"masters"`
	Etcd     []string      `json:"etcd"`
}

// childMaster is one master's client options, as far as a child needs
// them.
type childMaster struct {
	Addr     string `json:"addr"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	DB       int    `json:"db,omitempty"`
}

// childMasters are the masters' options for a child; TLS masters are not
// supported (the CA would have to be passed along).
func childMasters(ms []*redis.Options) ([]childMaster, error) {
	out := make([]childMaster, len(ms))
	for i, o := range ms {
		if o.TLSConfig != nil {
			return nil, fmt.Errorf("%s needs masters without TLS (its leader is a child process)", failoverScenario)
		}
		out[i] = childMaster{Addr: o.Addr, Username: o.Username, Password: o.Password, DB: o.DB}
	}
	return out, nil
}

// runChildCampaigner campaigns as spec says; once leading it prints
// childLeadingLine and waits for stdin to close (or for SIGKILL, which is
// the point), then resigns.
func runChildCampaigner(specJSON string, stdin io.Reader, stdout, stderr io.Writer) int {
	var spec childSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintf(stderr, "redlock-bench campaigner: %s: %v\n", childCampaignerEnv, err)
		return 2
	}
	es, ok := electionByName(spec.Impl)
	if !ok {
		fmt.Fprintf(stderr, "redlock-bench campaigner: no election %q in this build\n", spec.Impl)
		return 2
	}
	env := electionEnv{etcd: spec.Etcd, ttl: time.Duration(spec.TTLMs) * time.Millisecond}
	for _, m := range spec.Masters {
		env.masters = append(env.masters, &redis.Options{Addr: m.Addr, Username: m.Username, Password: m.Password, DB: m.DB})
	}
	c, err := es.open(env, spec.Election)
	if err != nil {
		fmt.Fprintf(stderr, "redlock-bench campaigner: opening: %v\n", err)
		return 1
	}
	defer c.close()
	ctx, cancel := context.WithTimeout(context.Background(), campaignBound)
	defer cancel()
	if err := c.campaign(ctx, spec.Value); err != nil {
		fmt.Fprintf(stderr, "redlock-bench campaigner: campaign: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, childLeadingLine)
	_, _ = io.Copy(io.Discard, stdin)
	rctx, rcancel := context.WithTimeout(context.Background(), electionCloseBound)
	defer rcancel()
	if err := c.resign(rctx); err != nil {
		fmt.Fprintf(stderr, "redlock-bench campaigner: resign: %v\n", err)
		return 1
	}
	return 0
}
