package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// maxFileLines is the longest a non-test Go file of the library may be: a
// file holds one job, and a reader sees its whole shape.
const maxFileLines = 600

// libraryDirs are the root module's packages: what a consumer of the
// library compiles.
var libraryDirs = []string{"redlock", "internal", "validity", "quorum", "lab", "redlocktest"}

// TestNoLongFiles fails on any non-test Go file of the library longer
// than maxFileLines.
func TestNoLongFiles(t *testing.T) {
	eachLibraryFile(t, libraryDirs, func(p string, fset *token.FileSet, f *ast.File) {
		if n := fset.Position(f.FileEnd).Line; n > maxFileLines {
			t.Errorf("%s is %d lines, over %d", p, n, maxFileLines)
		}
	})
}

// TestInternalImportsNoProtocol holds the layering: the packages under
// internal/ (the transport, the wait's state machine, the simulator's
// models) are below package redlock and never import it.
func TestInternalImportsNoProtocol(t *testing.T) {
	const protocol = "github.com/quorumlab/redlock/redlock"
	eachLibraryFile(t, []string{"internal"}, func(p string, _ *token.FileSet, f *ast.File) {
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); path == protocol {
				t.Errorf("%s imports %s", p, protocol)
			}
		}
	})
}

// maxCycleFiles bounds package redlock's cycle (TestRedlockFileCycle):
// the size measured when the bound was set, so that the cycle only
// shrinks. The aim, at most half the package's files, is met: the
// Locker, the Lock and the types of their fields are declared in files
// that name nothing of the files above them (lockerstate.go,
// lockstate.go, and what they name), and the constructors (newlocker.go)
// in a file that nothing names back. What is left is the waker's four
// files (wake.go, grant.go, subscriptions.go, watch.go), whose types
// refer to each other's.
const maxCycleFiles = 4

// TestRedlockFileCycle measures how tangled package redlock's files are: a
// file uses another when it names a package-level function, type,
// variable or constant declared there (methods and fields are not
// counted: they are reached through a value, not a name). The largest
// strongly connected component of that graph is the package's cycle: the
// files that cannot be read, or moved out, one without the others. It
// must hold no more than maxCycleFiles.
//
// Run `go test ./tests/docs -run TestRedlockFileCycle -v` to print the
// cycle's files.
func TestRedlockFileCycle(t *testing.T) {
	uses := fileUses(t, "redlock")
	cycle := largestCycle(uses)
	t.Logf("package redlock: %d non-test files, %d in its largest cycle: %s",
		len(uses), len(cycle), strings.Join(cycle, " "))
	if len(cycle) > maxCycleFiles {
		t.Errorf("the cycle holds %d of %d files, over %d", len(cycle), len(uses), maxCycleFiles)
	}
}

// fileUses returns, for each non-test file of the package in dir, the
// set of the package's other files whose package-level names it uses.
func fileUses(t *testing.T, dir string) map[string]map[string]bool {
	t.Helper()
	declared := map[string]string{} // package-level name -> file
	files := map[string]*ast.File{}
	eachLibraryFile(t, []string{dir}, func(p string, _ *token.FileSet, f *ast.File) {
		if filepath.Dir(p) != filepath.Join("..", "..", dir) {
			return // a subpackage
		}
		name := filepath.Base(p)
		files[name] = f
		for _, decl := range f.Decls {
			for _, id := range declaredNames(decl) {
				declared[id] = name
			}
		}
	})
	uses := map[string]map[string]bool{}
	for name, f := range files {
		uses[name] = map[string]bool{}
		declaring := map[*ast.Ident]bool{} // names a declaration introduces, not uses
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				declaring[n.Name] = true // a method's name is not resolved in the file
			case *ast.Field:
				for _, id := range n.Names {
					declaring[id] = true // a field's, a method's or a parameter's name
				}
			}
			return true
		})
		ast.Inspect(f, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && declaring[id] {
				return true
			}
			switch n := n.(type) {
			case *ast.SelectorExpr:
				ast.Inspect(n.X, func(m ast.Node) bool { return visitUse(m, name, declared, uses) })
				return false // n.Sel names a field, a method or an import's member
			case *ast.KeyValueExpr:
				if _, ok := n.Key.(*ast.Ident); ok {
					ast.Inspect(n.Value, func(m ast.Node) bool { return visitUse(m, name, declared, uses) })
					return false // a composite literal's key may name a field
				}
			}
			return visitUse(n, name, declared, uses)
		})
	}
	return uses
}

// visitUse records an identifier that the parser left unresolved in its
// file (so not a local, a parameter or a name of the same file) and that
// names another file's package-level declaration.
func visitUse(n ast.Node, file string, declared map[string]string, uses map[string]map[string]bool) bool {
	id, ok := n.(*ast.Ident)
	if !ok || id.Obj != nil {
		return true
	}
	if other, ok := declared[id.Name]; ok && other != file {
		uses[file][other] = true
	}
	return true
}

// declaredNames lists the package-level names a declaration introduces
// (functions, not methods; types, variables, constants).
func declaredNames(decl ast.Decl) []string {
	var names []string
	switch d := decl.(type) {
	case *ast.FuncDecl:
		if d.Recv == nil && d.Name.Name != "init" && d.Name.Name != "_" {
			names = append(names, d.Name.Name)
		}
	case *ast.GenDecl:
		for _, spec := range d.Specs {
			switch s := spec.(type) {
			case *ast.TypeSpec:
				names = append(names, s.Name.Name)
			case *ast.ValueSpec:
				for _, id := range s.Names {
					if id.Name != "_" {
						names = append(names, id.Name)
					}
				}
			}
		}
	}
	return names
}

// largestCycle returns the largest strongly connected component of the
// graph (Tarjan's algorithm), its files sorted; a file alone is a cycle
// only if it is its own component, so the result is empty when there is
// no cycle of two files or more.
func largestCycle(g map[string]map[string]bool) []string {
	nodes := make([]string, 0, len(g))
	for n := range g {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	index, low := map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack, best []string
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = len(index), len(index)
		stack = append(stack, v)
		onStack[v] = true
		for w := range g[v] {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		var comp []string
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			comp = append(comp, w)
			if w == v {
				break
			}
		}
		if len(comp) > 1 && len(comp) > len(best) {
			best = comp
		}
	}
	for _, v := range nodes {
		if _, seen := index[v]; !seen {
			visit(v)
		}
	}
	sort.Strings(best)
	return best
}

// The tests of package redlock run mostly without a master: the timing of
// a hand-off, a queue or a wake is chosen by a test on in-memory masters
// and a clock it moves, and real-master tests wait for events, not for
// time. maxMasterShare bounds the share of its test functions that start
// redis-server; maxTestSleeps the time.Sleep calls in its tests.
const (
	maxMasterShare = 0.60
	maxTestSleeps  = 10
)

// masterStarters are package lab's functions that start redis-server.
var masterStarters = map[string]bool{"ForTest": true, "Start": true, "ClustersForTest": true, "StartClusters": true}

// TestRedlockTestsMostlyInMemory counts package redlock's test functions
// whose body reaches a master starter (directly, or through a function or
// method of the package's test files, matched by name, which can only
// count too many), and its tests' time.Sleep calls. Run it with -v to print
// the counts.
func TestRedlockTestsMostlyInMemory(t *testing.T) {
	dir := filepath.Join("..", "..", "redlock")
	paths, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no test files in %s: %v", dir, err)
	}
	fset := token.NewFileSet()
	calls := map[string]map[string]bool{} // a package and function name -> names it calls
	starts := map[string]bool{}
	var tests []string
	sleeps := 0
	for _, p := range paths {
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			key := f.Name.Name + "." + fd.Name.Name
			if fd.Recv == nil && strings.HasPrefix(fd.Name.Name, "Test") && fd.Name.Name != "TestMain" {
				tests = append(tests, key)
			}
			if calls[key] == nil {
				calls[key] = map[string]bool{}
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.SelectorExpr:
					if x, ok := n.X.(*ast.Ident); ok && x.Name == "lab" && masterStarters[n.Sel.Name] {
						starts[key] = true
					}
					if x, ok := n.X.(*ast.Ident); ok && x.Name == "time" && n.Sel.Name == "Sleep" {
						sleeps++
					}
					calls[key][f.Name.Name+"."+n.Sel.Name] = true
				case *ast.Ident:
					calls[key][f.Name.Name+"."+n.Name] = true
				}
				return true
			})
		}
	}
	for changed := true; changed; {
		changed = false
		for key, called := range calls {
			for c := range called {
				if !starts[key] && starts[c] {
					starts[key], changed = true, true
				}
			}
		}
	}
	n := 0
	for _, k := range tests {
		if starts[k] {
			n++
		}
	}
	share := float64(n) / float64(len(tests))
	t.Logf("package redlock: %d test functions, %d start a master (%.1f %%); %d time.Sleep calls in its tests", len(tests), n, 100*share, sleeps)
	if share > maxMasterShare {
		t.Errorf("%d of %d test functions start a master, over %.0f %%", n, len(tests), 100*maxMasterShare)
	}
	if sleeps > maxTestSleeps {
		t.Errorf("%d time.Sleep calls in package redlock's tests, over %d", sleeps, maxTestSleeps)
	}
}
