package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the longest a non-test function of the library may be
// (issue: the wait path as a state machine, docs/design.md §14.4): the
// protocol reads one decision at a time.
const maxFuncLines = 100

// TestNoLongFunctions walks the library's packages (the root module's
// redlock, internal, validity, lab and redlocktest) and fails on any
// non-test function longer than maxFuncLines.
func TestNoLongFunctions(t *testing.T) {
	eachLibraryFile(t, []string{"redlock", "internal", "validity", "lab", "redlocktest"}, func(p string, fset *token.FileSet, f *ast.File) {
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxFuncLines {
				t.Errorf("%s: %s is %d lines, over %d", p, fd.Name.Name, n, maxFuncLines)
			}
		}
	})
}

// eachLibraryFile parses every non-test Go file under dirs (relative to
// the repository's root) and hands it to fn.
func eachLibraryFile(t *testing.T, dirs []string, fn func(path string, fset *token.FileSet, f *ast.File)) {
	t.Helper()
	fset := token.NewFileSet()
	for _, dir := range dirs {
		root := filepath.Join("..", "..", dir)
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
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
