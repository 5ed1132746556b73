package docs

import (
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The public API of package redlock stays small, and every name in it is
// shown in use: in one of the package's examples or in README's table.
const (
	maxExported = 85  // types, functions, methods of exported types, constants, variables
	maxDocLines = 700 // go doc -all
)

// exported lists package redlock's exported names as go doc counts them:
// "Name" for a constant, variable, function or type, "Type.Method" for a
// method of an exported type.
func exported(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, "../../redlock", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pkgs {
		d := doc.New(p, "github.com/quorumlab/redlock/redlock", 0)
		values := func(vs []*doc.Value) {
			for _, v := range vs {
				names = append(names, v.Names...)
			}
		}
		values(d.Consts)
		values(d.Vars)
		for _, f := range d.Funcs {
			names = append(names, f.Name)
		}
		for _, ty := range d.Types {
			names = append(names, ty.Name)
			values(ty.Consts)
			values(ty.Vars)
			for _, f := range ty.Funcs {
				names = append(names, f.Name)
			}
			for _, m := range ty.Methods {
				names = append(names, ty.Name+"."+m.Name)
			}
		}
	}
	return names
}

func TestAPIIsSmall(t *testing.T) {
	names := exported(t)
	if len(names) > maxExported {
		t.Errorf("package redlock exports %d names, over %d: %v", len(names), maxExported, names)
	}
	out, err := exec.Command("go", "doc", "-all", "../../redlock").Output()
	if err != nil {
		t.Fatalf("go doc -all: %v", err)
	}
	if n := strings.Count(string(out), "\n"); n > maxDocLines {
		t.Errorf("go doc -all ./redlock prints %d lines, over %d", n, maxDocLines)
	}
	t.Logf("%d exported names, %d lines of go doc -all", len(names), strings.Count(string(out), "\n"))
}

// Every exported name is used in an example of package redlock (its code,
// not its comments) or named in README's table of calls.
func TestAPIIsShownInUse(t *testing.T) {
	var code strings.Builder
	files, _ := filepath.Glob("../../redlock/example*_test.go")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(b)) {
			if c, _, _ := strings.Cut(line, "//"); strings.TrimSpace(c) != "" {
				code.WriteString(c + "\n")
			}
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	for line := range strings.Lines(string(readme)) {
		if strings.HasPrefix(line, "|") {
			table.WriteString(line)
		}
	}
	for _, name := range exported(t) {
		ty, m, isMethod := strings.Cut(name, ".")
		used := regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`)
		if isMethod {
			used = regexp.MustCompile(`\.` + regexp.QuoteMeta(m) + `\b`)
		}
		named := regexp.MustCompile("`(" + regexp.QuoteMeta(ty) + `\.)?` + regexp.QuoteMeta(m+map[bool]string{false: ty}[isMethod]) + "[`(]")
		if !used.MatchString(code.String()) && !named.MatchString(table.String()) {
			t.Errorf("%s is used in no example of package redlock and named in no table of README.md", name)
		}
	}
}
