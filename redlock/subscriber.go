package redlock

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/driver"
)

// pubSub is what the waker (wake.go) needs of one master's subscription:
// a *redis.PubSub, or a Subscriber's behind clientPubSub.
type pubSub interface {
	Subscribe(ctx context.Context, channels ...string) error
	Unsubscribe(ctx context.Context, channels ...string) error
	Channel(opts ...redis.ChannelOption) <-chan *redis.Message
	Close() error
}

var (
	_ pubSub = (*redis.PubSub)(nil)
	_ pubSub = (*clientPubSub)(nil)
)

// clientPubSub is a Subscriber's subscription as the waker uses it. It
// opens the connection on first use, and again after one failed, with
// every channel it holds (the waker's record of what is subscribed stays
// true, as go-redis's PubSub keeps it across reconnects).
type clientPubSub struct {
	m    driver.Subscriber
	ch   chan *redis.Message
	done chan struct{} // closed by Close: deliver drops what comes later

	mu     sync.Mutex // serialises the calls below; the waker makes them from one goroutine
	sub    driver.Subscription
	chans  map[string]bool
	closed bool
}

func newClientPubSub(m driver.Subscriber) *clientPubSub {
	return &clientPubSub{m: m, ch: make(chan *redis.Message, 256), done: make(chan struct{}), chans: map[string]bool{}}
}

// deliver never blocks: the waker drains ch from the goroutine that also
// calls Subscribe, and a client may read the SUBSCRIBE reply on the
// goroutine that calls deliver. A message dropped when ch is full costs
// its waiters a backoff, as a message lost on a reconnect does.
func (p *clientPubSub) deliver(channel, payload string) {
	select {
	case <-p.done:
	case p.ch <- &redis.Message{Channel: channel, Payload: payload}:
	default:
	}
}

func (p *clientPubSub) Channel(...redis.ChannelOption) <-chan *redis.Message { return p.ch }

func (p *clientPubSub) Subscribe(ctx context.Context, channels ...string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if p.sub == nil {
		sub, err := p.m.Subscribe(ctx, p.deliver)
		if err != nil {
			return err
		}
		p.sub = sub
		if len(p.chans) > 0 {
			again := make([]string, 0, len(p.chans))
			for c := range p.chans {
				again = append(again, c)
			}
			channels = append(again, channels...)
		}
	}
	if err := p.sub.Subscribe(ctx, channels...); err != nil {
		p.dropLocked()
		return err
	}
	for _, c := range channels {
		p.chans[c] = true
	}
	return nil
}

func (p *clientPubSub) Unsubscribe(ctx context.Context, channels ...string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range channels {
		delete(p.chans, c)
	}
	if p.sub == nil {
		return nil // nothing subscribed on a connection
	}
	if err := p.sub.Unsubscribe(ctx, channels...); err != nil {
		p.dropLocked()
		return err
	}
	return nil
}

// dropLocked closes a connection that failed; the next Subscribe opens
// another.
func (p *clientPubSub) dropLocked() {
	p.sub.Close()
	p.sub = nil
}

func (p *clientPubSub) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	close(p.done)
	if p.sub != nil {
		return p.sub.Close()
	}
	return nil
}
