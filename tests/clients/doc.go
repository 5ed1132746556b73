// Package clients runs the core safety tests once per kind of master
// client (go-redis, a redis:// URL, rueidis and valkey-go through the
// client and from their options, redigo pools) against real redis-server
// masters: mutual exclusion, two and three of five stalled, the release
// after a failed round, fences, wake on release, TLS with an ACL user, and
// the run_id check that catches one server under two names.
//
// It lives apart from package redlock's tests so that importing redlock
// never loads the other clients (scripts/check-consumer-deps.sh).
package clients
