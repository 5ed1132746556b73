package chaos

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"
)

// Our sweep and porcupine agree on short histories drawn at random: two
// to six sections on two resources, often overlapping, with fences that
// often go back or repeat (MutexOK Ok exactly when no section overlaps;
// FencedOK Ok exactly when none does and the fences increase), and
// sequential fenced writes of which some were accepted against the
// register's rule (ResourceOK Ok exactly when no stale write was
// accepted). Deterministic: one seed.
func TestCheckersAgreeOnShortHistories(t *testing.T) {
	r := rand.New(rand.NewPCG(49, 49))
	for n := range 2000 {
		var secs []Section
		for c := range 2 + r.IntN(5) {
			enter := int64(r.IntN(100))
			secs = append(secs, Section{Client: c, Seq: 1, Resource: []string{"a", "b"}[r.IntN(2)],
				Enter: enter, Exit: enter + 1 + int64(r.IntN(30)), Fence: uint64(1 + r.IntN(8))})
		}
		v := Check(secs, nil)
		if (v.MutexOK == porcupine.Ok) != (v.Overlaps == 0) {
			t.Fatalf("history %d: mutex model %s, sweep %d overlaps: %+v", n, v.MutexOK, v.Overlaps, secs)
		}
		if (v.FencedOK == porcupine.Ok) != (v.Overlaps == 0 && v.FenceRegressions == 0) {
			t.Fatalf("history %d: fenced model %s, sweep %d overlaps and %d fence regressions: %+v", n, v.FencedOK, v.Overlaps, v.FenceRegressions, secs)
		}
		if (v.Porcupine == porcupine.Ok) != (v.Overlaps == 0 && v.FenceRegressions == 0) {
			t.Fatalf("history %d: porcupine %s", n, v.Porcupine)
		}
	}
	for n := range 1000 {
		var writes []Write
		var last uint64
		at := int64(0)
		for c := range 2 + r.IntN(6) {
			f := uint64(1 + r.IntN(8))
			ok := f > last
			if !ok && f < last && r.IntN(4) == 0 {
				ok = true // a stale write the resource should have rejected
			}
			if ok {
				last = max(last, f)
			}
			writes = append(writes, Write{Client: c, Seq: 1, Resource: "a", Fence: f, Owner: string(rune('p' + c)),
				Call: at, Return: at + 5, Accepted: ok, Stale: !ok})
			at += 10
		}
		v := Check(nil, writes)
		if (v.ResourceOK == porcupine.Ok) != (v.StaleAccepted == 0) {
			t.Fatalf("history %d: resource model %s, %d stale accepted: %+v", n, v.ResourceOK, v.StaleAccepted, writes)
		}
		if (v.Porcupine == porcupine.Ok) != (v.StaleAccepted == 0) {
			t.Fatalf("history %d: porcupine %s, %d stale accepted", n, v.Porcupine, v.StaleAccepted)
		}
	}
}

// A history porcupine finds illegal is drawn next to the results JSON;
// a legal one draws nothing.
func TestVisualisationOfAnIllegalHistory(t *testing.T) {
	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "results.json")
	bad := Check([]Section{{Client: 1, Resource: "a", Enter: 0, Exit: 10, Fence: 1}, {Client: 2, Resource: "a", Enter: 5, Exit: 20, Fence: 2}}, nil)
	if bad.Porcupine != porcupine.Illegal {
		t.Fatalf("porcupine %s on two overlapping sections, want Illegal", bad.Porcupine)
	}
	path := VisualisationPath(jsonPath, "restart-empty/fence-back")
	if want := filepath.Join(dir, "results-restart-empty-fence-back.html"); path != want {
		t.Fatalf("path %s, want %s", path, want)
	}
	if err := bad.WriteVisualisation(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "<html") || !strings.Contains(string(b), "acquire(a, #1, fence 2)") {
		t.Errorf("not porcupine's visualisation of the history (%d bytes)", len(b))
	}
	if bad.Visualisation != "results-restart-empty-fence-back.html" {
		t.Errorf("Visualisation %q", bad.Visualisation)
	}
	good := Check([]Section{{Client: 1, Resource: "a", Enter: 0, Exit: 10, Fence: 1}}, nil)
	if err := good.WriteVisualisation(filepath.Join(dir, "good.html")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "good.html")); err == nil || good.Visualisation != "" {
		t.Error("a legal history was drawn")
	}
}
