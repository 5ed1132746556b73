package redlock

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"regexp"
	"slices"
	"strings"
)

// The Lua scripts. They run with EVALSHA: every connection loads them when
// it opens (SCRIPT LOAD), and a NOSCRIPT reply (a SCRIPT FLUSH, say) fails
// that one command and loads them again before the next batch. A pipelined
// EVALSHA cannot simply be retried as EVAL: the retry would be queued
// behind later commands, and an acquire retried after its release would
// leave a key behind.
var (
	//go:embed scripts/extend.lua
	extendSrc string
	//go:embed scripts/release.lua
	releaseSrc string
	//go:embed scripts/probe_mine.lua
	probeMineSrc string
	//go:embed scripts/acquire_fenced.lua
	acquireFencedSrc string
	//go:embed scripts/writeback.lua
	writebackBody string
	//go:embed scripts/fenced_write.lua
	fencedWriteBody string
	//go:embed scripts/decimal.lua
	decimalLua string
	//go:embed scripts/acquire_multi.lua
	acquireMultiBody string
	//go:embed scripts/writeback_multi.lua
	writebackMultiBody string
	//go:embed scripts/extend_multi.lua
	extendMultiSrc string
	//go:embed scripts/extend_batch.lua
	extendBatchSrc string
	//go:embed scripts/release_multi.lua
	releaseMultiSrc string
	//go:embed scripts/adopt.lua
	adoptSrc string
	//go:embed scripts/sem_acquire.lua
	semAcquireSrc string
	//go:embed scripts/sem_holders.lua
	semHoldersSrc string
	//go:embed scripts/sem_extend.lua
	semExtendSrc string
	//go:embed scripts/rw_write.lua
	rwWriteSrc string
	//go:embed scripts/rw_read.lua
	rwReadSrc string
	//go:embed scripts/rw_unread.lua
	rwUnreadSrc string
	//go:embed scripts/leader_write.lua
	leaderWriteBody string
	//go:embed scripts/leader_read.lua
	leaderReadSrc string
	//go:embed scripts/join.lua
	joinSrc string

	// The scripts that compare fences share decimal.lua's exact
	// comparison of decimal strings.
	writebackSrc      = decimalLua + writebackBody
	fencedWriteSrc    = decimalLua + fencedWriteBody
	leaderWriteSrc    = decimalLua + leaderWriteBody
	acquireMultiSrc   = decimalLua + acquireMultiBody
	writebackMultiSrc = decimalLua + writebackMultiBody
)

// script is one of the Locker's Lua scripts: its file name, source, SHA1
// (as EVALSHA names it) and the commands it calls, read from its source,
// which a refusal inside it names (acl.go).
type script struct{ name, src, sha, calls string }

var scriptCall = regexp.MustCompile(`redis\.p?call\('([A-Za-z]+)'`)

func newScript(name, src string) *script {
	sum := sha1.Sum([]byte(src))
	var calls []string
	for _, m := range scriptCall.FindAllStringSubmatch(src, -1) {
		if n := strings.ToUpper(m[1]); !slices.Contains(calls, n) {
			calls = append(calls, n)
		}
	}
	return &script{name: name, src: src, sha: hex.EncodeToString(sum[:]), calls: strings.Join(calls, ", ")}
}

// The scripts, immutable once built; scriptList is every one of them, in
// the order a connection loads them.
var (
	extendScript         = newScript("extend.lua", extendSrc)
	releaseScript        = newScript("release.lua", releaseSrc)
	probeMineScript      = newScript("probe_mine.lua", probeMineSrc)
	acquireFencedScript  = newScript("acquire_fenced.lua", acquireFencedSrc)
	writebackScript      = newScript("writeback.lua", writebackSrc)
	acquireMultiScript   = newScript("acquire_multi.lua", acquireMultiSrc)
	writebackMultiScript = newScript("writeback_multi.lua", writebackMultiSrc)
	extendMultiScript    = newScript("extend_multi.lua", extendMultiSrc)
	releaseMultiScript   = newScript("release_multi.lua", releaseMultiSrc)
	extendBatchScript    = newScript("extend_batch.lua", extendBatchSrc)
	adoptScript          = newScript("adopt.lua", adoptSrc)
	semAcquireScript     = newScript("sem_acquire.lua", semAcquireSrc)
	semHoldersScript     = newScript("sem_holders.lua", semHoldersSrc)
	semExtendScript      = newScript("sem_extend.lua", semExtendSrc)
	rwWriteScript        = newScript("rw_write.lua", rwWriteSrc)
	rwReadScript         = newScript("rw_read.lua", rwReadSrc)
	rwUnreadScript       = newScript("rw_unread.lua", rwUnreadSrc)
	leaderWriteScript    = newScript("leader_write.lua", leaderWriteSrc)
	leaderReadScript     = newScript("leader_read.lua", leaderReadSrc)
	joinScript           = newScript("join.lua", joinSrc)
	scriptList           = []*script{extendScript, releaseScript, acquireFencedScript, writebackScript,
		acquireMultiScript, writebackMultiScript, extendMultiScript, releaseMultiScript, adoptScript,
		semAcquireScript, semHoldersScript, rwWriteScript, rwReadScript, rwUnreadScript, extendBatchScript, probeMineScript,
		semExtendScript, leaderWriteScript, leaderReadScript, joinScript}
)
