package redlockredigo_test

import (
	"errors"
	"testing"

	"github.com/gomodule/redigo/redis"

	redlockredigo "github.com/quorumlab/redlock/adapters/redigo"
	"github.com/quorumlab/redlock/redlock"
)

// A master needs an address: it names the master in stats and errors,
// and New compares them to refuse one server named twice.
func TestMasterRefusesEmptyAddress(t *testing.T) {
	pool := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", "127.0.0.1:1") }}
	defer pool.Close()
	for _, addr := range []string{"", "  "} {
		if m, err := redlockredigo.Master(pool, addr); !errors.Is(err, redlock.ErrInvalid) {
			t.Errorf("Master(pool, %q) = %v, %v; want an error wrapping redlock.ErrInvalid", addr, m, err)
		}
	}
	if _, err := redlockredigo.Master(pool, "127.0.0.1:6379"); err != nil {
		t.Errorf("Master(pool, 127.0.0.1:6379): %v", err)
	}
}
