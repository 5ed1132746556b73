package main

import (
	"context"
	"errors"

	"github.com/quorumlab/redlock/redlock"
)

// oursElection is this module's election: each campaigner its own Locker
// (its own go-redis clients, as its own process would have) with TTL
// -election-ttl and fencing (an election's term is its lock's fence, so
// Locker.Election needs Options.Fencing), and its own *Election.
var oursElection = electionSpec{
	name: oursName,
	desc: "this module: Locker.Election(name), Campaign and Resign; each campaigner its own Locker (TTL -election-ttl, Fencing)",
	open: func(env electionEnv, name string) (campaigner, error) {
		o, err := openOurs(env.masters, redlock.Options{TTL: env.ttl, KeyPrefix: keyPrefix, Fencing: true})
		if err != nil {
			return nil, err
		}
		e, err := o.l.Election(name)
		if err != nil {
			return nil, errors.Join(err, o.close())
		}
		return &oursCampaigner{o: o, e: e}, nil
	},
}

type oursCampaigner struct {
	o  *ours
	e  *redlock.Election
	lk *redlock.Lock // the leadership while leading
}

func (c *oursCampaigner) campaign(ctx context.Context, value string) error {
	lk, err := c.e.Campaign(ctx, value)
	if err != nil {
		return err
	}
	c.lk = lk
	return nil
}

func (c *oursCampaigner) resign(ctx context.Context) error {
	c.lk = nil
	return c.e.Resign(ctx)
}

func (c *oursCampaigner) close() error { return c.o.close() }
