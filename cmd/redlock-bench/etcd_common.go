package main

import (
	"errors"
	"time"
)

// What the etcd comparison needs in every build; the rest is etcd.go
// (build tag etcd: the etcd client, the cluster, the implementations) and
// etcd_off.go (without it).

// etcdServers is the etcd cluster a run started (startEtcd), as the
// untagged code sees it.
type etcdServers struct {
	version   string   // the etcd server's, from etcd --version
	endpoints []string // each member's client URL
	note      string   // how it was started, for the report
	// cpu is the members' user+system CPU time so far, summed.
	cpu   func() (time.Duration, error)
	close func() error // stops every member and removes its data
}

// EtcdInfo describes the etcd cluster in the report (the JSON's "etcd",
// present when one was started).
type EtcdInfo struct {
	Version   string   `json:"version"`
	Members   int      `json:"members"`
	Endpoints []string `json:"endpoints"`
	Note      string   `json:"note"`
}

func (e *etcdServers) info() *EtcdInfo {
	if e == nil {
		return nil
	}
	return &EtcdInfo{Version: e.version, Members: len(e.endpoints), Endpoints: e.endpoints, Note: e.note}
}

// sourceNone is Validity.Source for an implementation that says nothing
// of how long its lock is valid (etcd: a lock lasts as long as its
// lease, which keep-alives renew): no samples are kept, and the
// table shows "-".
const sourceNone = "none"

// etcdImplName is the -impls name of etcd's mutex and election.
const etcdImplName = "etcd"

// errEtcdLocked is etcd's TryLock finding the mutex held,
// errEtcdSessionLost its lease gone, and errEtcdTimeout the server timing
// out the request (etcd.go); failureKind counts them as taken, lost and
// timeout.
var (
	errEtcdLocked      = errors.New("etcd: mutex held by another session")
	errEtcdSessionLost = errors.New("etcd: session lease expired")
	errEtcdTimeout     = errors.New("etcd: the server timed out the request")
)

// ttlSeconds is ttl in whole seconds, rounded up, at least 1: etcd leases
// have a TTL in seconds.
func ttlSeconds(ttl time.Duration) int {
	return max(1, int((ttl+time.Second-1)/time.Second))
}

// externalCPU measures a cell on the etcd cluster: this process's CPU and
// the members', over the same window as a Redis cell's cpuMeter.
type externalCPU struct {
	e              *etcdServers
	client, server time.Duration
	err            error
}

func startExternalCPU(e *etcdServers) *externalCPU {
	x := &externalCPU{e: e}
	if e == nil || e.cpu == nil {
		x.err = errors.New("no etcd cluster to read")
		return x
	}
	if x.server, x.err = e.cpu(); x.err == nil {
		x.client, x.err = processCPU()
	}
	return x
}

// stop returns the window since start; commands stays 0 (etcd has no
// commandstats).
func (x *externalCPU) stop() (cpuWindow, error) {
	if x.err != nil {
		return cpuWindow{}, x.err
	}
	client, err := processCPU()
	if err != nil {
		return cpuWindow{}, err
	}
	server, err := x.e.cpu()
	if err != nil {
		return cpuWindow{}, err
	}
	return cpuWindow{client: client - x.client, server: server - x.server}, nil
}
