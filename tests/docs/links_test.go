package docs

import (
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

var (
	// A fenced code block: ``` or ~~~, up to the same fence.
	reCodeFence = regexp.MustCompile("(?ms)^[ \t]*(```|~~~)[^\n]*\n.*?^[ \t]*(```|~~~)[ \t]*$")
	// An inline code span (single or double backticks).
	reCodeSpan = regexp.MustCompile("``[^`]*``|`[^`]*`")
	// An inline link or image: ](target) or ](target "title").
	reInlineLink = regexp.MustCompile(`\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	// A link reference definition: [label]: target
	reRefDef = regexp.MustCompile(`(?m)^[ ]{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)`)
	// An ATX heading.
	reHeading = regexp.MustCompile(`(?m)^[ ]{0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$`)
	// An explicit HTML anchor: <a name="x"> or id="x".
	reHTMLAnchor = regexp.MustCompile(`(?i)<a\s[^>]*(?:name|id)="([^"]+)"`)
	// A link inside a heading's text: [text](target) becomes text.
	reLinkInText = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

// stripCode blanks fenced blocks and code spans, keeping line numbers.
func stripCode(doc string) string {
	blank := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r == '\n' {
				return r
			}
			return ' '
		}, s)
	}
	doc = reCodeFence.ReplaceAllStringFunc(doc, blank)
	return reCodeSpan.ReplaceAllStringFunc(doc, blank)
}

// anchor is the fragment GitHub gives a heading: its text lowercased,
// every character but letters, digits, '_', '-' and space dropped (so §
// goes), spaces turned to '-'.
func anchor(heading string) string {
	text := reLinkInText.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns every fragment a Markdown document defines: one per
// heading outside code (a repeated one gets -1, -2, ... as on GitHub) and
// the explicit HTML anchors.
func anchors(doc string) map[string]bool {
	doc = reCodeFence.ReplaceAllString(doc, "")
	seen := map[string]int{}
	out := map[string]bool{}
	for _, m := range reHeading.FindAllStringSubmatch(doc, -1) {
		a := anchor(m[2])
		if n := seen[a]; n > 0 {
			out[a+"-"+itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	for _, m := range reHTMLAnchor.FindAllStringSubmatch(doc, -1) {
		out[m[1]] = true
	}
	return out
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + itoa(n%10)
}

// link is one relative link of a Markdown file.
type link struct {
	line   int
	target string
}

// links returns the relative links of doc (not http(s):, mailto: or any
// other scheme), outside code.
func links(doc string) []link {
	doc = stripCode(doc)
	var out []link
	add := func(idx []int) {
		target := doc[idx[2]:idx[3]]
		if target == "" {
			return
		}
		if u, err := url.Parse(target); err == nil && u.Scheme != "" {
			return // http:, https:, mailto:, ...
		}
		out = append(out, link{strings.Count(doc[:idx[0]], "\n") + 1, target})
	}
	for _, idx := range reInlineLink.FindAllStringSubmatchIndex(doc, -1) {
		add(idx)
	}
	for _, idx := range reRefDef.FindAllStringSubmatchIndex(doc, -1) {
		add(idx)
	}
	return out
}

// markdownFiles returns every .md file of the repository, relative to its
// root (README.md, CHANGELOG.md, docs/**, docker/README.md, ...).
func markdownFiles(t *testing.T) []string {
	t.Helper()
	var files []string
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
		if strings.HasSuffix(p, ".md") {
			files = append(files, mustRel(t, root, p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// Every relative link of every Markdown file names a file that exists,
// and its #fragment, if any, a heading of that file.
func TestDocLinksResolve(t *testing.T) {
	files := markdownFiles(t)
	if len(files) < 5 {
		t.Fatalf("found %d Markdown files: the walk misses the repository", len(files))
	}
	cache := map[string]map[string]bool{}
	anchorsOf := func(rel string) (map[string]bool, error) {
		if a, ok := cache[rel]; ok {
			return a, nil
		}
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return nil, err
		}
		cache[rel] = anchors(string(b))
		return cache[rel], nil
	}
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links(string(b)) {
			checked++
			path, frag, _ := strings.Cut(l.target, "#")
			if p, err := url.PathUnescape(path); err == nil {
				path = p
			}
			target := f
			if path != "" {
				target = filepath.Join(filepath.Dir(f), filepath.FromSlash(path))
			}
			if rel, err := filepath.Rel(".", target); err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("%s:%d: %s leaves the repository", f, l.line, l.target)
				continue
			}
			st, err := os.Stat(filepath.Join(root, target))
			if err != nil {
				t.Errorf("%s:%d: %s: no such file", f, l.line, l.target)
				continue
			}
			if frag == "" {
				continue
			}
			if st.IsDir() || !strings.HasSuffix(target, ".md") {
				t.Errorf("%s:%d: %s: a fragment on a file that is not Markdown", f, l.line, l.target)
				continue
			}
			a, err := anchorsOf(target)
			if err != nil {
				t.Fatal(err)
			}
			if !a[frag] {
				t.Errorf("%s:%d: %s: no heading of %s gives #%s", f, l.line, l.target, filepath.ToSlash(target), frag)
			}
		}
	}
	if checked == 0 {
		t.Error("no relative link found in the Markdown files: the patterns no longer match")
	}
	t.Logf("%d links checked in %d files", checked, len(files))
}

// The check itself: anchors as GitHub makes them, links found outside
// code only, schemes skipped.
func TestLinksParsing(t *testing.T) {
	for heading, want := range map[string]string{
		"§3 Assumptions, and what breaks each":           "3-assumptions-and-what-breaks-each",
		"§14.3 Handing the key to the head of the queue": "143-handing-the-key-to-the-head-of-the-queue",
		"A million: `make chaos-soak`":                   "a-million-make-chaos-soak",
		"Where one acquisition's CPU goes":               "where-one-acquisitions-cpu-goes",
		"The run on commit c7ee1d8 (2026-11-27)":         "the-run-on-commit-c7ee1d8-2026-11-27",
		"See [design](design.md) first":                  "see-design-first",
		"wait_table × 2":                                 "wait_table--2",
	} {
		if got := anchor(heading); got != want {
			t.Errorf("anchor(%q) = %q, want %q", heading, got, want)
		}
	}
	doc := "# Title\n## Title\n```\n# not a heading [x](gone.md)\n```\n" +
		"[a](b.md#c) `[d](e.md)` [f](https://x.org/g) [h](mailto:i@j) ![k](l.png \"t\")\n[m]: n.md\n"
	var got []string
	for _, l := range links(doc) {
		got = append(got, l.target)
	}
	if want := "b.md#c l.png n.md"; strings.Join(got, " ") != want {
		t.Errorf("links: got %q, want %q", strings.Join(got, " "), want)
	}
	a := anchors(doc)
	if !a["title"] || !a["title-1"] || a["not-a-heading-xgonemd"] || len(a) != 2 {
		t.Errorf("anchors: got %v, want title and title-1", a)
	}
}
