package lab

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tcnetwork "github.com/testcontainers/testcontainers-go/network"
)

const (
	// defaultImage is what users with a registry get; machines without one
	// build a local image (make image) and set REDLOCK_REDIS_IMAGE.
	defaultImage = "redis:7.4-alpine"
	imageEnv     = "REDLOCK_REDIS_IMAGE"

	// labelCluster is set on every container and network a Docker cluster
	// creates, to the cluster's id, so that Close (and a person, after a
	// crash) can find them: docker ps -a --filter label=redlock-lab.cluster.
	labelCluster = "redlock-lab.cluster"
	labelMaster  = "redlock-lab.master"

	// Bounds on engine work, so no call hangs on a stuck daemon. A container
	// start measured about 0.3 s on Docker 20.10 here; 30 s leaves room for
	// a loaded CI machine.
	dockerStartTimeout = 30 * time.Second // from create to answering PING
	dockerOpTimeout    = 30 * time.Second // one pause, kill, cut or cleanup
)

// redisPort is the port redis-server listens on inside the container.
var redisPort = network.MustParsePort("6379/tcp")

func imageOrDefault(image string) string {
	if image != "" {
		return image
	}
	if v := os.Getenv(imageEnv); v != "" {
		return v
	}
	return defaultImage
}

// DockerAvailable returns nil if a Docker engine answers and the default
// image ($REDLOCK_REDIS_IMAGE, else redis:7.4-alpine) is present locally,
// so that Start with the Docker backend can run without pulling anything;
// otherwise an error wrapping ErrNoDocker that says which is missing. Tests
// call it to skip where Docker is absent.
func DockerAvailable(ctx context.Context) error {
	cl, err := dockerClient(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	return checkImage(ctx, cl, imageOrDefault(""))
}

// disableReaper turns off testcontainers' Ryuk reaper unless the user chose
// otherwise. Ryuk is a container of its own that must be pulled, which fails
// where there is no registry; the lab removes what it creates itself (Close,
// and ForTest's tb.Cleanup). testcontainers reads its configuration once per
// process from the environment, so this must run before its first use.
// Set TESTCONTAINERS_RYUK_DISABLED=false where Ryuk can be pulled to have
// the containers of a crashed test binary reaped too.
func disableReaper() {
	const env = "TESTCONTAINERS_RYUK_DISABLED"
	if _, ok := os.LookupEnv(env); !ok {
		_ = os.Setenv(env, "true")
	}
}

// dockerClient connects to the engine testcontainers finds (DOCKER_HOST,
// Docker contexts, rootless sockets) and checks that it answers.
func dockerClient(ctx context.Context) (*testcontainers.DockerClient, error) {
	disableReaper()
	cl, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: no Docker engine: %w", ErrNoDocker, err)
	}
	if _, err := cl.Ping(ctx, client.PingOptions{}); err != nil {
		_ = cl.Close()
		return nil, fmt.Errorf("%w: Docker engine does not answer: %w", ErrNoDocker, err)
	}
	return cl, nil
}

func checkImage(ctx context.Context, cl *testcontainers.DockerClient, image string) error {
	_, err := cl.ImageInspect(ctx, image)
	switch {
	case errdefs.IsNotFound(err):
		return fmt.Errorf("%w: image %s is not present locally and the lab never pulls: run make image, or set REDLOCK_REDIS_IMAGE (or Options.Image) to a local image", ErrNoDocker, image)
	case err != nil:
		return fmt.Errorf("%w: inspecting image %s: %w", ErrNoDocker, image, err)
	}
	return nil
}

// dockerBackend runs each master in a container on a network created for
// the cluster, its port 6379 published on a fixed 127.0.0.1 port chosen at
// first start, so that Heal and Restart bring it back on the same address.
type dockerBackend struct {
	image string
	aof   bool
	id    string // random; the labelCluster value and part of every name
	net   string // the network's name
	log   *slog.Logger
	cl    *testcontainers.DockerClient
	nodes []*dockerNode
}

var (
	_ backend = (*dockerBackend)(nil)
	_ cutter  = (*dockerBackend)(nil)
)

type dockerNode struct {
	i int

	mu     sync.Mutex
	port   int
	ctr    *testcontainers.DockerContainer // nil while the master is down
	paused bool
	cut    bool // disconnected, or to be disconnected once started
	closed bool
}

func (nd *dockerNode) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(nd.port)) }

// newDockerBackend checks the engine and the image, then creates the
// cluster's network. The caller must close it.
func newDockerBackend(ctx context.Context, image string, aof bool, n int, log *slog.Logger) (*dockerBackend, error) {
	cl, err := dockerClient(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkImage(ctx, cl, image); err != nil {
		_ = cl.Close()
		return nil, err
	}
	var raw [6]byte
	_, _ = rand.Read(raw[:]) // never fails (crypto/rand)
	id := hex.EncodeToString(raw[:])
	b := &dockerBackend{image: image, aof: aof, id: id, net: "redlock-lab-" + id, log: log, cl: cl}
	for i := range n {
		b.nodes = append(b.nodes, &dockerNode{i: i})
	}
	// Created directly rather than with testcontainers' network.New, which
	// names it by UUID and logs through its global logger.
	// testcontainers' own labels too, so that Ryuk, when on, reaps it.
	labels := testcontainers.GenericLabels()
	maps.Copy(labels, b.labels())
	_, err = cl.NetworkCreate(ctx, b.net, client.NetworkCreateOptions{
		Driver: "bridge",
		Labels: labels,
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("lab: creating network %s: %w", b.net, err), b.close())
	}
	log.Debug("lab: docker network created", "network", b.net, "image", image)
	return b, nil
}

func (b *dockerBackend) labels() map[string]string {
	return map[string]string{labelCluster: b.id}
}

func (b *dockerBackend) cmd() []string {
	// enable-debug-command yes, not local: through a published port the
	// client is the bridge gateway, which Redis does not count as local.
	args := []string{
		"redis-server",
		"--save", "",
		"--protected-mode", "no",
		"--enable-debug-command", "yes",
		"--loglevel", "warning",
	}
	if b.aof {
		return append(args, "--appendonly", "yes", "--appendfsync", "always")
	}
	return append(args, "--appendonly", "no")
}

// opCtx bounds one engine call made by a method that has no ctx of its own.
func opCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), dockerOpTimeout)
}

func (b *dockerBackend) start(ctx context.Context, i int) (string, error) {
	nd := b.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.closed {
		return "", errClosed
	}
	if err := launchOnFreePort(b.log, i, func(port int) error { return b.launch(ctx, nd, port) }); err != nil {
		return "", err
	}
	return nd.addr(), nil
}

func (b *dockerBackend) restart(ctx context.Context, i int, keep bool) error {
	if keep {
		return errors.New("lab: the Docker backend restarts masters empty only (RestartPersisted needs the Process backend)")
	}
	nd := b.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.closed {
		return errClosed
	}
	if err := b.killLocked(nd); err != nil {
		return err
	}
	// A new container rather than docker restart: it starts EMPTY even with
	// AOF on, as the process backend's Restart does.
	return relaunchOnPort(ctx, nd.port, func(port int) error { return b.launch(ctx, nd, port) })
}

// tcLogger sends testcontainers' log lines to the lab's logger at debug.
type tcLogger struct{ log *slog.Logger }

func (l tcLogger) Printf(format string, v ...any) {
	if l.log.Enabled(context.Background(), slog.LevelDebug) {
		l.log.Debug("lab: testcontainers: " + strings.TrimSpace(fmt.Sprintf(format, v...)))
	}
}

// launch creates and starts a container for nd publishing port, on the
// cluster's network only (so a disconnect takes its port away), and waits
// until it answers PING. On failure the container is gone.
func (b *dockerBackend) launch(ctx context.Context, nd *dockerNode, port int) error {
	labels := b.labels()
	labels[labelMaster] = strconv.Itoa(nd.i)
	hostPort := strconv.Itoa(port)
	ctr, err := testcontainers.Run(ctx, b.image,
		testcontainers.WithLogger(tcLogger{b.log}),
		testcontainers.WithName(fmt.Sprintf("%s-%d", b.net, nd.i)),
		testcontainers.WithCmd(b.cmd()...),
		testcontainers.WithLabels(labels),
		testcontainers.WithExposedPorts(redisPort.String()),
		tcnetwork.WithNetworkName(nil, b.net),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.NetworkMode = container.NetworkMode(b.net)
			hc.PortBindings = network.PortMap{redisPort: {{
				HostIP:   netip.AddrFrom4([4]byte{127, 0, 0, 1}),
				HostPort: hostPort,
			}}}
		}),
	)
	if err != nil {
		if ctr != nil {
			tctx, cancel := opCtx()
			_ = ctr.Terminate(tctx, testcontainers.StopTimeout(0))
			cancel()
		}
		// The engine's wording for a host port someone else holds.
		if s := err.Error(); strings.Contains(s, "port is already allocated") || strings.Contains(s, "address already in use") {
			err = errors.Join(errAddrInUse, err)
		}
		return fmt.Errorf("lab: master %d (image %s, port %d) did not start: %w", nd.i, b.image, port, err)
	}
	nd.ctr, nd.port, nd.paused = ctr, port, false
	if err := waitPing(ctx, nd.addr()); err != nil {
		state := b.state(ctr.GetContainerID())
		_ = b.killLocked(nd)
		return fmt.Errorf("lab: master %d (image %s, port %d) did not start: %w; container %s", nd.i, b.image, port, err, state)
	}
	if nd.cut {
		if err := b.disconnect(nd); err != nil {
			return err
		}
	}
	b.log.Debug("lab: master started", "master", nd.i, "addr", nd.addr(), "container", shortID(ctr.GetContainerID()))
	return nil
}

func shortID(id string) string { return id[:min(12, len(id))] }

// state describes a container for a start error: its status and exit code.
func (b *dockerBackend) state(id string) string {
	ctx, cancel := opCtx()
	defer cancel()
	res, err := b.cl.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil || res.Container.State == nil {
		return fmt.Sprintf("%s (inspect: %v)", shortID(id), err)
	}
	st := res.Container.State
	return fmt.Sprintf("%s status %s, exit code %d %s", shortID(id), st.Status, st.ExitCode, st.Error)
}

// waitPing polls addr with PING until it answers PONG. Before redis-server
// listens, Docker's proxy accepts and then closes, hence a full exchange.
func waitPing(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, dockerStartTimeout)
	defer cancel()
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		err := ping(ctx, addr)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no answer: %w (last: %v)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// ping sends PING over a raw connection, which honours deadlines.
func ping(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: 200 * time.Millisecond}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := io.WriteString(conn, "PING\r\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("unexpected reply %q", strings.TrimSpace(line))
	}
	return nil
}

func (b *dockerBackend) pause(i int) error {
	nd := b.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.ctr == nil {
		return fmt.Errorf("lab: pause master %d: %w", i, errNotRunning)
	}
	if nd.paused {
		return nil
	}
	ctx, cancel := opCtx()
	defer cancel()
	// Returns once the cgroup freezer reports the container frozen.
	if _, err := b.cl.ContainerPause(ctx, nd.ctr.GetContainerID(), client.ContainerPauseOptions{}); err != nil {
		return fmt.Errorf("lab: pause master %d: %w", i, err)
	}
	nd.paused = true
	return nil
}

func (b *dockerBackend) resume(i int) error {
	nd := b.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.ctr == nil || !nd.paused {
		nd.paused = false
		return nil
	}
	ctx, cancel := opCtx()
	defer cancel()
	if _, err := b.cl.ContainerUnpause(ctx, nd.ctr.GetContainerID(), client.ContainerUnpauseOptions{}); err != nil {
		return fmt.Errorf("lab: resume master %d: %w", i, err)
	}
	nd.paused = false
	return nil
}

func (b *dockerBackend) kill(i int) error {
	nd := b.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return b.killLocked(nd)
}

// killLocked terminates the container, paused or not, and removes it with
// its data; the engine has released the host port when this returns.
// Terminate with no stop timeout is SIGTERM then SIGKILL at once (the
// container goes, so a graceful shutdown would save nothing anyway), and it
// also releases the Ryuk connection when the reaper is on, which a plain
// remove would leak.
func (b *dockerBackend) killLocked(nd *dockerNode) error {
	if nd.ctr == nil {
		return nil
	}
	ctx, cancel := opCtx()
	defer cancel()
	id := nd.ctr.GetContainerID()
	if err := nd.ctr.Terminate(ctx, testcontainers.StopTimeout(0)); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("lab: kill master %d: %w", nd.i, err)
	}
	b.log.Debug("lab: master killed", "master", nd.i, "container", shortID(id))
	nd.ctr, nd.paused = nil, false
	return nil
}

func (b *dockerBackend) cut(i int) error {
	nd := b.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.cut {
		return nil
	}
	if nd.ctr != nil {
		if err := b.disconnect(nd); err != nil {
			return err
		}
	}
	nd.cut = true
	return nil
}

func (b *dockerBackend) disconnect(nd *dockerNode) error {
	ctx, cancel := opCtx()
	defer cancel()
	_, err := b.cl.NetworkDisconnect(ctx, b.net, client.NetworkDisconnectOptions{Container: nd.ctr.GetContainerID(), Force: true})
	if err != nil {
		return fmt.Errorf("lab: cut master %d: %w", nd.i, err)
	}
	return nil
}

func (b *dockerBackend) heal(i int) error {
	nd := b.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if !nd.cut {
		return nil
	}
	if nd.ctr != nil {
		ctx, cancel := opCtx()
		defer cancel()
		// The published port comes back with the network: the same host
		// port, since it is bound explicitly.
		_, err := b.cl.NetworkConnect(ctx, b.net, client.NetworkConnectOptions{Container: nd.ctr.GetContainerID()})
		if err != nil {
			return fmt.Errorf("lab: heal master %d: %w", i, err)
		}
	}
	nd.cut = false
	return nil
}

// close removes every container of the cluster (paused ones too), then the
// network, then closes the engine client. It also sweeps by label, so a
// container left by a start that failed half-way goes as well.
func (b *dockerBackend) close() error {
	var errs []error
	for _, nd := range b.nodes {
		nd.mu.Lock()
		nd.closed = true
		errs = append(errs, b.killLocked(nd))
		nd.mu.Unlock()
	}
	ctx, cancel := opCtx()
	defer cancel()
	filter := make(client.Filters).Add("label", labelCluster+"="+b.id)
	left, err := b.cl.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filter})
	if err != nil {
		errs = append(errs, fmt.Errorf("lab: listing containers: %w", err))
	} else {
		for _, c := range left.Items {
			_, err := b.cl.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			if err != nil && !errdefs.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("lab: removing container %s: %w", shortID(c.ID), err))
			}
		}
	}
	if _, err := b.cl.NetworkRemove(ctx, b.net, client.NetworkRemoveOptions{}); err != nil && !errdefs.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("lab: removing network %s: %w", b.net, err))
	}
	errs = append(errs, b.cl.Close())
	return errors.Join(errs...)
}
