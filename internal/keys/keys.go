// Package keys gives the operator CLI (cmd/redlock) package redlock's key
// naming and release script, so that a tool reads and releases keys
// exactly as a Locker names and releases them. Package redlock fills the
// variables in when it is initialised: a program that imports this
// package must import redlock too.
package keys

var (
	// For returns the lock key and the fence counter's key a Locker with
	// Options.KeyPrefix prefix and Options.RedsyncKeys redsync uses for
	// resource; the error wraps redlock.ErrInvalid when a Locker would
	// refuse the options or the name.
	For func(prefix string, redsync bool, resource string) (lock, fence string, err error)
	// Resource is For's inverse for lock keys: the resource whose lock
	// key is key, and false when key is not a lock key under that naming.
	Resource func(prefix string, redsync bool, key string) (string, bool)
	// ReleaseSource is the Lua compare-and-delete a Locker releases with
	// (KEYS[1] the lock key, ARGV[1] the token; with the key's queue as
	// KEYS[2] it also hands the lock to the longest-waiting caller).
	ReleaseSource string
)

// MaxPermits is the most permits a redlock Semaphore has: a tool reading
// a semaphore's slots reads up to this many.
const MaxPermits = 1024
