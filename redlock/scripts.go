package redlock

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts run with EVALSHA and fall back to EVAL when a master does
// not have them cached yet (redis.Script.Run), e.g. after a restart.
var (
	//go:embed scripts/extend.lua
	extendSrc string
	//go:embed scripts/release.lua
	releaseSrc string
)

// scripts are per Locker rather than package variables: no package-level
// mutable state (redis.Script is immutable, but this keeps it obvious).
type scripts struct {
	extend, release *redis.Script
}

func newScripts() scripts {
	return scripts{extend: redis.NewScript(extendSrc), release: redis.NewScript(releaseSrc)}
}
