package redlockrueidis_test

import (
	"context"
	"log"

	"github.com/redis/rueidis"

	redlockrueidis "github.com/quorumlab/redlock/adapters/rueidis"
	"github.com/quorumlab/redlock/driver"
	"github.com/quorumlab/redlock/redlock"
)

// Your rueidis clients as masters: commands go through them (the client
// path), pipelined with the rest of their traffic.
func ExampleMaster() {
	var masters []driver.Master
	for _, addr := range []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"} {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
		if err != nil {
			log.Fatal(err)
		}
		defer c.Close() // after the Locker's Close (defers run last-in first-out)
		m, err := redlockrueidis.Master(c)
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

// rueidis options as masters: the fast path, on the Locker's own
// connections.
func ExampleFromOption() {
	var masters []driver.Master
	for _, addr := range []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"} {
		m, err := redlockrueidis.FromOption(rueidis.ClientOption{InitAddress: []string{addr}})
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
