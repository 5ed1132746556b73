package chaos

import (
	"cmp"
	"fmt"
	"slices"
)

// The checkers of the semaphore and the read-write lock (redlock's
// docs/design.md §18 and §19). Their sections carry the same
// CLOCK_MONOTONIC instants (monoNow) as the mutex's, and two sections
// overlap exactly as Check says: one entered strictly before the other
// exited (an exit and an entry at one nanosecond are ordered exit first).

// BoundVerdict is what CheckBound found: the sections, the most open at
// once per resource (over all resources), and the entries that made more
// than k open at once.
type BoundVerdict struct {
	Sections int `json:"sections"`
	// Most is the largest number of sections of one resource open at once.
	Most int `json:"most_at_once"`
	// Violations counts entries that found k or more sections of their
	// resource already open.
	Violations int    `json:"violations"`
	Example    string `json:"example,omitempty"`
}

// event is a section's entry or exit in the sweep; exits sort before
// entries at the same instant.
type event struct {
	at    int64
	enter bool
	s     *Section
	write bool // CheckRW: the section is a writer's
}

func sweep(evs []event) {
	slices.SortFunc(evs, func(a, b event) int {
		if c := cmp.Compare(a.s.Resource, b.s.Resource); c != 0 {
			return c
		}
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		switch {
		case a.enter == b.enter:
			return 0
		case a.enter:
			return 1 // exit first
		}
		return -1
	})
}

// CheckBound checks that no more than k sections of one resource are open
// at once: a semaphore with k permits.
func CheckBound(secs []Section, k int) BoundVerdict {
	v := BoundVerdict{Sections: len(secs)}
	evs := make([]event, 0, 2*len(secs))
	for i := range secs {
		evs = append(evs, event{at: secs[i].Enter, enter: true, s: &secs[i]}, event{at: secs[i].Exit, s: &secs[i]})
	}
	sweep(evs)
	open := 0
	for i, e := range evs {
		if i > 0 && evs[i-1].s.Resource != e.s.Resource {
			open = 0
		}
		if !e.enter {
			open--
			continue
		}
		if open >= k {
			v.Violations++
			if v.Example == "" {
				v.Example = fmt.Sprintf("client %d entered %q at %d with %d sections already open (permits %d)", e.s.Client, e.s.Resource, e.at, open, k)
			}
		}
		open++
		v.Most = max(v.Most, open)
	}
	return v
}

// RWVerdict is what CheckRW found.
type RWVerdict struct {
	Reads  int `json:"reads"`
	Writes int `json:"writes"`
	// MostReaders is the most read sections of one resource open at once:
	// readers did share when it is over 1.
	MostReaders int `json:"most_readers_at_once"`
	// Violations counts entries that broke "readers or one writer": a
	// writer entering while a reader or writer was open, or a reader
	// entering while a writer was.
	Violations int    `json:"violations"`
	Example    string `json:"example,omitempty"`
}

// CheckRW checks that, per resource, write sections overlap no other
// section, read or write.
func CheckRW(reads, writes []Section) RWVerdict {
	v := RWVerdict{Reads: len(reads), Writes: len(writes)}
	evs := make([]event, 0, 2*(len(reads)+len(writes)))
	for i := range reads {
		evs = append(evs, event{at: reads[i].Enter, enter: true, s: &reads[i]}, event{at: reads[i].Exit, s: &reads[i]})
	}
	for i := range writes {
		evs = append(evs, event{at: writes[i].Enter, enter: true, s: &writes[i], write: true}, event{at: writes[i].Exit, s: &writes[i], write: true})
	}
	sweep(evs)
	r, w := 0, 0
	for i, e := range evs {
		if i > 0 && evs[i-1].s.Resource != e.s.Resource {
			r, w = 0, 0
		}
		switch {
		case !e.enter && e.write:
			w--
		case !e.enter:
			r--
		default:
			bad := w > 0 || (e.write && r > 0)
			if bad {
				v.Violations++
				if v.Example == "" {
					kind := "reader"
					if e.write {
						kind = "writer"
					}
					v.Example = fmt.Sprintf("a %s (client %d) entered %q at %d with %d readers and %d writers open", kind, e.s.Client, e.s.Resource, e.at, r, w)
				}
			}
			if e.write {
				w++
			} else {
				r++
				v.MostReaders = max(v.MostReaders, r)
			}
		}
	}
	return v
}
