//go:build !ourelection

// PENDING: stands in for election_ours.go until the election API lands in
// package redlock (see election_ours.go); then this file goes.

package main

import "errors"

var errOursElectionPending = errors.New("this module's election (redlock.Locker.Election) is not in this build yet: " +
	"ours' side is election_ours.go, built with -tags ourelection once the library has it")

const oursElectionBuilt = false

var oursElection = electionSpec{
	name: oursName,
	desc: "this module: Locker.Election(name), Campaign and Resign (PENDING: not in this build yet)",
	open: func(electionEnv, string) (campaigner, error) { return nil, errOursElectionPending },
}
