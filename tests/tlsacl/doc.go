// Package tlsacl holds no code: its tests run the Locker against real
// redis-server masters (package lab) that accept only TLS, signed by a test
// CA made at start-up, and an ACL user limited to lab.DefaultACLRules, the
// line the README gives. They check the core scenarios (acquire, release,
// extend, fences) on both transports, that every entry of the ACL line is
// needed by removing each in turn, and that a refused permission is an
// error that names what was refused (wrapping redlock.ErrInvalid), never a
// hang or a plain "not acquired".
package tlsacl
