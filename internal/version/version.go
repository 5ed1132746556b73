// Package version says which build of a command is running, from the
// build information the Go toolchain embeds (debug.ReadBuildInfo): the
// module version, and the VCS revision when built from a checkout.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// String is the -version line of command name, e.g.
// "redlock v1.2.0 (rev 3d0ed65a1b2c, 2026-11-24T08:00:00Z, modified) go1.26.8".
func String(name string) string {
	v, rev := "(unknown)", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		var parts []string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				parts = append([]string{"rev " + s.Value[:min(12, len(s.Value))]}, parts...)
			case "vcs.time":
				parts = append(parts, s.Value)
			case "vcs.modified":
				if s.Value == "true" {
					parts = append(parts, "modified")
				}
			}
		}
		if len(parts) > 0 {
			rev = " (" + strings.Join(parts, ", ") + ")"
		}
	}
	return fmt.Sprintf("%s %s%s %s", name, v, rev, runtime.Version())
}
