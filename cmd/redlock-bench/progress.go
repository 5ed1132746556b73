package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/term"
)

// progress is a one-line progress display on stderr, redrawn with \r. It
// is silent (every method a no-op) when w is not a terminal or with -q.
type progress struct {
	w     io.Writer
	on    bool
	cells int
}

func newProgress(w io.Writer, quiet bool, cells int) *progress {
	f, ok := w.(*os.File)
	return &progress{w: w, on: !quiet && ok && term.IsTerminal(int(f.Fd())), cells: cells}
}

// progressEvery is the redraw interval: often enough to look alive, rarely
// enough to cost nothing measurable.
const progressEvery = 250 * time.Millisecond

// cell starts redrawing the line for cell i until the returned stop is
// called; stop joins the redrawing goroutine and clears the line.
func (p *progress) cell(i int, name string, start time.Time, d time.Duration, ops *atomic.Int64) (stop func()) {
	if !p.on {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			el := min(time.Since(start), d)
			width := 20
			filled := int(float64(width) * float64(el) / float64(d))
			bar := make([]byte, width)
			for j := range bar {
				bar[j] = '.'
				if j < filled {
					bar[j] = '#'
				}
			}
			fmt.Fprintf(p.w, "\r\033[K[%d/%d] %-32s [%s] %4.1fs/%.0fs %8d ops", i+1, p.cells, name, bar, el.Seconds(), d.Seconds(), ops.Load())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		fmt.Fprint(p.w, "\r\033[K")
	}
}
