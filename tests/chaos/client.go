package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/quorumlab/redlock/redlock"
)

// ClientConfig is one workload client. Subprocess clients receive it as
// JSON in the environment (HelperEnv).
type ClientConfig struct {
	ID        int      `json:"id"`
	Resources []string `json:"resources"`
	// HoldMin and HoldMax bound the time spent inside a critical section
	// between its two writes.
	HoldMin time.Duration `json:"hold_min"`
	HoldMax time.Duration `json:"hold_max"`
	// AcquireTimeout bounds each Lock call; a call that runs out counts
	// against availability.
	AcquireTimeout time.Duration `json:"acquire_timeout"`
	Seed           uint64        `json:"seed"`
	// Unfenced: no fencing, no writes to the resource (Workload.Unfenced).
	Unfenced bool `json:"unfenced,omitempty"`
	// Role is what the client does: "" loops over the mutex (runClient);
	// "campaign" and "observe" take part in the election called Election
	// (election.go).
	Role     string `json:"role,omitempty"`
	Election string `json:"election,omitempty"`
	// A campaigner's habits (ElectionWorkload): at most Steps fenced
	// writes a leadership, one Proclaim in ProclaimEvery leaderships, and
	// one in LapseEvery left to lapse (its Locker closed) instead of
	// resigned; 0 never.
	Steps         int `json:"steps,omitempty"`
	ProclaimEvery int `json:"proclaim_every,omitempty"`
	LapseEvery    int `json:"lapse_every,omitempty"`

	// For subprocess clients only: what to dial and for how long.
	Masters       []string      `json:"masters,omitempty"`
	ResourceDB    string        `json:"resource_db,omitempty"`
	ResourceSQL   string        `json:"resource_sql,omitempty"` // -chaos.resource postgres: its DSN
	TTL           time.Duration `json:"ttl,omitempty"`
	MasterTimeout time.Duration `json:"node_timeout,omitempty"`
	Run           time.Duration `json:"run,omitempty"`
}

// sink receives a client's records: the History in-process, JSON lines on
// stdout in a subprocess.
type sink interface {
	entered(client int)
	section(Section)
	write(Write)
	acquire(Acquire)
	// The election's records (election.go).
	publication(Publication)
	leadership(Leadership)
	step(Step)
	delivery(Delivery)
}

type historySink struct{ h *History }

func (s historySink) entered(int)               {}
func (s historySink) section(x Section)         { s.h.addSection(x) }
func (s historySink) write(w Write)             { s.h.addWrite(w) }
func (s historySink) acquire(a Acquire)         { s.h.addAcquire(a) }
func (s historySink) publication(p Publication) { s.h.addPublication(p) }
func (s historySink) leadership(l Leadership)   { s.h.addLeadership(l) }
func (s historySink) step(Step)                 {} // in-process leaders are never killed
func (s historySink) delivery(d Delivery)       { s.h.addDelivery(d) }

// line is one record a subprocess client prints.
type line struct {
	T        string       `json:"t"` // "enter", "section", "write", "acquire", "pub", "lead", "step", "delivery"
	Client   int          `json:"client"`
	Section  *Section     `json:"section,omitempty"`
	Write    *Write       `json:"write,omitempty"`
	Acquire  *Acquire     `json:"acquire,omitempty"`
	Pub      *Publication `json:"pub,omitempty"`
	Lead     *Leadership  `json:"lead,omitempty"`
	Step     *Step        `json:"step,omitempty"`
	Delivery *Delivery    `json:"delivery,omitempty"`
}

// jsonSink prints records as JSON lines. "enter" is printed the moment a
// section is entered, so the parent can SIGSTOP the client inside it.
type jsonSink struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func newJSONSink(w io.Writer) *jsonSink { return &jsonSink{enc: json.NewEncoder(w)} }

func (s *jsonSink) put(l line) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.enc.Encode(l)
}
func (s *jsonSink) entered(c int)     { s.put(line{T: "enter", Client: c}) }
func (s *jsonSink) section(x Section) { s.put(line{T: "section", Client: x.Client, Section: &x}) }
func (s *jsonSink) write(w Write)     { s.put(line{T: "write", Client: w.Client, Write: &w}) }
func (s *jsonSink) acquire(a Acquire) { s.put(line{T: "acquire", Client: a.Client, Acquire: &a}) }
func (s *jsonSink) publication(p Publication) {
	s.put(line{T: "pub", Client: p.Client, Pub: &p})
}
func (s *jsonSink) leadership(l Leadership) { s.put(line{T: "lead", Client: l.Client, Lead: &l}) }
func (s *jsonSink) step(x Step)             { s.put(line{T: "step", Client: x.Client, Step: &x}) }
func (s *jsonSink) delivery(d Delivery)     { s.put(line{T: "delivery", Client: d.Observer, Delivery: &d}) }

// writeTimeout bounds one fenced write; the resource is never faulted.
const writeTimeout = 5 * time.Second

// runClient loops acquire → critical section → release until ctx ends.
// Inside a section it writes through redlock.WriteFenced at entry, holds
// for a random time, and writes again: a holder that was paused inside the
// section (the SIGSTOP scenario) makes its second write late, with its old
// fence, and the resource must reject it.
//
// The holder checks Valid() once, at entry, as a careful client does; the
// danger the theory predicts is exactly a pause after that check.
func runClient(ctx context.Context, l *redlock.Locker, db resourceStore, cfg ClientConfig, out sink) {
	r := rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.ID)))
	for seq := int64(0); ctx.Err() == nil; {
		res := cfg.Resources[r.IntN(len(cfg.Resources))]
		hold := cfg.HoldMin
		if cfg.HoldMax > cfg.HoldMin {
			hold += time.Duration(r.Int64N(int64(cfg.HoldMax - cfg.HoldMin)))
		}
		t0, start := time.Now(), monoNow()
		actx, cancel := context.WithTimeout(ctx, cfg.AcquireTimeout)
		lk, err := l.Lock(actx, res)
		cancel()
		lat := time.Since(t0)
		if ctx.Err() != nil {
			// The run ended during Lock: neither a success nor a failure.
			if lk != nil {
				_ = lk.Unlock(context.Background())
			}
			return
		}
		out.acquire(Acquire{Client: cfg.ID, OK: err == nil, Latency: lat, Start: start})
		if err != nil {
			continue
		}
		if !lk.Valid() {
			_ = lk.Unlock(context.Background())
			continue
		}
		seq++
		enter := monoNow()
		out.entered(cfg.ID)
		if !cfg.Unfenced {
			fencedWrite(db, cfg.ID, seq, res, lk.Fence(), lk.Token(), out)
		}
		sleepCtx(ctx, hold)
		if !cfg.Unfenced {
			fencedWrite(db, cfg.ID, seq, res, lk.Fence(), lk.Token(), out)
		}
		exit := monoNow()
		out.section(Section{Client: cfg.ID, Seq: seq, Resource: res, Enter: enter, Exit: exit, Fence: lk.Fence(), Late: !lk.Valid()})
		_ = lk.Unlock(context.Background())
	}
}

func fencedWrite(db resourceStore, client int, seq int64, res string, fence uint64, owner string, out sink) {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	w := Write{Client: client, Seq: seq, Resource: res, Fence: fence, Owner: owner, Call: monoNow()}
	err := writeFenced(ctx, db, "resource:"+res, fence, owner, "client-"+strconv.Itoa(client))
	w.Return = monoNow()
	switch {
	case err == nil:
		w.Accepted = true
	case errors.Is(err, redlock.ErrStaleFence):
		w.Stale = true
	default:
		w.Err = err.Error()
	}
	out.write(w)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
