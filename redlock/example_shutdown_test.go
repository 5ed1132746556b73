package redlock_test

import (
	"context"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlab/redlock/redlock"
)

// A worker that holds a lock until SIGTERM, then gives it up at once
// rather than leave it to expire: Shutdown cancels the held lock's context
// (the work stops), releases the lock on every master, then closes the
// Locker. It needs five Redis masters, so it has no output to check.
func ExampleLocker_Shutdown() {
	masters := []redis.UniversalClient{ /* one client per independent master */ }
	locker, err := redlock.New(masters, nil)
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	held, err := locker.Lock(ctx, "partition:7")
	if err != nil {
		log.Fatal(err)
	}
	if err := held.Keep(); err != nil {
		log.Fatal(err)
	}
	go func() {
		for {
			select {
			case <-held.Done(): // lost, or cancelled by Shutdown: stop working
				return
			case <-time.After(100 * time.Millisecond):
				// ... a unit of work on partition 7 ...
			}
		}
	}()

	<-ctx.Done() // SIGTERM
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := locker.Shutdown(sctx); err != nil {
		log.Printf("shutdown: %v", err)
	}
}

// A process persists its lock's token and, after a restart, takes the lock
// over instead of waiting for it to expire. It needs Redis masters, so it
// has no output to check.
func ExampleLocker_Adopt() {
	masters := []redis.UniversalClient{ /* one client per independent master */ }
	locker, err := redlock.New(masters, &redlock.Options{Fencing: true})
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	// Before the restart: lock = locker.Lock(ctx, "job:42"), then store
	// lock.Token() where only this job's successor reads it (it is a secret:
	// whoever has it can release the lock).
	token := loadToken("job:42")

	lock, err := locker.Adopt(ctx, "job:42", token)
	if err != nil {
		log.Fatal(err) // ErrNotAcquired: expired, or taken by someone else
	}
	if err := lock.Keep(); err != nil { // extended in the background from here on
		log.Fatal(err)
	}
	defer lock.Unlock(ctx)
	log.Printf("resumed job 42 with fence %d until %v", lock.Fence(), lock.Deadline())
}

func loadToken(string) string { return "" }
