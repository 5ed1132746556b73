package redlock

// SetBetweenRounds lets tests inject a fault between the two rounds of a
// fenced acquisition.
func SetBetweenRounds(l *Locker, f func()) { l.betweenRounds = f }
