// Package redsynccompat holds no code: its tests run go-redsync/redsync/v4
// mutexes and Lockers with redlock.Options.RedsyncKeys side by side on the
// same five real masters (package lab) and check that they exclude each
// other, and that without the option they do not. snippets_test.go holds
// the code of docs/migrating-from-redsync.md, runs it, and checks that the
// doc's text is still the same.
//
// They live here, not in package redlock's tests, because a test import of
// redsync there would reach the go.sum of every module that imports
// redlock (scripts/check-consumer-deps.sh).
package redsynccompat
