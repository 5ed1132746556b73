package chaos

import (
	"path/filepath"
	"strings"

	"github.com/anishathalye/porcupine"
)

// illegalHistory is a history one of porcupine's models found illegal,
// kept so that a run can draw it.
type illegalHistory struct {
	model porcupine.Model
	ops   []porcupine.Operation
}

// keepIllegal keeps the first history a model found illegal.
func (v *Verdict) keepIllegal(r porcupine.CheckResult, m porcupine.Model, ops []porcupine.Operation) {
	if r == porcupine.Illegal && v.illegal == nil {
		v.illegal = &illegalHistory{model: m, ops: ops}
	}
}

// combined is porcupine's verdict over several models: Illegal when any
// says so, else Unknown when any timed out, else Ok ("" results, models
// not run, count for nothing).
func combined(rs ...porcupine.CheckResult) porcupine.CheckResult {
	out := porcupine.Ok
	for _, r := range rs {
		switch r {
		case porcupine.Illegal:
			return porcupine.Illegal
		case porcupine.Unknown:
			out = porcupine.Unknown
		}
	}
	return out
}

// WriteVisualisation writes porcupine's HTML visualisation of the history
// one of its models found illegal to path (the partial linearizations it
// found, and where each got stuck), and names the file in
// v.Visualisation. It writes nothing when no model found one.
func (v *Verdict) WriteVisualisation(path string) error {
	if v.illegal == nil {
		return nil
	}
	_, info := porcupine.CheckOperationsVerbose(v.illegal.model, v.illegal.ops, checkTimeout)
	if err := porcupine.VisualizePath(v.illegal.model, info, path); err != nil {
		return err
	}
	v.Visualisation = filepath.Base(path)
	return nil
}

// VisualisationPath is where a row's visualisation goes: next to the
// results JSON, "<its name without .json>-<scenario>.html", each run of
// the scenario's characters other than letters and digits written as one
// '-'.
func VisualisationPath(jsonPath, scenario string) string {
	words := strings.FieldsFunc(scenario, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	})
	return strings.TrimSuffix(jsonPath, ".json") + "-" + strings.Join(words, "-") + ".html"
}
