package lab

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
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

func imageOrDefault(image string) string {
	if image != "" {
		return image
	}
	if v := os.Getenv(imageEnv); v != "" {
		return v
	}
	return defaultImage
}

// DockerAvailable returns nil if the docker command line is installed, a
// Docker engine answers it, and the default image ($REDLOCK_REDIS_IMAGE,
// else redis:7.4-alpine) is present locally, so that Start with the Docker
// backend can run without pulling anything; otherwise an error wrapping
// ErrNoDocker that says which is missing. Tests call it to skip where
// Docker is absent.
func DockerAvailable(ctx context.Context) error {
	cli, err := dockerCLI(ctx, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	return cli.checkImage(ctx, imageOrDefault(""))
}

// cli runs the docker command line. Going through the CLI rather than the
// engine's Go client keeps the lab's dependencies down to go-redis, and
// reaches the engine the user's docker commands reach (DOCKER_HOST, Docker
// contexts, rootless sockets, TLS settings).
type cli struct {
	bin string
	log *slog.Logger
}

// cliError is a docker command that failed; stderr is what it said.
type cliError struct {
	args   []string
	stderr string
	err    error
}

func (e *cliError) Error() string {
	msg := e.stderr
	if msg == "" {
		msg = e.err.Error()
	}
	return fmt.Sprintf("docker %s: %s", strings.Join(e.args, " "), msg)
}

func (e *cliError) Unwrap() error { return e.err }

// isNotFound reports whether err is the engine saying that the container,
// network or image it was asked about does not exist.
func isNotFound(err error) bool {
	var ce *cliError
	if !errors.As(err, &ce) {
		return false
	}
	s := strings.ToLower(ce.stderr)
	return strings.Contains(s, "no such") || strings.Contains(s, "not found")
}

// dockerCLI finds the docker command line and checks that an engine
// answers it.
func dockerCLI(ctx context.Context, log *slog.Logger) (*cli, error) {
	bin, err := exec.LookPath("docker")
	if err != nil {
		return nil, fmt.Errorf("%w: the docker command line is not installed: %w", ErrNoDocker, err)
	}
	c := &cli{bin: bin, log: log}
	ctx, cancel := context.WithTimeout(ctx, dockerOpTimeout)
	defer cancel()
	if _, err := c.run(ctx, "version", "--format", "{{.Server.Version}}"); err != nil {
		return nil, fmt.Errorf("%w: Docker engine does not answer: %w", ErrNoDocker, err)
	}
	return c, nil
}

// run runs docker with args and returns its trimmed standard output; on
// failure the error quotes its standard error.
func (c *cli) run(ctx context.Context, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Should a CLI plugin outlive a killed docker holding our pipes.
	cmd.WaitDelay = time.Second
	start := time.Now()
	err := cmd.Run()
	c.log.Debug("lab: docker", "args", args, "took", time.Since(start), "err", err)
	if err != nil {
		if ctx.Err() != nil {
			err = errors.Join(ctx.Err(), err)
		}
		msg := strings.TrimSpace(stderr.String())
		// The usage hint docker run appends to every error says nothing here.
		msg, _, _ = strings.Cut(msg, "\n\nRun 'docker ")
		return "", &cliError{args: args, stderr: msg, err: err}
	}
	return strings.TrimSpace(stdout.String()), nil
}

func (c *cli) checkImage(ctx context.Context, image string) error {
	ctx, cancel := context.WithTimeout(ctx, dockerOpTimeout)
	defer cancel()
	_, err := c.run(ctx, "image", "inspect", "--format", "{{.Id}}", image)
	switch {
	case isNotFound(err):
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
	cli   *cli
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
	ctr    string // the container's id; "" while the master is down
	paused bool
	cut    bool // disconnected, or to be disconnected once started
	closed bool
}

func (nd *dockerNode) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(nd.port)) }

// newDockerBackend checks the engine and the image, then creates the
// cluster's network. The caller must close it.
func newDockerBackend(ctx context.Context, image string, aof bool, n int, log *slog.Logger) (*dockerBackend, error) {
	cli, err := dockerCLI(ctx, log)
	if err != nil {
		return nil, err
	}
	if err := cli.checkImage(ctx, image); err != nil {
		return nil, err
	}
	var raw [6]byte
	_, _ = rand.Read(raw[:]) // never fails (crypto/rand)
	id := hex.EncodeToString(raw[:])
	b := &dockerBackend{image: image, aof: aof, id: id, net: "redlock-lab-" + id, log: log, cli: cli}
	for i := range n {
		b.nodes = append(b.nodes, &dockerNode{i: i})
	}
	octx, cancel := context.WithTimeout(ctx, dockerOpTimeout)
	defer cancel()
	if _, err := cli.run(octx, "network", "create", "--driver", "bridge", "--label", b.label(), b.net); err != nil {
		return nil, errors.Join(fmt.Errorf("lab: creating network %s: %w", b.net, err), b.close())
	}
	log.Debug("lab: docker network created", "network", b.net, "image", image)
	return b, nil
}

// label is the labelCluster label of everything the cluster creates.
func (b *dockerBackend) label() string { return labelCluster + "=" + b.id }

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

// launch creates and starts a container for nd publishing port, on the
// cluster's network only (so a disconnect takes its port away), and waits
// until it answers PING. On failure the container is gone.
func (b *dockerBackend) launch(ctx context.Context, nd *dockerNode, port int) error {
	name := fmt.Sprintf("%s-%d", b.net, nd.i)
	args := []string{
		"run", "--detach",
		"--pull", "never", // checked at Start; never reach for a registry
		"--name", name,
		"--label", b.label(),
		"--label", labelMaster + "=" + strconv.Itoa(nd.i),
		// Its only network, so that a disconnect takes the port away.
		"--network", b.net,
		"--publish", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + ":6379/tcp",
		b.image,
	}
	sctx, cancel := context.WithTimeout(ctx, dockerStartTimeout)
	id, err := b.cli.run(sctx, append(args, b.cmd()...)...)
	cancel()
	if err != nil {
		// docker run creates before it starts, so a failed start (or a
		// cancelled one) may leave the container behind: remove it by name.
		rctx, cancel := opCtx()
		if _, rerr := b.cli.run(rctx, "rm", "--force", "--volumes", name); rerr != nil && !isNotFound(rerr) {
			err = errors.Join(err, rerr)
		}
		cancel()
		// The engine's wording for a host port someone else holds.
		if s := err.Error(); strings.Contains(s, "port is already allocated") || strings.Contains(s, "address already in use") {
			err = errors.Join(errAddrInUse, err)
		}
		return fmt.Errorf("lab: master %d (image %s, port %d) did not start: %w", nd.i, b.image, port, err)
	}
	// Its last line is the id (warnings, if any, go to stderr).
	if f := strings.Fields(id); len(f) > 0 {
		id = f[len(f)-1]
	}
	nd.ctr, nd.port, nd.paused = id, port, false
	if err := waitPing(ctx, nd.addr()); err != nil {
		state := b.state(id)
		_ = b.killLocked(nd)
		return fmt.Errorf("lab: master %d (image %s, port %d) did not start: %w; container %s", nd.i, b.image, port, err, state)
	}
	if nd.cut {
		if err := b.disconnect(nd); err != nil {
			return err
		}
	}
	b.log.Debug("lab: master started", "master", nd.i, "addr", nd.addr(), "container", shortID(id))
	return nil
}

func shortID(id string) string { return id[:min(12, len(id))] }

// state describes a container for a start error: its status and exit code.
func (b *dockerBackend) state(id string) string {
	ctx, cancel := opCtx()
	defer cancel()
	st, err := b.cli.run(ctx, "container", "inspect", "--format",
		"status {{.State.Status}}, exit code {{.State.ExitCode}} {{.State.Error}}", id)
	if err != nil {
		return fmt.Sprintf("%s (inspect: %v)", shortID(id), err)
	}
	return shortID(id) + " " + st
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
	if nd.ctr == "" {
		return fmt.Errorf("lab: pause master %d: %w", i, errNotRunning)
	}
	if nd.paused {
		return nil
	}
	ctx, cancel := opCtx()
	defer cancel()
	// Returns once the cgroup freezer reports the container frozen.
	if _, err := b.cli.run(ctx, "pause", nd.ctr); err != nil {
		return fmt.Errorf("lab: pause master %d: %w", i, err)
	}
	nd.paused = true
	return nil
}

func (b *dockerBackend) resume(i int) error {
	nd := b.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.ctr == "" || !nd.paused {
		nd.paused = false
		return nil
	}
	ctx, cancel := opCtx()
	defer cancel()
	if _, err := b.cli.run(ctx, "unpause", nd.ctr); err != nil {
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

// killLocked removes the container by force, paused or not: the engine
// SIGKILLs it and deletes it with its data (docker rm --force --volumes);
// the host port is released when this returns.
func (b *dockerBackend) killLocked(nd *dockerNode) error {
	if nd.ctr == "" {
		return nil
	}
	ctx, cancel := opCtx()
	defer cancel()
	if _, err := b.cli.run(ctx, "rm", "--force", "--volumes", nd.ctr); err != nil && !isNotFound(err) {
		return fmt.Errorf("lab: kill master %d: %w", nd.i, err)
	}
	b.log.Debug("lab: master killed", "master", nd.i, "container", shortID(nd.ctr))
	nd.ctr, nd.paused = "", false
	return nil
}

func (b *dockerBackend) cut(i int) error {
	nd := b.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.cut {
		return nil
	}
	if nd.ctr != "" {
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
	if _, err := b.cli.run(ctx, "network", "disconnect", "--force", b.net, nd.ctr); err != nil {
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
	if nd.ctr != "" {
		ctx, cancel := opCtx()
		defer cancel()
		// The published port comes back with the network: the same host
		// port, since it is bound explicitly.
		if _, err := b.cli.run(ctx, "network", "connect", b.net, nd.ctr); err != nil {
			return fmt.Errorf("lab: heal master %d: %w", i, err)
		}
	}
	nd.cut = false
	return nil
}

// close removes every container of the cluster (paused ones too), then the
// network. It also sweeps by label, so a container left by a start that
// failed half-way goes as well.
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
	left, err := b.cli.run(ctx, "ps", "--all", "--quiet", "--no-trunc", "--filter", "label="+b.label())
	if err != nil {
		errs = append(errs, fmt.Errorf("lab: listing containers: %w", err))
	} else {
		for _, id := range strings.Fields(left) {
			if _, err := b.cli.run(ctx, "rm", "--force", "--volumes", id); err != nil && !isNotFound(err) {
				errs = append(errs, fmt.Errorf("lab: removing container %s: %w", shortID(id), err))
			}
		}
	}
	if _, err := b.cli.run(ctx, "network", "rm", b.net); err != nil && !isNotFound(err) {
		errs = append(errs, fmt.Errorf("lab: removing network %s: %w", b.net, err))
	}
	return errors.Join(errs...)
}
