//go:build !race

package redlock

const simRace = false
