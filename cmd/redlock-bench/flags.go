package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// usageError is a bad command line: main prints it and exits 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// config is the parsed, validated command line.
type config struct {
	addrs       []string         // -addrs as host:port (no user or password: they go in reports)
	masterOpts  []*redis.Options // -addrs as client options: address, and from URLs TLS, user, password, DB
	masters     int
	repeat      int // each group of cells runs this many times, order alternating; the median is reported
	clusters    int // -cluster NxS: N lab Redis Clusters (cluster.go)
	shards      int // of S shards each
	embedded    bool
	docker      bool  // -docker: five containers started by labdocker (docker.go)
	workers     []int // worker counts, in the order given; each runs every cell
	lockers     int   // -lockers: separate Lockers (client sets) per cell, each with the workers
	duration    time.Duration
	ttl         time.Duration
	scenarios   []string
	impls       []string
	jsonPath    string
	chartPath   string
	quiet       bool
	printSchema bool
	version     bool
	metricsAddr string
	cpuProfile  string // -cpuprofile: this process's CPU profile over the cells
	leases      int    // -leases: how many the leases scenario keeps
	// The election scenarios (election.go).
	electionTTL time.Duration // -election-ttl: ours' lock TTL and etcd's lease TTL
	campaigners int           // -campaigners
	failovers   int           // -failovers: rounds per implementation
}

// Defaults sized for "go run ./cmd/redlock-bench" to finish in about 40 s
// on a 2-core machine, so that a cold first run (modules downloaded, the
// build compiled) stays under two minutes: 4 implementations × 3 scenarios
// × 3 s = 36 s of measurement, plus start-up and draining. A -workers
// sweep multiplies the measurement by the number of counts
// (docs/decisions/2026-12-07-first-run-length.md).
const (
	defaultMasters  = 5
	defaultWorkers  = 8
	maxWorkers      = 4096 // per cell; more is a usage error
	maxLockers      = 1024 // -lockers
	defaultDuration = 3 * time.Second
	defaultTTL      = 10 * time.Second
	minDuration     = 100 * time.Millisecond
)

const usageHead = `redlock-bench measures Lock+Unlock throughput, acquire latency and the
validity left at acquisition for this module's redlock and for
go-redsync/redsync, on the same masters, in one run, and prints ratios.

Masters, in this order: -addrs if given; else %d local redis-server masters
started through package lab (pause = SIGSTOP); else, when redis-server is not
installed (or with -embedded), %d miniredis masters in a child process of
the bench (pause = the node's mutex held). Embedded masters measure library
overhead over loopback, not a real server, and are labelled so.
With -cluster NxS, each master is instead a local Redis Cluster of S shards.

Implementations (each gets its own default go-redis clients):
%s
Scenarios (cells run one after another, never concurrently; keys are deleted
between cells; with several -workers counts, each scenario runs once per
count for every implementation):
%s
Retry policies: every implementation's Lock uses its own defaults
(redsync: 32 tries, 50-250 ms apart; ours: until the cell ends, 5-100 ms
jittered backoff; single: ours). Both redsync variants get -ttl as expiry so
validity is comparable. Failures that happen because the cell's time ran out
are not counted.

Build tags add what the default build leaves out (their flags say so when
it is missing): charts (-chart), docker (-docker, the partition scenario),
otel (the telemetry scenario, -metrics-addr), peers (the -impls on other
clients, and the other locks), etcd (-impls etcd: etcd's mutex and election
on a 3-member etcd cluster the bench starts; needs etcd on PATH, Debian's
etcd-server): go run -tags charts,peers ./cmd/redlock-bench

Usage: redlock-bench [flags]

Flags:
`

// rawFlags are the flags parseFlags checks and turns into config fields:
// their text as given, and which flags the command line set.
type rawFlags struct {
	addrs     string
	scenarios string
	impls     string
	workers   string
	cluster   string
	tlsCA     string
	set       map[string]bool
}

// parseFlags parses args (without the program name). -h prints the usage to
// help (stdout) and returns flag.ErrHelp; a bad flag is a short usageError,
// without the usage.
func parseFlags(args []string, help io.Writer) (*config, error) {
	var (
		cfg config
		raw rawFlags
	)
	fs := newFlagSet(&cfg, &raw)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(help)
			fs.Usage()
			return nil, err
		}
		return nil, &usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q (every option is a flag; see -h)", fs.Arg(0))
	}
	raw.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { raw.set[f.Name] = true })
	for _, step := range []func(*config) error{raw.resolveMasters, checkExtras, checkRanges, raw.resolveSelections} {
		if err := step(&cfg); err != nil {
			return nil, err
		}
	}
	return &cfg, nil
}

// newFlagSet defines the bench's flags: the ones with a config field of
// their own write to cfg, the others to raw for parseFlags to check. Its
// usage is the help text (usageHead, then the flags).
func newFlagSet(cfg *config, raw *rawFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("redlock-bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&raw.addrs, "addrs", "", "comma-separated `list` of independent masters to use, each host:port (e.g. the compose lab:\n127.0.0.1:7001,...,127.0.0.1:7005) or a redis:// or rediss:// (TLS) URL, with an ACL user and password if\n"+
		"needed: rediss://user:password@host:port (go-redis's ParseURL; reports show host:port only). stall then uses\n"+
		"CLIENT PAUSE, which a restricted ACL user may not be allowed. Default: start our own")
	fs.StringVar(&raw.tlsCA, "tls-ca", "", "trust the CA certificates in PEM `FILE` (instead of the system's) for TLS masters: rediss:// URLs, and\n"+
		"host:port entries of -addrs, which then use TLS too")
	fs.IntVar(&cfg.masters, "masters", defaultMasters, "how many masters to start when -addrs is not given")
	fs.StringVar(&raw.cluster, "cluster", "", "start `NxS` local Redis Clusters as the masters: N independent clusters of S shard masters each\n(e.g. 3x3; redis-server in cluster mode, no replicas), each one master reached through a go-redis ClusterClient;\nstall then stops every shard of a cluster")
	fs.IntVar(&cfg.leases, "leases", 10000, "how many leases the leases scenario keeps with one Locker (-scenarios leases)")
	fs.BoolVar(&cfg.embedded, "embedded", false, "use embedded miniredis masters (in a child process) even if redis-server is installed")
	fs.BoolVar(&cfg.docker, "docker", false, "start the masters as Docker containers of the local image ($REDLOCK_REDIS_IMAGE; make image) with labdocker:\n"+
		"stall is docker pause, and the partition scenario (docker network disconnect) can run")
	fs.StringVar(&raw.workers, "workers", strconv.Itoa(defaultWorkers), "concurrent workers (goroutines) per cell, or a comma-separated `list` of counts to sweep (e.g. 1,8,64,256):\n"+
		"every scenario × implementation then runs once per count, in the order given; ratios compare the same\n"+
		"scenario and count, and a summary line per scenario gives redlock ÷ redsync-failfast at each count.\n"+
		"Each count is a whole number from 1 to "+strconv.Itoa(maxWorkers)+". -chart draws each scenario at its largest count only")
	fs.IntVar(&cfg.lockers, "lockers", 1, "open each implementation `N` times per cell, each with its own go-redis clients and\n"+
		"connections (N processes' worth of Lockers or redsync client sets), and run the -workers count on each:\n"+
		"a cell then has N × workers goroutines. Contended cells report fairness across them (acquisitions per\n"+
		"Locker, min ÷ max). From 1 to "+strconv.Itoa(maxLockers))
	fs.DurationVar(&cfg.duration, "duration", defaultDuration, "measured time per cell (implementation × scenario × worker count)")
	fs.IntVar(&cfg.repeat, "repeat", 1, "run each scenario × worker count's cells `N` times, interleaved (in order, then reversed, ...), and report\n"+
		"for each implementation its run of median throughput, with every run's ops/s (for ratios robust to a noisy machine)")
	fs.DurationVar(&cfg.ttl, "ttl", defaultTTL, "lock TTL for every implementation (whole milliseconds; etcd's session lease TTL is it rounded up to whole seconds)")
	fs.DurationVar(&cfg.electionTTL, "election-ttl", defaultElectionTTL, "the election scenarios' TTL, whole seconds: ours' lock TTL and etcd's session lease TTL alike\n"+
		"(a failover waits for the dead leader's lock or lease to expire)")
	fs.IntVar(&cfg.campaigners, "campaigners", defaultCampaigners, "campaigners per election (election scenarios), each with clients of its own; in election-failover one of them\n"+
		"is the leader, a child process. From 2 to "+strconv.Itoa(maxCampaigners))
	fs.IntVar(&cfg.failovers, "failovers", defaultFailovers, "election-failover rounds per implementation, interleaved (each waits out a TTL). From 1 to "+strconv.Itoa(maxFailovers))
	fs.StringVar(&raw.scenarios, "scenarios", "", "comma-separated scenarios to run, or \"all\". Default: every one not marked \"only when named\"")
	fs.StringVar(&raw.impls, "impls", strings.Join(implNames(), ","), "comma-separated implementations to run, or \"all\"")
	fs.StringVar(&cfg.jsonPath, "json", "", "also write the results as JSON (schema: -schema) to `FILE`")
	fs.StringVar(&cfg.chartPath, "chart", "", "also write an SVG `FILE` with latency and validity-margin CDFs per implementation and scenario")
	fs.BoolVar(&cfg.quiet, "q", false, "no progress line on stderr (it is off anyway when stderr is not a terminal)")
	fs.BoolVar(&cfg.printSchema, "schema", false, "print the JSON Schema of -json output and exit")
	fs.BoolVar(&cfg.version, "version", false, "print the version (module version and VCS revision) and exit")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write this process's CPU profile over the measured cells to `FILE` (go tool pprof): the implementations'\n"+
		"clients and the bench's own sampling, never the masters, which are always other processes (redis-server\n"+
		"started by lab or -cluster, containers, -addrs, or the embedded masters' child process)")
	fs.StringVar(&cfg.metricsAddr, "metrics-addr", "", "serve the redlock-otel cells' metrics in Prometheus format at http://`host:port`/metrics while the bench runs (-scenarios telemetry)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), usageHead, defaultMasters, defaultMasters, describeImpls(), describeScenarios())
		fs.PrintDefaults()
	}
	return fs
}

// resolveMasters checks -tls-ca, -addrs and -cluster and sets cfg's
// masters from them: the -addrs entries' options, or the cluster shape,
// and the number of masters either implies.
func (raw *rawFlags) resolveMasters(cfg *config) error {
	var ca *x509.CertPool
	if raw.tlsCA != "" {
		if raw.addrs == "" {
			return usagef("-tls-ca needs -addrs (the masters the bench starts itself do not use TLS)")
		}
		var err error
		if ca, err = readCA(raw.tlsCA); err != nil {
			return usagef("-tls-ca: %v", err)
		}
	}
	if raw.addrs != "" {
		for i, a := range slices.Collect(strings.SplitSeq(raw.addrs, ",")) {
			o, err := masterOptions(strings.TrimSpace(a), ca)
			if err != nil {
				return usagef("-addrs: entry %d: %v", i+1, err)
			}
			if slices.Contains(cfg.addrs, o.Addr) {
				return usagef("-addrs: %s is listed twice; a quorum needs independent masters", o.Addr)
			}
			cfg.addrs = append(cfg.addrs, o.Addr)
			cfg.masterOpts = append(cfg.masterOpts, o)
		}
		if cfg.embedded {
			return usagef("-addrs and -embedded exclude each other")
		}
		if raw.set["masters"] && cfg.masters != len(cfg.addrs) {
			return usagef("-masters %d contradicts -addrs, which lists %d", cfg.masters, len(cfg.addrs))
		}
		cfg.masters = len(cfg.addrs)
	}
	if raw.cluster != "" {
		var err error
		if cfg.clusters, cfg.shards, err = parseClusterShape(raw.cluster); err != nil {
			return err
		}
		if len(cfg.addrs) > 0 || cfg.embedded {
			return usagef("-cluster excludes -addrs and -embedded")
		}
		if raw.set["masters"] && cfg.masters != cfg.clusters {
			return usagef("-masters %d contradicts -cluster, which starts %d clusters", cfg.masters, cfg.clusters)
		}
		cfg.masters = cfg.clusters
	}
	return nil
}

// checkExtras refuses the flags of optional parts this build leaves out
// (extras.go), and -docker beside another source of masters.
func checkExtras(cfg *config) error {
	switch {
	case cfg.docker && !dockerBuilt:
		return usagef("-docker: %s", extraHint("docker"))
	case cfg.chartPath != "" && !chartsBuilt:
		return usagef("-chart: %s", extraHint("charts"))
	case cfg.metricsAddr != "" && !otelBuilt:
		return usagef("-metrics-addr: %s", extraHint("otel"))
	}
	if cfg.docker && (len(cfg.addrs) > 0 || cfg.embedded || cfg.clusters > 0) {
		return usagef("-docker excludes -addrs, -embedded and -cluster")
	}
	return nil
}

// checkRanges refuses numeric flags outside their range.
func checkRanges(cfg *config) error {
	switch {
	case cfg.masters < 1:
		return usagef("-masters must be at least 1, got %d", cfg.masters)
	case cfg.lockers < 1 || cfg.lockers > maxLockers:
		return usagef("-lockers must be from 1 to %d, got %d", maxLockers, cfg.lockers)
	case cfg.repeat < 1 || cfg.repeat > 99:
		return usagef("-repeat must be from 1 to 99, got %d", cfg.repeat)
	case cfg.duration < minDuration:
		return usagef("-duration must be at least %v, got %v", minDuration, cfg.duration)
	case cfg.leases <= 0:
		return usagef("-leases must be positive, got %d", cfg.leases)
	case cfg.ttl <= 0 || cfg.ttl%time.Millisecond != 0:
		return usagef("-ttl must be a positive whole number of milliseconds, got %v", cfg.ttl)
	case cfg.electionTTL <= 0 || cfg.electionTTL%time.Second != 0:
		return usagef("-election-ttl must be a positive whole number of seconds (etcd's lease TTLs are), got %v", cfg.electionTTL)
	case cfg.campaigners < 2 || cfg.campaigners > maxCampaigners:
		return usagef("-campaigners must be from 2 to %d, got %d", maxCampaigners, cfg.campaigners)
	case cfg.failovers < 1 || cfg.failovers > maxFailovers:
		return usagef("-failovers must be from 1 to %d, got %d", maxFailovers, cfg.failovers)
	}
	return nil
}

// resolveSelections parses -workers, -scenarios and -impls into cfg: the
// scenarios and implementations this build can run, with a usage error
// for one named that it cannot.
func (raw *rawFlags) resolveSelections(cfg *config) error {
	var err error
	if cfg.workers, err = parseWorkers(raw.workers); err != nil {
		return err
	}
	if err := raw.pickScenarios(cfg); err != nil {
		return err
	}
	if err := raw.pickImpls(cfg); err != nil {
		return err
	}
	if slices.ContainsFunc(cfg.scenarios, isElectionScenario) && len(cfg.electionImpls()) == 0 {
		return usagef("-scenarios %s, %s run %s; -impls names none of them", handoverScenario, failoverScenario, strings.Join(electionNames, " and "))
	}
	return nil
}

// pickScenarios sets cfg.scenarios from -scenarios (default: every one
// not opt-in). A scenario this run cannot do is a usage error when named,
// and left out of "all".
func (raw *rawFlags) pickScenarios(cfg *config) error {
	scenarios := raw.scenarios
	if strings.TrimSpace(scenarios) == "" {
		scenarios = strings.Join(defaultScenarios(), ",")
	}
	var err error
	if cfg.scenarios, err = pickNames("-scenarios", scenarios, scenarioNames()); err != nil {
		return err
	}
	all := strings.TrimSpace(scenarios) == "all"
	for _, u := range []struct {
		name    string
		missing bool
		err     func() error
	}{
		{"partition", !cfg.docker, func() error {
			return usagef("-scenarios partition needs -docker (only containers can be cut off their network)")
		}},
		{"telemetry", !otelBuilt, func() error { return usagef("-scenarios telemetry: %s", extraHint("otel")) }},
		{"sqlfence", !sqlfenceBuilt, func() error { return usagef("-scenarios sqlfence: %s", extraHint("sqlfence")) }},
	} {
		if slices.Contains(cfg.scenarios, u.name) && u.missing {
			if !all {
				return u.err()
			}
			cfg.scenarios = slices.DeleteFunc(cfg.scenarios, func(n string) bool { return n == u.name })
		}
	}
	return nil
}

// pickImpls sets cfg.impls from -impls: the default ones, or those named
// (opt-in ones included), refusing those this build leaves out.
func (raw *rawFlags) pickImpls(cfg *config) error {
	impls := raw.impls
	if !peersBuilt {
		for n := range strings.SplitSeq(impls, ",") {
			if n = strings.TrimSpace(n); slices.Contains(peerNames, n) {
				return usagef("-impls %s: %s", n, extraHint("peers"))
			}
		}
	}
	if !etcdBuilt {
		for n := range strings.SplitSeq(impls, ",") {
			if strings.TrimSpace(n) == etcdImplName {
				return usagef("-impls %s: %s", etcdImplName, extraHint("etcd"))
			}
		}
	}
	known := implNames()
	if s := strings.TrimSpace(impls); s != "" && s != "all" {
		known = append(known, optInImplNames()...) // named ones only
	}
	var err error
	cfg.impls, err = pickNames("-impls", impls, known)
	return err
}

// electionImpls are the selected implementations that have an election,
// in -impls order.
func (c *config) electionImpls() []string {
	var out []string
	for _, n := range c.impls {
		if slices.Contains(electionNames, n) {
			out = append(out, n)
		}
	}
	return out
}

// pickNames parses a comma-separated selection from known; "" means def,
// "all" means def too (every available one). Order follows known.
func pickNames(flagName, list string, known []string) ([]string, error) {
	list = strings.TrimSpace(list)
	if list == "" || list == "all" {
		return slices.Clone(known), nil
	}
	want := map[string]bool{}
	for n := range strings.SplitSeq(list, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(known, n) {
			return nil, usagef("%s: unknown name %q (known: %s)", flagName, n, strings.Join(known, ", "))
		}
		want[n] = true
	}
	var out []string
	for _, n := range known {
		if want[n] {
			out = append(out, n)
		}
	}
	return out, nil
}

// parseWorkers parses -workers: one count or a comma-separated list of
// distinct counts, each from 1 to maxWorkers, kept in the order given. A bad
// entry is a usage error that names it.
func parseWorkers(list string) ([]int, error) {
	var out []int
	for e := range strings.SplitSeq(list, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			return nil, usagef("-workers: empty entry in %q (want a count or a comma-separated list, e.g. 1,8,64)", list)
		}
		n, err := strconv.Atoi(e)
		if errors.Is(err, strconv.ErrRange) {
			// A whole number beyond int: clamp it so the checks below
			// name it as too small or too large.
			n, err = maxWorkers+1, nil
			if strings.HasPrefix(e, "-") {
				n = 0
			}
		}
		switch {
		case err != nil:
			return nil, usagef("-workers: %q is not a whole number", e)
		case n < 1:
			return nil, usagef("-workers: %q must be at least 1", e)
		case n > maxWorkers:
			return nil, usagef("-workers: %q is more than the maximum of %d", e, maxWorkers)
		case slices.Contains(out, n):
			return nil, usagef("-workers: %q is listed twice", e)
		}
		out = append(out, n)
	}
	return out, nil
}

// masterOptions turns one -addrs entry into client options: host:port
// (TLS when ca is set), or a redis:// or rediss:// URL as redis.ParseURL
// reads it (user, password, DB, TLS). Errors never quote the password.
func masterOptions(spec string, ca *x509.CertPool) (*redis.Options, error) {
	if !strings.Contains(spec, "://") {
		if _, _, err := net.SplitHostPort(spec); err != nil {
			return nil, fmt.Errorf("%q is not host:port or a redis:// or rediss:// URL: %v", spec, err)
		}
		o := &redis.Options{Addr: spec}
		if ca != nil {
			o.TLSConfig = &tls.Config{RootCAs: ca, MinVersion: tls.VersionTLS12}
		}
		return o, nil
	}
	u, err := url.Parse(spec)
	if err != nil {
		return nil, errors.New("not a valid URL (not quoted: it may hold a password)")
	}
	o, err := redis.ParseURL(spec)
	if err != nil {
		msg := err.Error()
		if p, ok := u.User.Password(); ok && p != "" {
			msg = strings.ReplaceAll(msg, p, "xxxxx")
		}
		return nil, fmt.Errorf("%s: %s", u.Redacted(), msg)
	}
	if _, _, err := net.SplitHostPort(o.Addr); err != nil || u.Port() == "" {
		return nil, fmt.Errorf("%s: want host:port in the URL", u.Redacted())
	}
	if ca != nil {
		if o.TLSConfig == nil {
			return nil, fmt.Errorf("%s: -tls-ca is for TLS masters; use rediss://", u.Redacted())
		}
		o.TLSConfig.RootCAs = ca
	}
	return o, nil
}

// readCA reads PEM certificates from path.
func readCA(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}
