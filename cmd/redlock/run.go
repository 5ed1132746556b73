package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/term"

	"github.com/quorumlab/redlock/internal/version"
)

// isTerminal reports whether w is a terminal: progress goes to stderr only
// then. A variable, for tests.
var isTerminal = func(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

const usageText = `redlock: inspect, list, force-release and reset the locks, semaphores, read-write locks and elections of github.com/quorumlab/redlock

usage:
  redlock [flags] inspect RESOURCE
      per master: is the key there, its holder (owner label whole, random part
      shortened), remaining PTTL, fence counter; then the quorum view: held or
      not, by which holder on how many masters, and the latest time the lock
      can still be valid (an upper bound of the holder's own deadline). Also
      the semaphore, read-write lock and election of that name, when there are
      keys of theirs: for an election, per master the lock key's holder, PTTL
      and the published term and value, then the leader a majority reports
      (value, term, deadline) or "no leader".
  redlock [flags] list [PREFIX] [-limit N]
      lock keys (SCAN, never KEYS) of resources starting with PREFIX, merged
      across masters: on how many each is held, the holder, the largest PTTL;
      then semaphores, read-write locks and elections, one line each.
      At most -limit resources (default 1000), read on every master.
  redlock [flags] release RESOURCE -force -reason TEXT [-token T] [-who NAME]
      compare-and-delete, on every master, of the token that is on a majority
      (never a blind DEL; the fence counter is never deleted). Refused when no
      token is on a majority unless -token names one (the whole token, or as
      inspect shows it). Writes an audit record (JSON) to stderr and to the
      stream <prefix>audit on every master that answers. For a semaphore or a
      read-write lock, -token names the permit, reader, writer or writer's
      intent to release (as inspect shows it). For an election (when the mutex
      RESOURCE is not held), releases the leader's lock key in the same way;
      its record and fence counter stay.
  redlock [flags] reset RESOURCE -force -reason TEXT [-who NAME]
      deletes, on every master, every key of the semaphore, read-write lock and
      election RESOURCE (permits record, slots, writer, intent, readers; the
      election's lock key, record and queue; never a fence counter): for one
      whose holders are gone, or to change its permits at once. A holder or
      leader still running loses what it holds. Audited as release is.

The common flags may come before or after the command and its arguments;
-limit and the release and reset flags after the command.

masters (first found): -masters LIST, the "masters" of -config FILE, $REDLOCK_MASTERS
  LIST is comma-separated: redis://[user:pass@]host:port[/db], rediss://... (TLS),
  or host:port. Compose lab: -masters 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003,127.0.0.1:7004,127.0.0.1:7005

exit codes:
  0  done (inspect, list: the masters that answered settle the view)
  1  refused or failed: nothing held on a majority to release, masters disagree,
     -token matches nothing, nothing to reset, or the delete did not reach enough masters
  2  usage: bad flags or arguments, missing -force or -reason, bad address or config
  3  too few masters answered to decide (the output still shows what they said)

flags:
`

// run is the whole command: it parses args, writes results to stdout and
// progress, errors and audit records to stderr, and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := &config{timeout: 2 * time.Second, set: map[string]bool{}}
	cl, err := parseCommandLine(c, args)
	if err != nil {
		return failUsage(c, err, stdout, stderr)
	}
	if c.version {
		fmt.Fprintln(stdout, version.String("redlock"))
		return exitOK
	}
	r, err := c.resolve()
	if err != nil {
		return failUsage(c, err, stdout, stderr)
	}
	s := newConns(r, stderr, c.quiet || !isTerminal(stderr))
	defer s.close()
	switch cl.cmd {
	case "inspect":
		return cmdInspect(ctx, s, cl.resource, c.json, stdout)
	case "list":
		return cmdList(ctx, s, cl.resource, cl.limit, c.json, stdout)
	case "reset":
		return cmdReset(ctx, s, cl.resource, cl.rf, c.json, stdout)
	default:
		return cmdRelease(ctx, s, cl.resource, cl.rf, c.json, stdout)
	}
}

// commandLine is a parsed command line: the command, its RESOURCE (list:
// its PREFIX) and its own flags; the common flags are in config.
type commandLine struct {
	cmd      string
	resource string
	rf       releaseFlags
	limit    int
}

// failUsage answers a command line run cannot use: the usage on stdout
// for -h or help (exitOK), else err and a hint on stderr (exitUsage).
func failUsage(c *config, err error, stdout, stderr io.Writer) int {
	if errors.Is(err, flag.ErrHelp) || errors.Is(err, errHelp) {
		printUsage(stdout, c)
		return exitOK
	}
	fmt.Fprintf(stderr, "redlock: %v\nrun 'redlock -h' for usage (exit %d)\n", err, exitUsage)
	return exitUsage
}

// printUsage writes the usage: usageText, then every flag.
func printUsage(w io.Writer, c *config) {
	fmt.Fprint(w, usageText)
	fs := flag.NewFlagSet("redlock", flag.ContinueOnError)
	c.register(fs)
	var rf releaseFlags
	l := 1000
	registerCommandFlags(fs, &rf, &l)
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// parseCommandLine parses args into c and a commandLine: flags before the
// command, then the command's own set (which may also take the common
// flags, after the command or its arguments). With -version it stops
// after the flags before the command.
func parseCommandLine(c *config, args []string) (commandLine, error) {
	cl := commandLine{limit: 1000}
	global := flag.NewFlagSet("redlock", flag.ContinueOnError)
	global.SetOutput(io.Discard)
	c.register(global)
	if err := global.Parse(args); err != nil {
		return cl, err
	}
	global.Visit(func(f *flag.Flag) { c.set[f.Name] = true })
	if c.version {
		return cl, nil
	}
	if global.NArg() == 0 {
		return cl, usagef("no command: give inspect, list, release or reset")
	}
	cmd, rest := global.Arg(0), global.Args()[1:]
	if cmd == "help" {
		return cl, errHelp
	}
	cl.cmd = cmd
	fs := flag.NewFlagSet("redlock "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.register(fs)
	switch cmd {
	case "inspect", "list", "release", "reset":
		registerCommandFlags(fs, &cl.rf, &cl.limit)
	default:
		return cl, usagef("unknown command %q: give inspect, list, release or reset", cmd)
	}
	pos, err := parseArgs(fs, rest)
	if errors.Is(err, flag.ErrHelp) {
		return cl, err
	}
	if err != nil {
		return cl, usagef("%s: %v", cmd, err)
	}
	fs.Visit(func(f *flag.Flag) { c.set[f.Name] = true })
	for _, name := range []string{"force", "reason", "token", "who"} {
		if c.set[name] && cmd != "release" && (cmd != "reset" || name == "token") {
			return cl, usagef("%s does not take -%s (release does)", cmd, name)
		}
	}
	if c.set["limit"] && cmd != "list" {
		return cl, usagef("%s does not take -limit (list does)", cmd)
	}
	if cl.resource, err = cl.positional(pos); err != nil {
		return cl, err
	}
	if cmd == "release" || cmd == "reset" {
		if err := checkRelease(cmd, cl.rf); err != nil {
			return cl, err
		}
	}
	return cl, nil
}

// positional checks the command's arguments after its flags and returns
// its RESOURCE (list: its PREFIX, "" for none).
func (cl *commandLine) positional(pos []string) (string, error) {
	switch cl.cmd {
	case "inspect", "release", "reset":
		if len(pos) != 1 {
			return "", usagef("%s takes one RESOURCE, got %d arguments", cl.cmd, len(pos))
		}
		return pos[0], nil
	case "list":
		if len(pos) > 1 {
			return "", usagef("list takes at most one PREFIX, got %d arguments", len(pos))
		}
		if cl.limit <= 0 {
			return "", usagef("-limit %d must be positive", cl.limit)
		}
		if len(pos) == 1 {
			return pos[0], nil
		}
	}
	return "", nil
}

// registerCommandFlags defines the flags of list and release on fs; run
// refuses them on the other commands.
func registerCommandFlags(fs *flag.FlagSet, rf *releaseFlags, limit *int) {
	fs.IntVar(limit, "limit", *limit, "list: at most this many resources (and keys kept per master while scanning)")
	fs.BoolVar(&rf.force, "force", false, "release, reset: required; they delete other processes' locks")
	fs.StringVar(&rf.reason, "reason", "", "release, reset: required; why, for the audit record")
	fs.StringVar(&rf.token, "token", "", "release: the token to delete when no token is on a majority (whole, or as inspect shows it)")
	fs.StringVar(&rf.who, "who", "", "release, reset: who is releasing, for the audit record (default: the OS user)")
}

func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}
