// Command redlock inspects, lists and force-releases the locks that
// github.com/quorumlab/redlock Lockers hold on a set of Redis masters.
// Run it with -h for the usage and the exit codes; docs/runbook.md is the
// procedure for a stuck lock.
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/redis/go-redis/v9"
)

func main() {
	redis.SetLogger(quietLogger{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
