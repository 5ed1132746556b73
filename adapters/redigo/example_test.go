package redlockredigo_test

import (
	"context"
	"log"

	"github.com/gomodule/redigo/redis"

	redlockredigo "github.com/quorumlab/redlock/adapters/redigo"
	"github.com/quorumlab/redlock/driver"
	"github.com/quorumlab/redlock/redlock"
)

// Your redigo pools as masters: each batch of the Locker's commands is
// pipelined on one pooled connection (the client path).
func ExampleMaster() {
	var masters []driver.Master
	for _, addr := range []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"} {
		pool := &redis.Pool{MaxIdle: 4, Dial: func() (redis.Conn, error) { return redis.Dial("tcp", addr) }}
		defer pool.Close() // after the Locker's Close
		m, err := redlockredigo.Master(pool, addr)
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
