package sim

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// model is a script's semantics in Go: what the script does to the master
// and replies, given its KEYS and ARGV.
type model func(m *Master, c clock, keys, argv []string) Reply

// modelFor returns the model of the script in the library's file name,
// or nil.
func modelFor(name string) model {
	switch name {
	case "extend.lua":
		return extendModel
	case "release.lua":
		return releaseModel
	case "probe_mine.lua":
		return probeMineModel
	case "acquire_fenced.lua":
		return acquireFencedModel
	case "writeback.lua":
		return writebackModel
	case "fenced_write.lua":
		return fencedWriteModel
	case "acquire_multi.lua":
		return acquireMultiModel
	case "writeback_multi.lua":
		return writebackMultiModel
	case "extend_multi.lua":
		return extendMultiModel
	case "extend_batch.lua":
		return extendBatchModel
	case "release_multi.lua":
		return releaseMultiModel
	case "adopt.lua":
		return adoptModel
	case "sem_acquire.lua":
		return semAcquireModel
	case "sem_holders.lua":
		return semHoldersModel
	case "sem_extend.lua":
		return semExtendModel
	case "rw_write.lua":
		return rwWriteModel
	case "rw_read.lua":
		return rwReadModel
	case "rw_unread.lua":
		return rwUnreadModel
	case "leader_write.lua":
		return leaderWriteModel
	case "leader_read.lua":
		return leaderReadModel
	case "join.lua":
		return joinModel
	}
	return nil
}

// Scripts binds each of the library's Lua scripts, by the SHA1 of its
// source (as EVALSHA names it), to its Go model. It is immutable, and
// masters share one.
type Scripts struct {
	bySHA map[string]model
	sha   map[string]string // file name -> SHA1
	bySrc map[string]string // source -> SHA1: SCRIPT LOAD of a known source hashes nothing
}

// NewScripts binds the sources in srcs (file name, such as
// "release.lua", to the source the library loads, decimal.lua prepended
// where the library prepends it) to their models. A name without a model
// is an error: the simulation must not meet a script it cannot run.
func NewScripts(srcs map[string]string) (*Scripts, error) {
	s := &Scripts{bySHA: map[string]model{}, sha: map[string]string{}, bySrc: map[string]string{}}
	var missing []string
	for name, src := range srcs {
		fn := modelFor(name)
		if fn == nil {
			missing = append(missing, name)
			continue
		}
		sha := sha1hex(src)
		s.bySHA[sha] = fn
		s.sha[name] = sha
		s.bySrc[src] = sha
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, fmt.Errorf("sim: no model for %s", strings.Join(missing, ", "))
	}
	return s, nil
}

// SHA returns the SHA1 of the named script's source ("" if not bound).
func (s *Scripts) SHA(name string) string { return s.sha[name] }

// Names returns the bound scripts' file names, sorted.
func (s *Scripts) Names() []string {
	names := make([]string, 0, len(s.sha))
	for n := range s.sha {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func (s *Scripts) model(sha string) model {
	if s == nil {
		return nil
	}
	return s.bySHA[sha]
}

// ReadScripts reads the library's scripts from dir (redlock/scripts in
// this repository) and composes them as the library does: decimal.lua is
// no script of its own, but is prepended to every script that calls its
// dec or cmp. The result is what NewScripts takes.
func ReadScripts(dir string) (map[string]string, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.lua"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("sim: no scripts in %s", dir)
	}
	decimal, err := os.ReadFile(filepath.Join(dir, "decimal.lua"))
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	out := map[string]string{}
	for _, p := range paths {
		name := filepath.Base(p)
		if name == "decimal.lua" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		src := string(b)
		if usesDecimal(src) {
			src = string(decimal) + src
		}
		out[name] = src
	}
	return out, nil
}

// LoadScripts is ReadScripts then NewScripts: the library's scripts in dir
// (redlock/scripts), and their models bound to them.
func LoadScripts(dir string) (map[string]string, *Scripts, error) {
	srcs, err := ReadScripts(dir)
	if err != nil {
		return nil, nil, err
	}
	s, err := NewScripts(srcs)
	return srcs, s, err
}

// usesDecimal reports whether a script's code (not its comments) calls
// decimal.lua's functions.
func usesDecimal(src string) bool {
	for line := range strings.Lines(src) {
		code, _, _ := strings.Cut(line, "--")
		if strings.Contains(code, "dec(") || strings.Contains(code, "cmp(") {
			return true
		}
	}
	return false
}
