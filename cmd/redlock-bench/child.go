package main

import (
	"io"
	"os"
)

// childRoles are the processes the bench re-executes its own binary as,
// each named by an environment variable whose value is its argument: a
// failover round's leader (election_failover.go) and the embedded masters
// (embedded_child.go).
var childRoles = []struct {
	env string
	run func(arg string, stdin io.Reader, stdout, stderr io.Writer) int
}{
	{childCampaignerEnv, runChildCampaigner},
	{embeddedChildEnv, runEmbeddedChild},
}

// asChild reports whether this process is one of childRoles, and if so
// runs it and returns its exit code: main and TestMain call it first.
func asChild() (code int, isChild bool) {
	for _, r := range childRoles {
		if arg, ok := os.LookupEnv(r.env); ok {
			return r.run(arg, os.Stdin, os.Stdout, os.Stderr), true
		}
	}
	return 0, false
}
