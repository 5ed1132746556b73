package redlock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/quorumlab/redlock/driver"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"
	noopmetric "go.opentelemetry.io/otel/metric/noop"
)

// The checks here decide what a call refuses, or how New builds a
// Locker, before any round: they need no master, so they run in make
// mutate's fast set (scripts/mutate.sh) beside the simulator. Each names
// the mutant of gremlins' that lived without it.

// offlineLocker is a Locker over n go-redis clients of addresses nobody
// listens on (New contacts nothing). Closed at the test's end.
func offlineLocker(t *testing.T, n int, o *Options) *Locker {
	t.Helper()
	clients := make([]redis.UniversalClient, n)
	for i := range clients {
		clients[i] = redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", 1+i), MaxRetries: -1})
	}
	l, err := New(clients, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		l.Close()
		for _, c := range clients {
			c.Close()
		}
	})
	return l
}

// A value of exactly the limit is taken; one byte more is ErrInvalid,
// for Campaign and Proclaim alike (election.go: `len(value) >
// maxValueLen` made `>=` lived). Proclaim's context is checked, and an
// Election that does not lead is told so (ErrLost) without a round.
func TestMutateElectionValueLimitAndNotLeading(t *testing.T) {
	l := offlineLocker(t, 3, &Options{Fencing: true})
	e, err := l.Election("e")
	if err != nil {
		t.Fatal(err)
	}
	at, over := strings.Repeat("v", maxValueLen), strings.Repeat("v", maxValueLen+1)
	ctx := t.Context()
	if err := e.Proclaim(ctx, at); !errors.Is(err, ErrLost) || errors.Is(err, ErrInvalid) {
		t.Errorf("Proclaim of a %d-byte value by a non-leader: %v, want ErrLost", maxValueLen, err)
	}
	if err := e.Proclaim(ctx, over); !errors.Is(err, ErrInvalid) {
		t.Errorf("Proclaim of a %d-byte value: %v, want ErrInvalid", maxValueLen+1, err)
	}
	if err := e.Proclaim(nil, at); !errors.Is(err, ErrInvalid) { //nolint:staticcheck // a nil context is the point
		t.Errorf("Proclaim with a nil context: %v, want ErrInvalid", err)
	}
	if _, err := e.Campaign(ctx, over); !errors.Is(err, ErrInvalid) {
		t.Errorf("Campaign with a %d-byte value: %v, want ErrInvalid", maxValueLen+1, err)
	}
	// A canceled context: the wait ends before a round. It names no lock
	// given back, for none was taken.
	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err = e.Campaign(done, at)
	if err == nil || errors.Is(err, ErrInvalid) || strings.Contains(err.Error(), "given back") {
		t.Errorf("Campaign of a %d-byte value, context canceled: %v, want its wait's end and no give-back", maxValueLen, err)
	}
	l.Close()
	if _, err := e.Campaign(ctx, at); !errors.Is(err, ErrClosed) {
		t.Errorf("Campaign after Close: %v, want ErrClosed", err)
	}
}

// fakeMaster is a driver.Master on the client path that answers nothing.
type fakeMaster struct{ addr string }

func (f *fakeMaster) Do(ctx context.Context, cmds [][]string) ([]driver.Reply, error) {
	return nil, errors.New("fakeMaster: no server")
}
func (f *fakeMaster) Addr() string { return f.addr }

// NewMasters refuses two masters of the client path with one address,
// and takes two with none (locker.go: the conditions of New's check for
// one server under two names lived negated).
func TestMutateNewMastersSameAddress(t *testing.T) {
	l, err := NewMasters([]driver.Master{&fakeMaster{"h:1"}, &fakeMaster{""}, &fakeMaster{""}}, nil)
	if err != nil {
		t.Fatalf("two masters without an address: %v, want a Locker", err)
	}
	l.Close()
	if _, err := NewMasters([]driver.Master{&fakeMaster{"h:1"}, &fakeMaster{"H:01"}, &fakeMaster{"h:2"}}, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("two masters named h:1 and H:01: %v, want ErrInvalid", err)
	}
}

// New warns, once, about fewer than three masters or an even number of
// them, and not about three or five (locker.go's warnMasterCount: its
// conditions lived mutated).
func TestMutateNewWarnsAboutMasterCount(t *testing.T) {
	for n, warn := range map[int]bool{1: true, 2: true, 3: false, 4: true, 5: false} {
		var buf bytes.Buffer
		offlineLocker(t, n, &Options{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
		if got := strings.Contains(buf.String(), "master"); got != warn {
			t.Errorf("%d masters: warned %v (%q), want %v", n, got, buf.String(), warn)
		}
	}
}

// failingMeter fails to create counters, as a broken meter provider can.
type failingMeter struct{ noopmetric.Meter }

func (failingMeter) Int64Counter(string, ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return nil, errors.New("failingMeter: no counters")
}

type failingMeterProvider struct{ noopmetric.MeterProvider }

func (failingMeterProvider) Meter(string, ...metric.MeterOption) metric.Meter { return failingMeter{} }

// New returns the error of a meter provider that cannot create the
// Locker's instruments, and no Locker (locker.go: `err != nil` after
// newTelemetry lived negated).
func TestMutateNewReturnsTelemetryErrors(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	l, err := New([]redis.UniversalClient{c}, &Options{MeterProvider: failingMeterProvider{}})
	if err == nil || l != nil {
		t.Fatalf("New with a failing meter provider: %v, %v; want an error and no Locker", l, err)
	}
}
