// Package quorum counts one round of replies from N nodes to a decision:
// as soon as the needed number said yes, or so many said no, failed or
// were not asked that the rest cannot make it up, or the round's deadline
// passed, or the caller's context ended. (With waitAll, a round waits for
// every node instead.)
//
// A Round does no I/O and starts no goroutines. Whoever sends the requests
// (in this module, one ordered stream per Redis master) hands each node's
// reply to Round.Deliver as it arrives; the caller blocks in Round.Wait.
// One timer per round enforces the nodes' deadline: all of a round's
// requests are sent together, so they share it. A reply that comes after
// Wait returned is late: Deliver reports false and the sender deals with
// it.
//
// Each node's Outcome is what package redlock reports for each master, in
// redlock.MasterResult. This package knows nothing about Redis;
// docs/design.md §11 in this module's repository describes how package
// redlock uses it.
package quorum
