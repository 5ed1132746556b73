package docs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// block is one fenced ```go block of a Markdown file.
type block struct {
	file string // relative to the module root
	line int    // of the opening fence
	text string
}

var (
	reFence   = regexp.MustCompile("(?m)^```go[ \t]*\n((?s).*?)^```[ \t]*$")
	rePackage = regexp.MustCompile(`(?m)^package main\b`)
	reFunc    = regexp.MustCompile(`(?m)^func `)
	reImport  = regexp.MustCompile(`(?m)^import\b`)
)

// goBlocks returns the blocks of doc marked as a program or a function.
func goBlocks(file, doc string) []block {
	var bs []block
	for _, m := range reFence.FindAllStringSubmatchIndex(doc, -1) {
		text := doc[m[2]:m[3]]
		if rePackage.MatchString(text) || reFunc.MatchString(text) {
			bs = append(bs, block{file, strings.Count(doc[:m[0]], "\n") + 1, text})
		}
	}
	return bs
}

// imports a function block may use without listing them: the package
// names the docs use, by the identifier that selects from them.
var knownImports = map[string]string{
	"context":      "context",
	"errors":       "errors",
	"fmt":          "fmt",
	"log":          "log",
	"time":         "time",
	"testing":      "testing",
	"redis":        "github.com/redis/go-redis/v9",
	"redlock":      "github.com/quorumlab/redlock/redlock",
	"redlocktest":  "github.com/quorumlab/redlock/redlocktest",
	"redsync":      "github.com/go-redsync/redsync/v4",
	"redsyncredis": "github.com/go-redsync/redsync/v4/redis",
	"goredis":      "github.com/go-redsync/redsync/v4/redis/goredis/v9",
}

// source turns a block into a compilable file: a program as it is; a
// function block gets a package clause and, unless it has its own import
// declaration, the known packages it selects from (in code, not comments).
func source(b block) string {
	if rePackage.MatchString(b.text) {
		return b.text
	}
	body := "package doc\n\n" + b.text
	if reImport.MatchString(b.text) {
		return body
	}
	f, err := parser.ParseFile(token.NewFileSet(), "block.go", body, parser.SkipObjectResolution)
	if err != nil {
		return body // the build reports the syntax error
	}
	used := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if s, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := s.X.(*ast.Ident); ok {
				used[id.Name] = true
			}
		}
		return true
	})
	var s strings.Builder
	s.WriteString("package doc\n\n")
	for name, path := range knownImports {
		if used[name] {
			fmt.Fprintf(&s, "import %s %q\n", name, path)
		}
	}
	s.WriteString(b.text)
	return s.String()
}

// compile builds every block as a package of its own, in one go build,
// under a directory inside the module (so the module's own packages and
// go.sum resolve, offline from the module cache). It returns the build's
// failure output per block.
func compile(t *testing.T, root string, bs []block) map[int]string {
	t.Helper()
	// "_" makes ./... skip the directory; it is removed when the test ends.
	dir, err := os.MkdirTemp(filepath.Join(root, "tests", "docs"), "_gen")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	args := []string{"build"}
	for _, b := range bs {
		if rePackage.MatchString(b.text) {
			// Programs are linked into dir, not the module root (-o wants
			// at least one program).
			args = append(args, "-o", filepath.Join(dir, "bin")+string(filepath.Separator))
			break
		}
	}
	for i, b := range bs {
		d := filepath.Join(dir, fmt.Sprintf("b%d", i))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "block.go"), []byte(source(b)), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "./"+filepath.ToSlash(mustRel(t, root, d)))
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	failed := map[int]string{}
	if err == nil {
		return failed
	}
	for i := range bs {
		tag := fmt.Sprintf("%cb%d%c", filepath.Separator, i, filepath.Separator)
		var lines []string
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, tag) {
				lines = append(lines, l)
			}
		}
		if len(lines) > 0 {
			failed[i] = strings.Join(lines, "\n")
		}
	}
	if len(failed) == 0 {
		t.Fatalf("go build failed, naming no block:\n%s", out)
	}
	return failed
}

func mustRel(t *testing.T, base, target string) string {
	t.Helper()
	r, err := filepath.Rel(base, target)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// docBlocks reads README.md and docs/*.md.
func docBlocks(t *testing.T, root string) []block {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	var bs []block
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		bs = append(bs, goBlocks(mustRel(t, root, f), string(b))...)
	}
	return bs
}

const root = "../.."

// Every marked Go block of the docs compiles.
func TestDocBlocksCompile(t *testing.T) {
	bs := docBlocks(t, root)
	if len(bs) == 0 {
		t.Fatal("no Go block marked as a program or a function in README.md or docs/")
	}
	hasProgram := false
	for _, b := range bs {
		if b.file == "README.md" && rePackage.MatchString(b.text) {
			hasProgram = true
		}
	}
	if !hasProgram {
		t.Error("README.md: no Go block with package main (the getting-started program)")
	}
	for i, msg := range compile(t, root, bs) {
		t.Errorf("%s:%d: the Go block does not compile:\n%s", bs[i].file, bs[i].line, msg)
	}
	t.Logf("%d blocks compiled", len(bs))
}

// The check itself: a block using an undefined name fails, a fragment is
// not taken for a block, and a good block passes.
func TestCompileCatchesUndefinedName(t *testing.T) {
	doc := "text\n```go\nlock, err := locker.TryLock(ctx, \"x\") // a fragment\n```\n" +
		"```go\nfunc good(ctx context.Context, l *redlock.Locker) error {\n\t_, err := l.TryLock(ctx, \"x\")\n\treturn err\n}\n```\n" +
		"```go\nfunc bad(ctx context.Context) error {\n\treturn work(ctx)\n}\n```\n"
	bs := goBlocks("x.md", doc)
	if len(bs) != 2 {
		t.Fatalf("%d marked blocks, want 2 (the fragment stays unmarked)", len(bs))
	}
	failed := compile(t, root, bs)
	if _, ok := failed[0]; ok {
		t.Errorf("the good block failed: %s", failed[0])
	}
	if msg, ok := failed[1]; !ok || !strings.Contains(msg, "undefined: work") {
		t.Errorf("the block using an undefined name: got %q, want a failure naming undefined: work", msg)
	}
}
