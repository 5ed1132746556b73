// Package pgtest starts a throwaway PostgreSQL server for tests: initdb in
// a temporary folder, the postmaster listening on a Unix socket in that
// folder only (no TCP port), fsync off. It needs the server's binaries
// (Debian's postgresql package: /usr/lib/postgresql/N/bin); as root it runs
// them as the postgres user, since PostgreSQL refuses to run as root.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"
)

// ErrUnavailable wraps the reason no server can be started here (no
// binaries, no postgres user as root): tests skip on it.
var ErrUnavailable = errors.New("pgtest: PostgreSQL is not available")

// Port names the socket file; nothing listens on TCP.
const Port = 5432

// Server is a running throwaway PostgreSQL.
type Server struct {
	Dir     string // the temporary folder: data/ and the socket
	Version string // the binaries' major version, e.g. "15"
	cmd     *exec.Cmd
	done    chan error
}

// BinDir finds the server's binaries: $REDLOCK_PG_BIN, else the newest
// /usr/lib/postgresql/N/bin, else the folder of initdb on PATH.
func BinDir() (string, error) {
	if d := os.Getenv("REDLOCK_PG_BIN"); d != "" {
		return d, nil
	}
	ms, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Slice(ms, func(i, j int) bool { return major(ms[i]) > major(ms[j]) })
	if len(ms) > 0 {
		return filepath.Dir(ms[0]), nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("%w: no initdb in /usr/lib/postgresql/*/bin or on PATH (apt-get install postgresql)", ErrUnavailable)
}

func major(initdb string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return n
}

// Start initialises and starts a server; Stop removes it. extra are
// further "name=value" settings (postgres -c).
func Start(ctx context.Context, extra ...string) (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redlock-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, Version: filepath.Base(filepath.Dir(bin))}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := run(ctx, cred, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	args := []string{"-D", data, "-k", dir, "-p", strconv.Itoa(Port), "-c", "listen_addresses=",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200"}
	for _, e := range extra {
		args = append(args, "-c", e)
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), args...)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGQUIT}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: postgres: %w", err)
	}
	s.cmd, s.done = cmd, make(chan error, 1)
	go func() { s.done <- cmd.Wait() }()
	if err := s.wait(ctx, bin, cred); err != nil {
		s.Stop()
		return nil, fmt.Errorf("%w\n%s", err, log.String())
	}
	return s, nil
}

// wait polls pg_isready until the server accepts connections.
func (s *Server) wait(ctx context.Context, bin string, cred *syscall.Credential) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := run(ctx, cred, filepath.Join(bin, "pg_isready"), "-q", "-h", s.Dir, "-p", strconv.Itoa(Port)); err == nil {
			return nil
		}
		select {
		case err := <-s.done:
			s.done <- err
			return fmt.Errorf("pgtest: postgres exited: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("pgtest: postgres not ready after 60 s")
		}
	}
}

// DSN is a libpq connection string to database postgres over the socket.
func (s *Server) DSN() string {
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres sslmode=disable", s.Dir, Port)
}

// Stop shuts the server down (fast shutdown, then SIGKILL after 30 s) and
// removes its folder.
func (s *Server) Stop() error {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.done
		}
	}
	return os.RemoveAll(s.Dir)
}

// credential is the postgres user's when we are root, else nil (run as
// ourselves).
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("%w: running as root and no postgres user to run the server as: %v", ErrUnavailable, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func run(ctx context.Context, cred *syscall.Credential, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Dir = os.TempDir()
	return cmd.CombinedOutput()
}
