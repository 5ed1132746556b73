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
	//go:embed scripts/acquire_fenced.lua
	acquireFencedSrc string
	//go:embed scripts/writeback.lua
	writebackSrc string
	//go:embed scripts/fenced_write.lua
	fencedWriteSrc string
)

// scripts are per Locker rather than package variables: no package-level
// mutable state (redis.Script is immutable, but this keeps it obvious).
type scripts struct {
	extend, release, acquireFenced, writeback *redis.Script
}

func newScripts() scripts {
	return scripts{
		extend:        redis.NewScript(extendSrc),
		release:       redis.NewScript(releaseSrc),
		acquireFenced: redis.NewScript(acquireFencedSrc),
		writeback:     redis.NewScript(writebackSrc),
	}
}
