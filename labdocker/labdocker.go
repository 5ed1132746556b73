// Package labdocker is the lab's Docker backend: each master of a
// lab.Masters runs in a container on a network of its own, driven with
// testcontainers-go. It is a module of its own so that an importer of
// redlock never loads testcontainers-go or the Docker client.
//
// The image must be present locally (make image builds one FROM scratch
// out of the host's redis-server): nothing is ever pulled. Ryuk, the
// reaper container testcontainers-go would pull, is turned off; every
// container and network carries the labels redlock-lab.cluster and
// redlock-lab.pid instead, Close removes them by label, and the next
// Start removes those of a process that died without closing (Sweep).
package labdocker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	mnet "github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/quorumlab/redlock/lab"
)

const (
	// DefaultImage is what machines with a registry get; machines without
	// one build a local image (make image) and set REDLOCK_REDIS_IMAGE.
	DefaultImage = "redis:7.4-alpine"
	imageEnv     = "REDLOCK_REDIS_IMAGE"

	// LabelCluster is set on every container and network a cluster
	// creates, to the cluster's id: docker ps -a --filter
	// label=redlock-lab.cluster lists them.
	LabelCluster = "redlock-lab.cluster"
	labelMaster  = "redlock-lab.master"
	// labelPID and labelHost name the process that created them, so Sweep
	// can tell a crashed run's leftovers from a live one's.
	labelPID  = "redlock-lab.pid"
	labelHost = "redlock-lab.host"

	startTimeout = 30 * time.Second // from create to answering PING
	opTimeout    = 30 * time.Second // one pause, kill, cut or cleanup
)

var setup sync.Once

// prepare turns Ryuk off (its image cannot be pulled here; label-based
// cleanup replaces it) unless the environment says otherwise, and routes
// testcontainers-go's own log lines away from the test output.
func prepare() {
	setup.Do(func() {
		if os.Getenv("TESTCONTAINERS_RYUK_DISABLED") == "" {
			_ = os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
		}
		tclog.SetDefault(tclog.NewNoopLogger())
	})
}

// Image returns image, else $REDLOCK_REDIS_IMAGE, else DefaultImage.
func Image(image string) string {
	if image != "" {
		return image
	}
	if v := os.Getenv(imageEnv); v != "" {
		return v
	}
	return DefaultImage
}

func newClient(ctx context.Context) (*testcontainers.DockerClient, error) {
	prepare()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", lab.ErrNoDocker, err)
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("%w: Docker engine does not answer: %w", lab.ErrNoDocker, err)
	}
	return cli, nil
}

func checkImage(ctx context.Context, cli *testcontainers.DockerClient, image string) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if _, err := cli.ImageInspect(ctx, image); err != nil {
		return fmt.Errorf("%w: image %s is not present locally and the lab never pulls: run make image, or set REDLOCK_REDIS_IMAGE (or Options.Image) to a local image (%w)", lab.ErrNoDocker, image, err)
	}
	return nil
}

// Available returns nil if a Docker engine answers and the default image
// ($REDLOCK_REDIS_IMAGE, else DefaultImage) is present locally; otherwise
// an error wrapping lab.ErrNoDocker that says which is missing.
func Available(ctx context.Context) error {
	cli, err := newClient(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	return checkImage(ctx, cli, Image(""))
}

// Options returns a copy of o (nil: the zero Options) set for the Docker
// backend, for callers that start clusters with lab.Start themselves.
func Options(o *lab.Options) *lab.Options {
	var c lab.Options
	if o != nil {
		c = *o
	}
	c.Backend, c.NewDriver = lab.Docker, NewDriver
	return &c
}

// Start starts n masters in containers, as lab.Start does with
// Options(opts). On error nothing is left.
func Start(ctx context.Context, n int, opts *lab.Options) (*lab.Masters, error) {
	return lab.Start(ctx, n, Options(opts))
}

// ForTest starts n Docker masters and closes them in tb.Cleanup. It skips
// the test, saying why, where there is no engine or no image.
func ForTest(tb testing.TB, n int, opts *lab.Options) *lab.Masters {
	tb.Helper()
	if err := Available(tb.Context()); err != nil {
		tb.Skipf("skipping: needs Docker masters: %v", err)
	}
	return lab.ForTest(tb, n, Options(opts))
}

// Sweep removes the containers and networks of clusters whose creating
// process, on this host, has exited: what a crashed or killed run left.
// NewDriver runs it once per process. It returns how many it removed.
func Sweep(ctx context.Context) (int, error) {
	cli, err := newClient(ctx)
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	return sweep(ctx, cli, func(labels map[string]string) bool {
		host, _ := os.Hostname()
		pid, err := strconv.Atoi(labels[labelPID])
		if err != nil || labels[labelHost] != host || pid == os.Getpid() {
			return false
		}
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	})
}

// sweep removes every labelled container and then network for which
// dead(labels) holds.
func sweep(ctx context.Context, cli *testcontainers.DockerClient, dead func(map[string]string) bool) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	f := client.Filters{}.Add("label", LabelCluster)
	ctrs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return 0, fmt.Errorf("labdocker: listing containers: %w", err)
	}
	var errs []error
	n := 0
	for _, c := range ctrs.Items {
		if !dead(c.Labels) {
			continue
		}
		if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	nets, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		return n, errors.Join(append(errs, fmt.Errorf("labdocker: listing networks: %w", err))...)
	}
	for _, nw := range nets.Items {
		if !dead(nw.Labels) {
			continue
		}
		if _, err := cli.NetworkRemove(ctx, nw.ID, client.NetworkRemoveOptions{}); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

var sweepOnce sync.Once

// driver runs each master in a container on the cluster's network, its
// port 6379 published on a 127.0.0.1 port picked at first start and kept
// by every restart and heal, so that clients keep their address.
type driver struct {
	image  string
	aof    bool
	id     string
	labels map[string]string
	log    *slog.Logger
	cli    *testcontainers.DockerClient
	net    *testcontainers.DockerNetwork
	nodes  []*node
}

type node struct {
	i      int
	mu     sync.Mutex
	port   int
	ctr    *testcontainers.DockerContainer // nil while the master is down
	paused bool
	cut    bool // disconnected, or to be disconnected once started
	closed bool
}

// NewDriver is the lab.NewDriver of the Docker backend: it checks the
// engine and the image, sweeps a crashed run's leftovers, and creates the
// cluster's network. Options sets it.
func NewDriver(ctx context.Context, n int, o lab.Options) (lab.Driver, error) {
	cli, err := newClient(ctx)
	if err != nil {
		return nil, err
	}
	image := Image(o.Image)
	if err := checkImage(ctx, cli, image); err != nil {
		_ = cli.Close()
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sweepOnce.Do(func() {
		if k, err := Sweep(ctx); k > 0 || err != nil {
			log.Info("labdocker: removed what a crashed run left", "removed", k, "err", err)
		}
	})
	var raw [6]byte
	_, _ = rand.Read(raw[:])
	host, _ := os.Hostname()
	d := &driver{
		image: image, aof: o.AppendFsyncAlways, id: hex.EncodeToString(raw[:]), log: log, cli: cli,
	}
	d.labels = map[string]string{LabelCluster: d.id, labelPID: strconv.Itoa(os.Getpid()), labelHost: host}
	for i := range n {
		d.nodes = append(d.nodes, &node{i: i})
	}
	nctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	d.net, err = network.New(nctx, network.WithDriver("bridge"), network.WithLabels(d.labels))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("labdocker: creating the network: %w", err), d.Close())
	}
	log.Debug("labdocker: network created", "network", d.net.Name, "image", image)
	return d, nil
}

func (d *driver) cmd() []string {
	// enable-debug-command yes, not local: through a published port the
	// client is the bridge gateway, which Redis does not count as local.
	args := []string{"redis-server", "--save", "", "--protected-mode", "no", "--enable-debug-command", "yes", "--loglevel", "warning"}
	if d.aof {
		return append(args, "--appendonly", "yes", "--appendfsync", "always")
	}
	return append(args, "--appendonly", "no")
}

func (d *driver) Start(ctx context.Context, i int) (string, error) {
	nd := d.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.closed {
		return "", errClosed
	}
	// A port picked here rather than by Docker: a dynamic binding would
	// move when Heal reconnects the network. Another process may take it
	// first; then a fresh one.
	var err error
	for range 5 {
		var port int
		if port, err = freePort(); err != nil {
			return "", err
		}
		if err = d.launch(ctx, nd, port); err == nil {
			return nd.addr(), nil
		}
		if !portTaken(err) {
			return "", err
		}
	}
	return "", err
}

var errClosed = errors.New("labdocker: cluster closed")

// freePort returns a 127.0.0.1 port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("labdocker: finding a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// portTaken is the engine's wording for a host port someone else holds.
func portTaken(err error) bool {
	s := err.Error()
	return strings.Contains(s, "port is already allocated") || strings.Contains(s, "address already in use")
}

func (nd *node) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(nd.port)) }

func (d *driver) Restart(ctx context.Context, i int, keep bool) error {
	if keep {
		return errors.New("labdocker: the Docker backend restarts masters empty only (RestartPersisted needs the Process backend)")
	}
	nd := d.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.closed {
		return errClosed
	}
	if err := d.killLocked(nd); err != nil {
		return err
	}
	// A new container rather than a restart of the old one: it starts
	// EMPTY even with AOF on, as the process backend's Restart does. The
	// same host port: a lost race for it is retried for a short while.
	var err error
	for range 5 {
		if err = d.launch(ctx, nd, nd.port); err == nil || !portTaken(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return err
}

// launch runs a container for nd publishing port, on the
// cluster's network only (so a disconnect takes its port away), and waits
// until it answers PING through that port. On failure it is gone.
func (d *driver) launch(ctx context.Context, nd *node, port int) error {
	labels := map[string]string{labelMaster: strconv.Itoa(nd.i)}
	for k, v := range d.labels {
		labels[k] = v
	}
	hostPort := strconv.Itoa(port)
	sctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	ctr, err := testcontainers.Run(sctx, d.image,
		testcontainers.WithName(fmt.Sprintf("redlock-lab-%s-%d", d.id, nd.i)),
		testcontainers.WithCmd(d.cmd()...),
		testcontainers.WithLabels(labels),
		testcontainers.WithExposedPorts("6379/tcp"),
		network.WithNetwork(nil, d.net),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.PortBindings = mnet.PortMap{
				mnet.MustParsePort("6379/tcp"): {{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: hostPort}},
			}
		}),
		testcontainers.WithWaitStrategyAndDeadline(startTimeout, pingStrategy{}),
	)
	if err != nil {
		// Run hands back the container it created even when the start or
		// the wait failed: remove it.
		if ctr != nil {
			_ = ctr.Terminate(context.WithoutCancel(ctx), testcontainers.StopTimeout(0))
		}
		return fmt.Errorf("labdocker: master %d (image %s) did not start: %w", nd.i, d.image, err)
	}
	p, err := ctr.MappedPort(sctx, "6379/tcp")
	if err != nil {
		_ = ctr.Terminate(context.WithoutCancel(ctx), testcontainers.StopTimeout(0))
		return fmt.Errorf("labdocker: master %d: published port: %w", nd.i, err)
	}
	nd.ctr, nd.port, nd.paused = ctr, int(p.Num()), false
	if nd.cut {
		if err := d.disconnect(nd); err != nil {
			return err
		}
	}
	d.log.Debug("labdocker: master started", "master", nd.i, "addr", nd.addr(), "container", ctr.GetContainerID()[:12])
	return nil
}

// pingStrategy is the wait strategy: PING through the published port
// until +PONG. Docker's proxy accepts before redis-server listens, so a
// listening port proves nothing; the local image has no shell for the
// library's exec-based checks.
type pingStrategy struct{}

func (pingStrategy) WaitUntilReady(ctx context.Context, t wait.StrategyTarget) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		p, err := t.MappedPort(ctx, "6379/tcp")
		if err == nil {
			if last = ping(ctx, net.JoinHostPort("127.0.0.1", strconv.Itoa(int(p.Num())))); last == nil {
				return nil
			}
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no PONG: %w (last: %v)", ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// ping sends PING over a raw connection, which honours deadlines.
func ping(ctx context.Context, addr string) error {
	dl := net.Dialer{Timeout: 200 * time.Millisecond}
	conn, err := dl.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := io.WriteString(conn, "PING\r\n"); err != nil {
		return err
	}
	buf := make([]byte, 7)
	if _, err := io.ReadFull(conn, buf); err != nil {
		return err
	}
	if string(buf) != "+PONG\r\n" {
		return fmt.Errorf("unexpected reply %q", buf)
	}
	return nil
}

func opCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), opTimeout)
}

// Pause freezes the container (docker pause: the cgroup freezer); its
// published port still accepts, and nothing answers.
func (d *driver) Pause(i int) error {
	nd := d.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.ctr == nil {
		return fmt.Errorf("labdocker: pause master %d: not running", i)
	}
	if nd.paused {
		return nil
	}
	ctx, cancel := opCtx()
	defer cancel()
	if _, err := d.cli.ContainerPause(ctx, nd.ctr.GetContainerID(), client.ContainerPauseOptions{}); err != nil {
		return fmt.Errorf("labdocker: pause master %d: %w", i, err)
	}
	nd.paused = true
	return nil
}

func (d *driver) Resume(i int) error {
	nd := d.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.ctr == nil || !nd.paused {
		nd.paused = false
		return nil
	}
	ctx, cancel := opCtx()
	defer cancel()
	if _, err := d.cli.ContainerUnpause(ctx, nd.ctr.GetContainerID(), client.ContainerUnpauseOptions{}); err != nil {
		return fmt.Errorf("labdocker: resume master %d: %w", i, err)
	}
	nd.paused = false
	return nil
}

func (d *driver) Kill(i int) error {
	nd := d.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return d.killLocked(nd)
}

// killLocked removes the container by force, paused or not (SIGKILL, then
// removal with its volumes); the host port is free when it returns.
func (d *driver) killLocked(nd *node) error {
	if nd.ctr == nil {
		return nil
	}
	ctx, cancel := opCtx()
	defer cancel()
	id := nd.ctr.GetContainerID()
	// Terminate stops with no grace (SIGKILL), removes the container with
	// its volumes, and closes the container's engine connection.
	if err := nd.ctr.Terminate(ctx, testcontainers.StopTimeout(0)); err != nil {
		if _, rerr := d.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); rerr != nil && !cerrdefs.IsNotFound(rerr) {
			return fmt.Errorf("labdocker: kill master %d: %w", nd.i, errors.Join(err, rerr))
		}
	}
	d.log.Debug("labdocker: master killed", "master", nd.i, "container", id[:12])
	nd.ctr, nd.paused = nil, false
	return nil
}

// Cut disconnects the container from its network, which also takes its
// published port away: new connections are refused, open ones get EOF.
func (d *driver) Cut(i int) error {
	nd := d.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.cut {
		return nil
	}
	if nd.ctr != nil {
		if err := d.disconnect(nd); err != nil {
			return err
		}
	}
	nd.cut = true
	return nil
}

func (d *driver) disconnect(nd *node) error {
	ctx, cancel := opCtx()
	defer cancel()
	if _, err := d.cli.NetworkDisconnect(ctx, d.net.ID, client.NetworkDisconnectOptions{Container: nd.ctr.GetContainerID(), Force: true}); err != nil {
		return fmt.Errorf("labdocker: cut master %d: %w", nd.i, err)
	}
	return nil
}

// Heal reconnects the container; its port comes back with the network
// (the same host port: it is bound explicitly after the first start).
func (d *driver) Heal(i int) error {
	nd := d.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if !nd.cut {
		return nil
	}
	if nd.ctr != nil {
		ctx, cancel := opCtx()
		defer cancel()
		if _, err := d.cli.NetworkConnect(ctx, d.net.ID, client.NetworkConnectOptions{Container: nd.ctr.GetContainerID()}); err != nil {
			return fmt.Errorf("labdocker: heal master %d: %w", i, err)
		}
	}
	nd.cut = false
	return nil
}

// Close removes every container of the cluster (paused ones too), then the
// network, and sweeps by label for anything a failed start left.
func (d *driver) Close() error {
	var errs []error
	for _, nd := range d.nodes {
		nd.mu.Lock()
		nd.closed = true
		errs = append(errs, d.killLocked(nd))
		nd.mu.Unlock()
	}
	ctx, cancel := opCtx()
	defer cancel()
	if _, err := sweep(ctx, d.cli, func(l map[string]string) bool { return l[LabelCluster] == d.id }); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, d.cli.Close())
	return errors.Join(errs...)
}
