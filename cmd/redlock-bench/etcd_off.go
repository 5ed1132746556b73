//go:build !etcd

package main

import (
	"context"
	"errors"
	"io"
)

// etcdBuilt: -impls etcd works in this build (extras.go).
const etcdBuilt = false

// Without the etcd tag there is no etcd implementation or election;
// parseFlags refuses -impls etcd.
var (
	etcdImpls     []implSpec
	etcdElections []electionSpec
)

// startEtcd is not reached: parseFlags refuses -impls etcd in this build.
func startEtcd(context.Context, io.Writer) (*etcdServers, error) {
	return nil, errors.New("-impls etcd: " + extraHint("etcd"))
}
