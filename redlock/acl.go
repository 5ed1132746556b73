package redlock

import (
	"errors"
	"fmt"
	"strings"
)

// A master whose ACL user lacks a permission the Locker needs refuses the
// command (NOPERM), or, for a command a Lua script calls, fails the script
// with an "ERR The user executing the script can't ..." reply (Redis 7.0),
// which does not name the command. Either is a misconfiguration that no
// retry fixes, so it is reported as an error wrapping ErrInvalid that names
// what was refused: the command, and for a script its file and the commands
// it calls. Lock does not retry it, and Unlock reports it rather than
// returning nil while keys stay behind until their TTL. A refusal while
// the connection is set up (SCRIPT LOAD, INFO) is kept: this Locker sends
// nothing more to that master, and every operation names the refusal
// (fix the ACL, then make a new Locker).

// aclRefusal reports whether an error reply is a master refusing a command
// or key for lack of permission. WRONGPASS and NOAUTH are not: a password
// can be rotated under a running Locker, and those stay ordinary failures.
func aclRefusal(text string) bool {
	return strings.HasPrefix(text, "NOPERM") || strings.Contains(text, "The user executing the script can't")
}

// describe names the command c sends, as a refusal reports it: its
// script for an EVALSHA, else its name (args).
func (c *cmd) describe() string {
	if sc := c.lua(); sc != nil {
		return "EVALSHA of " + sc.describe()
	}
	a := c.args(nil)
	if c.kind == cmdLoad {
		return a[0].String() + " " + a[1].String() // SCRIPT LOAD
	}
	return a[0].String()
}

func (sc *script) describe() string {
	return fmt.Sprintf("%s (which calls %s)", sc.name, sc.calls)
}

// replyError is the error of an error reply to c: ErrInvalid naming the
// command when the master refused it for lack of permission, else the
// reply as is.
func (c *cmd) replyError(text string) error {
	if aclRefusal(text) {
		return refusedError(c.describe(), text)
	}
	return serverError(text)
}

// refusedError is what refused a command for lack of permission, wrapping
// ErrInvalid.
func refusedError(what, text string) error {
	return invalid(fmt.Sprintf("the master denied %s: the ACL user lacks the permission (check its rules): %s", what, text))
}

// refusal returns the first master's error that is a permanent
// misconfiguration (ErrInvalid: a refused permission, or a master that is
// another's duplicate), or nil.
func refusal(nodes []MasterResult) error {
	for _, n := range nodes {
		if errors.Is(n.Err, ErrInvalid) {
			return fmt.Errorf("master %s: %w", n.Addr, n.Err)
		}
	}
	return nil
}
