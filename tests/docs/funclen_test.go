package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// maxFuncLines is the longest a non-test function of the repository may
// be (issue: the wait path as a state machine, docs/design.md §14.4): the
// protocol reads one decision at a time, and so do the commands, the
// bench and the test suites' harnesses.
const maxFuncLines = 100

// TestNoLongFunctions walks every module of the repository (each one
// go.work uses: the library at the root, the adapters, the two commands,
// labdocker, sqlfence and the test suites) and fails on any non-test
// function longer than maxFuncLines, whatever its file's build tags.
func TestNoLongFunctions(t *testing.T) {
	mods := workModules(t)
	if len(mods) < 2 {
		t.Fatalf("go.work uses %d modules: the walk misses the repository", len(mods))
	}
	funcs := 0
	eachModuleFile(t, mods, func(p string, fset *token.FileSet, f *ast.File) {
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			funcs++
			if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxFuncLines {
				t.Errorf("%s: %s is %d lines, over %d", mustRel(t, root, p), fd.Name.Name, n, maxFuncLines)
			}
		}
	})
	t.Logf("%d functions in %d modules", funcs, len(mods))
}

// workModules returns the directories of the modules go.work uses,
// relative to the repository's root.
func workModules(t *testing.T) []string {
	t.Helper()
	name := filepath.Join(root, "go.work")
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	wf, err := modfile.ParseWork(name, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, u := range wf.Use {
		dirs = append(dirs, filepath.Clean(u.Path))
	}
	return dirs
}

// eachModuleFile parses every non-test Go file of the modules in mods
// (directories relative to the repository's root) and hands it to fn. A
// module's walk stops at a directory with a go.mod of its own (another
// module) and skips vendor and what skipDir skips (testdata, dot and "_"
// directories).
func eachModuleFile(t *testing.T, mods []string, fn func(path string, fset *token.FileSet, f *ast.File)) {
	t.Helper()
	fset := token.NewFileSet()
	for _, mod := range mods {
		top := filepath.Join(root, mod)
		err := filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if p == top {
					return nil
				}
				if d.Name() == "vendor" || skipDir(d.Name()) {
					return filepath.SkipDir
				}
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir // a module of its own
				}
				return nil
			}
			if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			fn(p, fset, f)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// eachLibraryFile parses every non-test Go file under dirs (relative to
// the repository's root) and hands it to fn.
func eachLibraryFile(t *testing.T, dirs []string, fn func(path string, fset *token.FileSet, f *ast.File)) {
	t.Helper()
	fset := token.NewFileSet()
	for _, dir := range dirs {
		top := filepath.Join(root, dir)
		err := filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, p, nil, 0)
			if err != nil {
				return err
			}
			fn(p, fset, f)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
