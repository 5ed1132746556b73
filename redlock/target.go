package redlock

// What one acquisition locks (target): one resource or several, and for
// an RWMutex whether it reads or writes.

// target is what one acquisition locks: one resource, or several.
type target struct {
	resource string // the resource, or the first of several (sorted)
	key      string // its lock key
	// For several resources: all of them, sorted, and their keys; nil for
	// one.
	resources, keys []string
	mode            mode // a read or write lock of an RWMutex (rwmutex.go); 0 otherwise
}

// set fills c's keys for t (one resource: no cmdMore).
func (t *target) set(c *cmd) {
	c.key = t.key
	if t.keys != nil {
		c.setMore().keys = t.keys
	}
}

// multi reports whether t is several resources.
func (t *target) multi() bool { return t.keys != nil }
