package redlock_test

import (
	"context"
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/driver"
	"github.com/quorumlab/redlock/redlock"
)

// Masters from their URLs, with no client of your own: the fast path, and
// Close closes every connection the Locker opened.
func ExampleNewFromURLs() {
	locker, err := redlock.NewFromURLs([]string{
		"redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003",
		"rediss://user:password@redis4.example:6379/0", "redis://127.0.0.1:7005",
	}, nil)
	if err != nil {
		log.Fatal(err) // a malformed URL wraps redlock.ErrInvalid
	}
	defer locker.Close()
	if lock, err := locker.TryLock(context.Background(), "invoice:42"); err == nil {
		defer lock.Unlock(context.Background())
	}
}

// Masters of different kinds in one Locker: go-redis options here (the
// Locker makes and closes those clients); adapters (modules under
// adapters/) give rueidis, valkey-go and redigo masters.
func ExampleNewMasters() {
	url, err := redis.ParseURL("redis://127.0.0.1:7003")
	if err != nil {
		log.Fatal(err)
	}
	locker, err := redlock.NewMasters([]driver.Master{
		driver.GoRedis(&redis.Options{Addr: "127.0.0.1:7001"}),
		driver.GoRedis(&redis.Options{Addr: "127.0.0.1:7002"}),
		driver.GoRedis(url),
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
}
