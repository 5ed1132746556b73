//go:build docker

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/quorumlab/redlock/labdocker"
)

// dockerBuilt: -docker works in this build (extras.go).
const dockerBuilt = true

// startDockerMasters starts n containers of the local image with labdocker
// (testcontainers-go, nothing pulled): stall is docker pause, partition is
// docker network disconnect.
func startDockerMasters(ctx context.Context, n int) (*masters, error) {
	if err := labdocker.Available(ctx); err != nil {
		return nil, fmt.Errorf("-docker: %w", err)
	}
	cl, err := labdocker.Start(ctx, n, nil)
	if err != nil {
		return nil, fmt.Errorf("-docker: starting %d containers: %w", n, err)
	}
	m := &masters{
		info: Masters{Kind: "lab-docker", N: n, Addrs: cl.Addrs(),
			StallMethod:     "docker pause/unpause: the cgroup freezer (lab.Masters.Pause/Resume, labdocker)",
			PartitionMethod: "docker network disconnect/connect: the published port goes too, so clients are refused (lab.Masters.Cut/Heal, labdocker)",
			Note:            fmt.Sprintf("%d containers of %s on a bridge network, ports published on loopback, started by labdocker (testcontainers-go)", n, labdocker.Image(""))},
		pause:  func(_ context.Context, i int, _ time.Duration) error { return cl.Pause(i) },
		resume: cl.Resume,
		cut:    cl.Cut,
		heal:   cl.Heal,
		close:  cl.Close,
	}
	m.opts = plainOptions(m.info.Addrs)
	m.admin = newClients(m.opts)
	return m, nil
}
