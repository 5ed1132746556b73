//go:build mutate

package redlock

import "flag"

// Under the build tag mutate (scripts/mutate.sh, make mutate) TestSim makes
// a shorter run: every mutant gremlins plants runs the package's fast test
// set, and the simulator is most of its time. 50 000 sections over the
// rows inside the assumptions (a sixth of make test's short run); the rows
// outside are left out (each mutant would run them over 20 seeds).
func init() {
	for _, f := range [][2]string{{"sim.sections", "50000"}, {"sim.outside", "false"}} {
		if err := flag.Set(f[0], f[1]); err != nil {
			panic("mutate: TestSim's flag " + f[0] + ": " + err.Error())
		}
	}
}
