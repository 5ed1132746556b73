package redlock

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/quorumlab/redlock/internal/keys"
)

// maxResourceLen is the longest resource name accepted, in bytes.
const maxResourceLen = 512

// checkNameRules returns an error naming the rule a resource name breaks;
// verbatim (RedsyncKeys) drops the rule against a leading '}', which only
// matters inside the braces that naming does not add.
func checkNameRules(resource string, verbatim bool) error {
	switch {
	case resource == "":
		return invalid("resource name is empty")
	case len(resource) > maxResourceLen:
		return invalid(fmt.Sprintf("resource name is %d bytes, over the %d-byte limit", len(resource), maxResourceLen))
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

// leaderSuffix names an election's record beside its lock key: "<lock
// key>:leader", a hash of the leader's term, token and value, and the
// channel its changes are published on.
const leaderSuffix = ":leader"

// metaSuffix names a semaphore's permits record: the stem + ":meta" holds
// the number of permits, and expires with the last permit held (at most a
// TTL after it ends). slotInfix names its slots: stem + ":s:" + j.
const (
	metaSuffix = ":meta"
	slotInfix  = ":s:"
)

// keyFor returns the keys a Locker made with opts (nil: the defaults) uses
// for resource: the lock key, and the fence counter's key (used only with
// Options.Fencing). With the default naming they are "<KeyPrefix>{<resource>}"
// and "<KeyPrefix>{<resource>}:fence"; with RedsyncKeys, "<KeyPrefix><resource>"
// and "<KeyPrefix><resource>:fence". It is for tools that read the masters
// (cmd/redlock, through internal/keys); the error wraps ErrInvalid when New would reject opts or
// the Locker would reject the resource name.
func keyFor(opts *Options, resource string) (lock, fence string, err error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return "", "", err
	}
	if err := o.checkName(resource); err != nil {
		return "", "", err
	}
	lock = o.keyFor(resource)
	return lock, fenceKey(lock), nil
}

// resourceFor is keyFor's inverse for lock keys: the resource whose lock
// key under opts (nil: the defaults) is key, and false when key is not a
// lock key under that naming (another key, or a fence counter).
func resourceFor(opts *Options, key string) (string, bool) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o = o.withDefaults()
	rest, ok := strings.CutPrefix(key, o.KeyPrefix)
	if !ok || strings.HasSuffix(key, fenceSuffix) {
		return "", false
	}
	if !o.RedsyncKeys {
		inner, ok := strings.CutPrefix(rest, "{")
		if !ok {
			return "", false
		}
		if rest, ok = strings.CutSuffix(inner, "}"); !ok {
			return "", false
		}
	}
	if o.checkName(rest) != nil {
		return "", false
	}
	return rest, true
}

func init() {
	keys.For = func(prefix string, redsync bool, resource string) (string, string, error) {
		return keyFor(&Options{KeyPrefix: prefix, RedsyncKeys: redsync}, resource)
	}
	keys.Resource = func(prefix string, redsync bool, key string) (string, bool) {
		return resourceFor(&Options{KeyPrefix: prefix, RedsyncKeys: redsync}, key)
	}
	keys.ReleaseSource = releaseSrc
}
