// Package docker holds no code: its tests run redlock's core scenarios
// (mutual exclusion, stalled masters, network partitions) against five
// masters in Docker containers started by lab, where pausing is the cgroup
// freezer and a partition is a real `docker network disconnect`.
//
// The tests need a Docker engine and the Redis image present locally (the
// lab never pulls): REDLOCK_REDIS_IMAGE=redlock-lab/redis:local after
// `make image` on machines without a registry. They also need the docker
// command line, which they use to check, independently of lab's own code,
// that no container is left behind. Where any of these is missing every test
// skips and says which.
package docker
