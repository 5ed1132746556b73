package redlockvalkey_test

import (
	"context"
	"log"

	"github.com/valkey-io/valkey-go"

	redlockvalkey "github.com/quorumlab/redlock/adapters/valkey"
	"github.com/quorumlab/redlock/driver"
	"github.com/quorumlab/redlock/redlock"
)

// Your valkey-go clients as masters: commands go through them (the client
// path), pipelined with the rest of their traffic.
func ExampleMaster() {
	var masters []driver.Master
	for _, addr := range []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"} {
		c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}})
		if err != nil {
			log.Fatal(err)
		}
		defer c.Close() // after the Locker's Close (defers run last-in first-out)
		m, err := redlockvalkey.Master(c)
		if err != nil {
			log.Fatal(err)
		}
		masters = append(masters, m)
	}
	locker, err := redlock.NewMasters(masters, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	if lock, err := locker.TryLock(context.Background(), "invoice:42"); err == nil {
		lock.Unlock(context.Background())
	}
}

// valkey-go options as masters: the fast path, on the Locker's own
// connections.
func ExampleFromOption() {
	var masters []driver.Master
	for _, addr := range []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"} {
		m, err := redlockvalkey.FromOption(valkey.ClientOption{InitAddress: []string{addr}})
		if err != nil {
			log.Fatal(err) // options the fast path cannot reproduce (Sentinel, ...)
		}
		masters = append(masters, m)
	}
	locker, err := redlock.NewMasters(masters, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
}
