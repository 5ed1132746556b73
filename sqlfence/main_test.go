package sqlfence_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/quorumlab/redlock/sqlfence/pgtest"
)

// server is the PostgreSQL the tests and the example run against; nil
// when none could be started (noServer says why).
var (
	server   *pgtest.Server
	noServer string
)

// TestMain starts a throwaway PostgreSQL (package pgtest) as the other
// suites start redis-server. Without one, the tests skip saying why, and
// the examples, which cannot skip, are left out of the run.
func TestMain(m *testing.M) {
	flag.Parse()
	var err error
	server, err = pgtest.Start(context.Background())
	if err != nil {
		noServer = err.Error()
		if !errors.Is(err, pgtest.ErrUnavailable) {
			fmt.Fprintln(os.Stderr, "sqlfence: starting PostgreSQL failed:", err)
			os.Exit(1)
		}
		fmt.Fprintln(os.Stderr, "sqlfence: tests skip and examples do not run:", err)
		if f := flag.Lookup("test.run"); f.Value.String() == "" {
			_ = f.Value.Set("^Test")
		}
	}
	code := m.Run()
	if server != nil {
		if err := server.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "sqlfence: stopping PostgreSQL:", err)
		}
	}
	os.Exit(code)
}

func needServer(t testing.TB) *pgtest.Server {
	t.Helper()
	if server == nil {
		t.Skip("no PostgreSQL: " + noServer)
	}
	return server
}
