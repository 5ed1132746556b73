package redlock

import "time"

// SetBetweenRounds lets tests inject a fault between the two rounds of a
// fenced acquisition.
func SetBetweenRounds(l *Locker, f func()) { l.betweenRounds = f }

// Backoff is Lock's wait after failed attempt n.
func Backoff(l *Locker, attempt int) time.Duration { return l.backoff(attempt) }
