package main

import (
	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/internal/keys"
	"github.com/quorumlab/redlock/redlock"
)

// keyFor returns the lock and fence keys a Locker with opts' KeyPrefix
// and RedsyncKeys uses for resource (internal/keys).
func keyFor(opts *redlock.Options, resource string) (lock, fence string, err error) {
	return keys.For(opts.KeyPrefix, opts.RedsyncKeys, resource)
}

// resourceFor is keyFor's inverse for lock keys.
func resourceFor(opts *redlock.Options, key string) (string, bool) {
	return keys.Resource(opts.KeyPrefix, opts.RedsyncKeys, key)
}

// compareAndDelete is the script a Locker releases with.
var compareAndDelete = redis.NewScript(keys.ReleaseSource)
