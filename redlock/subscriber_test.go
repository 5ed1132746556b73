package redlock

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/quorumlab/redlock/driver"
)

// fakeSubscriber records what each of its connections was asked, and fails
// the Subscribe calls it is told to.
type fakeSubscriber struct {
	driver.Master
	opened []*fakeSubscription
	fail   int // Subscribe calls left to fail
}

type fakeSubscription struct {
	s       *fakeSubscriber
	deliver func(channel, payload string)
	chans   []string
	closed  bool
}

var _ driver.Subscriber = (*fakeSubscriber)(nil)

func (f *fakeSubscriber) Subscribe(_ context.Context, deliver func(channel, payload string)) (driver.Subscription, error) {
	s := &fakeSubscription{s: f, deliver: deliver}
	f.opened = append(f.opened, s)
	return s, nil
}

func (s *fakeSubscription) Subscribe(_ context.Context, channels ...string) error {
	if s.s.fail > 0 {
		s.s.fail--
		return errors.New("connection reset")
	}
	s.chans = append(s.chans, channels...)
	return nil
}

func (s *fakeSubscription) Unsubscribe(_ context.Context, channels ...string) error {
	s.chans = slices.DeleteFunc(s.chans, func(c string) bool { return slices.Contains(channels, c) })
	return nil
}

func (s *fakeSubscription) Close() error { s.closed = true; return nil }

// A failed subscription connection is closed, and the next Subscribe opens
// another with every channel held before; messages flow until Close and
// never block the client's reader.
func TestClientPubSubReopens(t *testing.T) {
	f := &fakeSubscriber{}
	p := newClientPubSub(f)
	ctx := t.Context()
	if err := p.Subscribe(ctx, "a", "b"); err != nil {
		t.Fatal(err)
	}
	f.fail = 1
	if err := p.Subscribe(ctx, "c"); err == nil {
		t.Fatal("Subscribe on a failing connection: nil error")
	}
	if len(f.opened) != 1 || !f.opened[0].closed {
		t.Fatalf("the failed connection was not closed (%d opened)", len(f.opened))
	}
	if err := p.Subscribe(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if err := p.Unsubscribe(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	second := f.opened[len(f.opened)-1]
	got := slices.Sorted(slices.Values(second.chans))
	if len(f.opened) != 2 || !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("%d connections, the last subscribed to %q; want 2, and b, c", len(f.opened), got)
	}
	second.deliver("b", "token")
	if m := <-p.Channel(); m.Channel != "b" || m.Payload != "token" {
		t.Fatalf("message %+v", m)
	}
	for range cap(p.ch) + 10 { // a full channel drops, never blocks
		second.deliver("b", "x")
	}
	if err := p.Close(); err != nil || !second.closed {
		t.Fatalf("Close: %v, connection closed %v", err, second.closed)
	}
	second.deliver("b", "after close")
	if err := p.Subscribe(ctx, "d"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Subscribe after Close: %v, want ErrClosed", err)
	}
}
