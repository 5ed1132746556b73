// Package chaos is the fault lab's harness: a workload of lock clients
// (in-process, and subprocesses that can be SIGSTOPped like a process in a
// long GC pause) looping acquire → critical section → release over a few
// resources on real masters (package lab), writing through
// redlock.WriteFenced into a separate resource Redis that is never faulted,
// while a seeded schedule injects faults; and a checker that reads the
// recorded history.
//
// A violation is two critical sections of the same resource that overlap
// in real time as recorded by the test processes (enter: after Lock
// returned and the holder checked Lock.Valid; exit: before Unlock). The
// checker finds them with porcupine against a mutex model, and checks the
// fences against a fenced-mutex model (acquire legal only if free and
// fence > every earlier fence). From the resource's side it counts stale
// writes attempted (rejected with ErrStaleFence) and stale writes accepted
// (accepted after a larger fence had been), which must be 0 whatever the
// faults, and checks the write log against a fenced-register model.
// Verdict.Porcupine is porcupine's verdict over those models, which must
// agree with our own checks; a history it finds illegal is drawn as
// porcupine's HTML visualisation next to the results JSON
// (WriteVisualisation, VisualisationPath).
//
// Faults inside Redlock's assumptions (a minority paused, cut, slowed below
// MasterTimeout, or killed and restarted empty after at least a TTL) must
// show no violation. Faults outside them (a master restarted empty at
// once, a forward clock jump, a client paused past its deadline) show the
// violation the theory predicts. The clock jump is a SIMULATION
// (lab.Masters.JumpClock shrinks every key's TTL by Δ): libfaketime
// crashes Debian's redis-server at start-up.
//
// -chaos.backend docker runs the faulted masters as containers (package
// labdocker): pause is docker pause, cut is a network disconnect, kill and
// restart remove the container and start a new one; the checker and the
// outside-assumption rows are the same. make chaos-soak runs the two
// scenarios inside the assumptions (fenced, and handed the key) over many
// seeds on both backends (-chaos.sections, -chaos.json per run) and
// TestSoakSummary (-chaos.soak DIR) adds them up.
//
// -chaos.resource postgres makes the mutex rows' fenced resource a
// PostgreSQL (pgresource.go): each write is a transaction through module
// sqlfence (pgxfence) that also appends to a log, a throwaway server per
// row; after the row the log, read in commit order, must hold 0 stale
// writes applied (make chaos-pg).
//
// The election scenario (election.go, TestElection) runs campaigners of
// one redlock.Election (in-process, and subprocesses that the schedule
// freezes past their deadline, kills and cuts off while they lead) and
// observers (Observe) under the same minority faults on the masters.
// CheckElection finds two leaders before their deadlines at once (leader
// sections clipped at the lock's deadline, through Check), terms that do
// not increase from leader to leader, an observer delivered an older term
// or a value no leader of that term published, and stale writes accepted;
// its constructed rows (election_constructed.go) show it catching two
// leaders outside the assumptions. make chaos-election runs it to 100 000
// terms (-chaos.terms, -chaos.election.json).
//
// Every run prints its seed; -chaos.seed replays the fault schedules.
// The tests are in chaos_test.go; make chaos runs the long version.
package chaos
