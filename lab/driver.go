package lab

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Driver runs masters for a backend that lives outside this package: the
// Docker backend is module github.com/quorumlab/redlock/labdocker, kept
// apart so that an importer of redlock never loads testcontainers-go.
// Indices are range-checked by Masters; methods may be called concurrently
// for different masters.
type Driver interface {
	// Start launches master i and returns its address once it answers.
	Start(ctx context.Context, i int) (addr string, err error)
	Pause(i int) error
	Resume(i int) error
	// Kill stops master i for good; a no-op if it is down.
	Kill(i int) error
	// Restart starts master i again on the same address with empty data
	// (keep: with what it persisted; a driver may refuse).
	Restart(ctx context.Context, i int, keep bool) error
	// Cut and Heal partition master i from its clients and end it.
	Cut(i int) error
	Heal(i int) error
	// Close removes every master and whatever the driver created.
	Close() error
}

// NewDriver makes the Driver for a Masters of n masters; Options.NewDriver.
type NewDriver func(ctx context.Context, n int, o Options) (Driver, error)

// driverBackend adapts a Driver to the package's backend.
type driverBackend struct{ d Driver }

var (
	_ backend = driverBackend{}
	_ cutter  = driverBackend{}
)

func (b driverBackend) start(ctx context.Context, i int) (string, error) { return b.d.Start(ctx, i) }
func (b driverBackend) pause(i int) error                                { return b.d.Pause(i) }
func (b driverBackend) resume(i int) error                               { return b.d.Resume(i) }
func (b driverBackend) kill(i int) error                                 { return b.d.Kill(i) }
func (b driverBackend) restart(ctx context.Context, i int, keep bool) error {
	return b.d.Restart(ctx, i, keep)
}
func (b driverBackend) cut(i int) error  { return b.d.Cut(i) }
func (b driverBackend) heal(i int) error { return b.d.Heal(i) }
func (b driverBackend) close() error     { return b.d.Close() }

// fanOut runs f(ctx, k) for k in [0, n) in parallel. The first failure
// cancels the others' context, and fanOut returns it once every call has
// returned: golang.org/x/sync/errgroup's contract. errgroup itself is not
// used here because an importer of redlock loads this package through
// redlock's tests and would get a go.sum line for it (check-consumer-deps).
func fanOut(ctx context.Context, n int, f func(ctx context.Context, k int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for k := range n {
		wg.Go(func() {
			if err := f(ctx, k); err != nil {
				once.Do(func() {
					first = err
					cancel(err)
				})
			}
		})
	}
	wg.Wait()
	return first
}

// startAll starts masters 0..n-1 with fanOut and returns their addresses.
func startAll(ctx context.Context, n int, start func(ctx context.Context, k int) (string, error)) ([]string, error) {
	addrs := make([]string, n)
	err := fanOut(ctx, n, func(ctx context.Context, k int) error {
		a, err := start(ctx, k)
		if err != nil {
			return fmt.Errorf("lab: master %d: %w", k, err)
		}
		addrs[k] = a
		return nil
	})
	if err != nil {
		return nil, err
	}
	return addrs, nil
}

// errNoDriver is Start with the Docker backend and no Options.NewDriver.
var errNoDriver = errors.New("the Docker backend is in module github.com/quorumlab/redlock/labdocker: start the cluster with labdocker.Start or labdocker.ForTest (or set Options.NewDriver)")
