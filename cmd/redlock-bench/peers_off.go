//go:build !peers

package main

// peersBuilt: the implementations of peerNames are in this build
// (extras.go).
const peersBuilt = false

// peerImpls is empty without the peers tag; parseFlags refuses their names.
var peerImpls []implSpec
