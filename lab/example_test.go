package lab_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/quorumlab/redlock/lab"
)

// Needs redis-server, so there is no Output line: it compiles but does not run.
func ExampleStart() {
	ctx := context.Background()
	c, err := lab.Start(ctx, 3, &lab.Options{Proxy: true})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	_ = c.Client(0).Set(ctx, "lock", "token", 10*time.Second).Err()
	_ = c.Pause(1)                             // master 1 stops answering
	_ = c.Cut(2)                               // master 2 is partitioned away
	c.ResumeAll()                              // master 1 answers again
	_ = c.Heal(2)                              // master 2 is reachable again
	n, _ := c.JumpClock(ctx, 0, 5*time.Second) // simulated: TTLs on master 0 shrink by 5s
	fmt.Println(n, "keys affected")
}
