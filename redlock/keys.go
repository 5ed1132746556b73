package redlock

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxResourceLen is the longest resource name accepted, in bytes.
const MaxResourceLen = 512

// tokenBytes is the token's entropy: 128 bits, as the Redlock spec asks of
// a value that must be unique across all clients and all locks.
const tokenBytes = 16

// checkResource returns an error naming the rule a resource name breaks.
func checkResource(resource string) error { return checkNameRules(resource, false) }

// checkNameRules is checkResource; verbatim (RedsyncKeys) drops the rule
// against a leading '}', which only matters inside the braces that naming
// does not add.
func checkNameRules(resource string, verbatim bool) error {
	switch {
	case resource == "":
		return invalid("resource name is empty")
	case len(resource) > MaxResourceLen:
		return invalid(fmt.Sprintf("resource name is %d bytes, over the %d-byte limit", len(resource), MaxResourceLen))
	case !utf8.ValidString(resource):
		return invalid("resource name is not valid UTF-8")
	case !verbatim && strings.HasPrefix(resource, "}"):
		// "<prefix>{}..." would make Redis Cluster hash the whole key, and
		// the lock and fence keys could land in different slots.
		return invalid("resource name must not start with '}'")
	}
	if i := strings.IndexFunc(resource, unicode.IsControl); i >= 0 {
		return invalid(fmt.Sprintf("resource name has a control character at byte %d", i))
	}
	return nil
}

// checkName returns an error naming the rule resource breaks under o's
// key naming.
func (o *Options) checkName(resource string) error {
	if err := checkNameRules(resource, o.RedsyncKeys); err != nil || !o.RedsyncKeys {
		return err
	}
	if strings.HasSuffix(o.KeyPrefix+resource, fenceSuffix) {
		return invalid(fmt.Sprintf("key %q ends in %q, which RedsyncKeys keeps for fence counters", o.KeyPrefix+resource, fenceSuffix))
	}
	return nil
}

// keyFor returns resource's lock key under o's key naming.
func (o *Options) keyFor(resource string) string {
	if o.RedsyncKeys {
		return o.KeyPrefix + resource // redsync's: the name is the key
	}
	return lockKey(o.KeyPrefix, resource)
}

// lockKey is "<prefix>{<resource>}": the braces make it a hash tag, so the
// lock key and its fence counter share a slot on a master that is itself a
// Redis Cluster.
func lockKey(prefix, resource string) string { return prefix + "{" + resource + "}" }

// fenceKey is the lock key's fence counter, in the same hash slot.
func fenceKey(lock string) string { return lock + fenceSuffix }

const fenceSuffix = ":fence"

// newToken returns a fresh random token: one per acquisition.
func newToken() (string, error) {
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("redlock: reading a random token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// shortToken is what logs show: enough to correlate, too little to forge.
func shortToken(t string) string {
	if len(t) > 6 {
		return t[:6] + "…"
	}
	return t
}
