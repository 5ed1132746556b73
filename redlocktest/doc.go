// Package redlocktest runs Redis masters in-process, for testing code that
// takes locks with package redlock using go test alone: no redis-server,
// no Docker.
//
// New starts N independent masters (five by default), each a miniredis
// server behind a small TCP front door of its own, and closes everything
// when the test ends. Masters.Locker returns a ready Locker over them;
// Masters.Clients gives the go-redis clients if you build your own:
//
//	func TestNightlyJob(t *testing.T) {
//		masters := redlocktest.New(t, nil)
//		locker, err := masters.Locker(nil)
//		if err != nil {
//			t.Fatal(err)
//		}
//		if err := runNightlyJob(t.Context(), locker); err != nil { // your code
//			t.Fatal(err)
//		}
//
//		// Two of five masters stop answering: a majority is still there.
//		if err := masters.Stall(3, 4); err != nil {
//			t.Fatal(err)
//		}
//		...
//	}
//
// For a TestMain, or anything without a testing.TB, Start returns the
// masters and Close stops them.
//
// # Faults
//
// Stall makes a master stop answering while its connections stay open, as
// a frozen (SIGSTOPped) server does: the Locker gives up on it after its
// MasterTimeout and skips it until it answers again. Resume hands on what
// was sent meanwhile, in order. Refuse makes a master reset every
// connection, as a server that is down does; Heal serves again. Both act
// on the network path only: Servers gives the miniredis servers themselves,
// and Tokens, Holding, Fences and Leaders read each master's keys
// in-process, so they work on a stalled or refused master too.
//
// A Locker's first round waits for every master (it identifies each on
// first contact), so a master stalled before then makes that round last the
// whole MasterTimeout and shows in it as timed out; from then on it is
// skipped (unavailable) like any master that stopped answering. Take one
// lock before stalling to see the usual pending outcome instead.
//
// # Elections
//
// Locker.Election runs here as on real masters (its Locker needs
// Options.Fencing): Campaign, Proclaim, Resign, Leader and Observe, whose
// changes are pushed over pub/sub. Leaders shows who leads on each master,
// by the rule Election.Leader reads them with; Holding counts a
// leadership's masters as it counts a lock's. FastForward past the TTL
// takes a leader's keys away, as a leader frozen past its TTL loses them
// (but this one still runs): its Done closes when its next extension
// fails, and another campaigner can lead, with a larger term.
//
// # Time
//
// Keys expire in real time, as on a real master. FastForward takes time
// off every key's TTL at once, but it moves the masters' clocks only: a
// Locker measures a lock's validity on this process's own clock, so
// FastForward does not bring a lock's Deadline nearer. It models masters
// losing the key early, which Redlock's assumptions exclude: the holder
// still believes it holds the lock (Valid reports true) while another
// client can take it.
//
// # What differs from real masters
//
// miniredis speaks the Redis protocol and runs Redlock's Lua scripts
// (acquire, extend, release, the fenced acquisition and write-back,
// redlock.WriteFenced and ReadFenced, and an election's leader_write.lua
// and leader_read.lua, which call redis.sha1hex and PUBLISH), but it is
// not Redis: it has no
// INFO server, so a Locker cannot tell two names of one server apart by
// run_id (every master here is distinct anyway); latency is loopback plus
// the front door's copy; and a restart or a persistence setting is not
// modelled. Use package lab in this repository, with real redis-server
// processes, for those.
package redlocktest
