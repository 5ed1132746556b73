// Package telemetry tests the Locker's OpenTelemetry metrics and spans with
// the real SDK (a manual metric reader, an in-memory span recorder) against
// real redis-server masters. It lives outside package redlock so that the
// SDK stays out of the library's own test graph, and so out of the go.sum of
// programs that import the library.
package telemetry
