package docs

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// reSession finds the word for a stretch of work that the docs and
// comments must not use: a reference is read long after the work that
// wrote it, so a figure dated by such a stretch ("this one", "two
// before") dates nothing. Name the commit and the date instead.
// CHANGELOG.md is exempt.
var reSession = regexp.MustCompile(`(?i)\bsessions?\b`)

// reEtcdSession is the one use of the word that names no stretch of work:
// etcd's session, the etcd client's object (package concurrency) that
// holds the lease a lock or an election rides on, as the bench's -h says
// it and docs/bench.md copies it.
var reEtcdSession = regexp.MustCompile(`(?i)\betcd's sessions?\b`)

// sessionWord returns the first match of reSession in line, etcd's session
// aside, or "".
func sessionWord(line string) string {
	return reSession.FindString(reEtcdSession.ReplaceAllString(line, ""))
}

// skipDir reports whether a directory holds no file of the repository
// proper: .git and other dot directories, testdata, and "_" directories
// (which the go command ignores, and which TestDocBlocksCompile uses for
// its generated blocks).
func skipDir(name string) bool {
	return name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

// docFiles returns README.md and every .md file under docs/, relative to
// the repository root.
func docFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, f := range markdownFiles(t) {
		if f == "README.md" || strings.HasPrefix(f, "docs/") {
			files = append(files, f)
		}
	}
	return files
}

// No match of reSession in README.md, docs/**/*.md, or any Go comment.
func TestWordsNoSession(t *testing.T) {
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := sessionWord(line); m != "" {
				t.Errorf("%s:%d: %q: %s", f, i+1, m, strings.TrimSpace(line))
			}
		}
	}

	fset := token.NewFileSet()
	parsed := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		parsed++
		for _, g := range f.Comments {
			for _, c := range g.List {
				for i, line := range strings.Split(c.Text, "\n") {
					if m := sessionWord(line); m != "" {
						pos := fset.Position(c.Slash)
						t.Errorf("%s:%d: comment says %q: %s", mustRel(t, root, p), pos.Line+i, m, strings.TrimSpace(line))
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if parsed < 100 {
		t.Errorf("parsed %d Go files: the walk misses the repository", parsed)
	}
}

// The check itself: the word in either number and any case, not inside
// another word.
func TestWordsPattern(t *testing.T) {
	for text, want := range map[string]bool{
		"measured this session":         true,
		"two Sessions before":           true,
		"a SESSION":                     true,
		"session-wide":                  true,
		"sessionless":                   false,
		"the newSession helper":         false,
		"a lease the client keeps live": false,
		"etcd's session lease TTL":      false,
		"etcd's session, this session":  true,
	} {
		if got := sessionWord(text) != ""; got != want {
			t.Errorf("%q: matched %v, want %v", text, got, want)
		}
	}
}
