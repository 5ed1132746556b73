//go:build !sqlfence

package main

import (
	"context"
	"errors"
	"io"
)

// sqlfenceBuilt: -scenarios sqlfence works in this build (extras.go).
const sqlfenceBuilt = false

// runSQLFence is not reached: parseFlags refuses -scenarios sqlfence in
// this build.
func runSQLFence(context.Context, *masters, *config, io.Writer) (*sqlfenceReport, error) {
	return nil, errors.New("-scenarios sqlfence: " + extraHint("sqlfence"))
}

type sqlfenceReport struct{}

func renderSQLFence(io.Writer, *sqlfenceReport) error { return nil }
