//go:build race

package redlock

// simRace: the race detector is on; TestSim makes its short run shorter
// (make test runs it again without the detector, at full length).
const simRace = true
