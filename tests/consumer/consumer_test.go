package consumer_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	library = "github.com/quorumlab/redlock"
	// maxConsumerModules is issue 39's bound on what a module importing
	// only the library names in its go.mod after go mod tidy (the
	// library, go-redis, the OpenTelemetry API and what they require;
	// scripts/check-consumer-deps.sh holds the list).
	maxConsumerModules = 12
	// notPublished is the repository's own test suites: a module in the
	// workspace that nobody builds or installs.
	notPublished = library + "/tests"
)

// A module of the workspace: its path, directory and go.mod.
type workModule struct {
	path, dir string
	mod       *modfile.File
}

// workspace reads go.work at root and the go.mod of every module it uses.
func workspace(t *testing.T, root string) []workModule {
	t.Helper()
	name := filepath.Join(root, "go.work")
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	wf, err := modfile.ParseWork(name, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ms []workModule
	for _, u := range wf.Use {
		dir := filepath.Join(root, filepath.FromSlash(u.Path))
		gm := filepath.Join(dir, "go.mod")
		data, err := os.ReadFile(gm)
		if err != nil {
			t.Fatal(err)
		}
		f, err := modfile.Parse(gm, data, nil)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, workModule{f.Module.Mod.Path, dir, f})
	}
	return ms
}

// publish writes module m at version into the proxy folder: the layout of
// the GOPROXY protocol (go help goproxy), with the zip made by the same
// code the go command uses.
func publish(t *testing.T, proxy string, m workModule, version string) {
	t.Helper()
	esc, err := module.EscapePath(m.path)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(proxy, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(m.dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	info := fmt.Sprintf(`{"Version":%q,"Time":%q}`+"\n", version, time.Now().UTC().Format(time.RFC3339))
	for name, data := range map[string][]byte{
		"list":            []byte(version + "\n"),
		version + ".info": []byte(info),
		version + ".mod":  gomod,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Create(filepath.Join(dir, version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := zip.CreateFromDir(f, module.Version{Path: m.path, Version: version}, m.dir); err != nil {
		t.Fatalf("zip of %s: %v", m.path, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func goEnv(t *testing.T, key string) string {
	t.Helper()
	out, err := exec.Command("go", "env", key).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", key, err)
	}
	return strings.TrimSpace(string(out))
}

// goCmd runs the go command in dir with env and returns its stdout; a
// failure fails the test with the command's output.
func goCmd(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	start := time.Now()
	cmd := exec.Command("go", args...)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	t.Logf("go %s: %.1fs", strings.Join(args, " "), time.Since(start).Seconds())
	return stdout.String()
}

// A module importing only the library, built against the published
// modules with the standard tools; then both commands installed with go
// install from the same proxy, each printing the tag for -version.
func TestPublishedModules(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and installs from a local module proxy (about a minute)")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	ms := workspace(t, root)

	// The tag every module requires of the library is the one published.
	var tag string
	for _, m := range ms {
		for _, r := range m.mod.Require {
			if r.Mod.Path == library {
				if tag != "" && r.Mod.Version != tag {
					t.Fatalf("%s requires %s %s, another module %s: every module requires the same tag", m.path, library, r.Mod.Version, tag)
				}
				tag = r.Mod.Version
			}
		}
	}
	if tag == "" {
		t.Fatalf("no module of go.work requires %s", library)
	}
	proxy := t.TempDir()
	published := map[string]bool{}
	for _, m := range ms {
		// go install refuses a module whose go.mod has replace or exclude
		// directives, and a consumer ignores them; go.work holds the
		// workspace's replaces.
		if len(m.mod.Replace) > 0 || len(m.mod.Exclude) > 0 {
			t.Errorf("%s/go.mod has replace or exclude directives: go install refuses it, and consumers ignore them", m.path)
		}
		if m.path == notPublished {
			continue
		}
		publish(t, proxy, m, tag)
		published[m.path] = true
	}
	for _, m := range ms {
		for _, r := range m.mod.Require {
			if strings.HasPrefix(r.Mod.Path, library) && (!published[r.Mod.Path] || r.Mod.Version != tag) {
				t.Errorf("%s requires %s %s, which is not a published module at %s", m.path, r.Mod.Path, r.Mod.Version, tag)
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Outside the repository, no workspace. The published modules come
	// from the proxy folder: it answers for every path the go command
	// asks about under the library's (a run with the usual proxy replaced
	// by an unreachable one passed), so none of these lookups reaches a
	// public proxy. Everything else comes from the shared module cache's
	// download folder (a proxy of what this machine already fetched),
	// else the usual proxy. No checksum database: these versions are made
	// here, and the cached modules were verified when first fetched
	// (checking them again costs about 50 s of lookups per run). A module
	// cache of its own keeps the made-up versions out of the shared one;
	// -trimpath keeps its path out of the build cache's keys, so a second
	// run reuses the compiled dependencies.
	cache, gobin, home := t.TempDir(), t.TempDir(), t.TempDir()
	upstream := goEnv(t, "GOPROXY")
	shared := goEnv(t, "GOMODCACHE")
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !strings.HasPrefix(k, "GO") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"GOWORK=off",
		"GOTOOLCHAIN=local",
		"GOCACHE="+goEnv(t, "GOCACHE"),
		"GOPATH="+home,
		"GOMODCACHE="+cache,
		"GOBIN="+gobin,
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(filepath.Join(shared, "cache", "download"))+","+upstream,
		"GOSUMDB=off",
		"GOFLAGS=-modcacherw -trimpath",
	)
	modEnv := append(env[:len(env):len(env)], "GOFLAGS=-mod=mod -modcacherw -trimpath")

	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/consumer\n\ngo "+ms[0].mod.Go.Version+"\n")
	write("main.go", `package main

import (
	"fmt"

	"github.com/quorumlab/redlock/redlock"
)

func main() {
	_, err := redlock.NewFromURLs(nil, nil)
	fmt.Println(err)
}
`)
	goCmd(t, dir, modEnv, "get", library+"@"+tag)
	goCmd(t, dir, modEnv, "mod", "tidy")
	goCmd(t, dir, modEnv, "build", "./...")
	goCmd(t, dir, modEnv, "vet", "./...")
	if doc := goCmd(t, dir, modEnv, "doc", library+"/redlock"); !strings.Contains(doc, "package redlock") {
		t.Errorf("go doc %s/redlock:\n%s", library, doc)
	}
	all := goCmd(t, dir, modEnv, "list", "-m", "all")
	for _, l := range strings.Split(strings.TrimSpace(all), "\n") {
		if f := strings.Fields(l); strings.HasPrefix(f[0], library) && f[0] != library {
			t.Errorf("go list -m all names %s: a module importing the library gets no other module of this repository", l)
		}
	}
	goCmd(t, dir, modEnv, "list", "-m", "-u", "all")

	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse("go.mod", data, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(f.Require); n > maxConsumerModules {
		t.Errorf("the consumer's go.mod names %d modules, more than %d:\n%s", n, maxConsumerModules, data)
	}
	t.Logf("the consumer's go.mod names %d modules", len(f.Require))

	// go install pkg@version, from a directory outside any module.
	for _, cmd := range []string{"redlock", "redlock-bench"} {
		goCmd(t, t.TempDir(), env, "install", library+"/cmd/"+cmd+"@"+tag)
		out, err := exec.Command(filepath.Join(gobin, cmd), "-version").CombinedOutput()
		if err != nil {
			t.Fatalf("%s -version: %v\n%s", cmd, err, out)
		}
		if f := strings.Fields(string(out)); len(f) < 2 || f[0] != cmd || f[1] != tag {
			t.Errorf("%s -version printed %q, want %q then the tag %s", cmd, out, cmd, tag)
		}
	}
}
