//go:build ourelection

// PENDING: ours' side of the election scenarios, written against the
// election API being added to package redlock on main (Locker.Election,
// Election.Campaign/Resign). Until that lands this file is built only with
// -tags ourelection, and election_ours_pending.go stands in for it; once
// it lands, both the tag line and election_ours_pending.go go.

package main

import (
	"context"
	"errors"

	"github.com/quorumlab/redlock/redlock"
)

// oursElection is this module's election: each campaigner its own Locker
// (its own go-redis clients, as its own process would have), TTL
// -election-ttl, and its own *Election.
// oursElectionBuilt: ours' side of the election scenarios is in this
// build (tests run it).
const oursElectionBuilt = true

var oursElection = electionSpec{
	name: oursName,
	desc: "this module: Locker.Election(name), Campaign and Resign; each campaigner its own Locker (TTL -election-ttl)",
	open: func(env electionEnv, name string) (campaigner, error) {
		o, err := openOurs(env.masters, redlock.Options{TTL: env.ttl, KeyPrefix: keyPrefix})
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
