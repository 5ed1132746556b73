//go:build !unix

package lab

import (
	"errors"
	"log/slog"
)

func newProcessBackend(string, bool, int, *slog.Logger) (backend, error) {
	return nil, errors.New("lab: the local-process backend needs a unix system (signals); use the Docker backend")
}
