//go:build !docker

package main

import (
	"context"
	"errors"
)

// dockerBuilt: -docker works in this build (extras.go).
const dockerBuilt = false

// startDockerMasters is not reached: parseFlags refuses -docker in this
// build.
func startDockerMasters(context.Context, int) (*masters, error) {
	return nil, errors.New("-docker: " + extraHint("docker"))
}
