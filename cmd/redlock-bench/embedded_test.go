package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The embedded masters run in a child process that starts, stops a
// master (a command to it waits until it is resumed, as under SIGSTOP),
// and on close exits cleanly, leaving no process behind.
func TestEmbeddedChild(t *testing.T) {
	ctx := t.Context()
	var stderr bytes.Buffer
	p, addrs, err := startEmbeddedProc(ctx, 2, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	pid := p.cmd.Process.Pid
	if pid == syscall.Getpid() || len(addrs) != 2 {
		t.Fatalf("child pid %d (ours %d), addrs %v", pid, syscall.Getpid(), addrs)
	}
	cs := newClients(plainOptions(addrs))
	defer closeClients(cs)
	if err := cs[0].Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}

	if _, err := p.do(ctx, "pause 0"); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- cs[0].Get(ctx, "k").Err() }()
	select {
	case err := <-got:
		t.Fatalf("GET on a paused master returned (%v) before resume", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := cs[1].Ping(ctx).Err(); err != nil {
		t.Errorf("the other master: %v", err)
	}
	if _, err := p.do(ctx, "resume 0"); err != nil {
		t.Fatal(err)
	}
	// No bound of its own: a GET that never returns is a hang, ended by
	// the test binary's -timeout, not a guess at how slow a loaded
	// machine may be.
	if err := <-got; err != nil {
		t.Errorf("GET after resume: %v", err)
	}

	if _, err := p.do(ctx, "pause 7"); err == nil || !strings.Contains(err.Error(), "no master") {
		t.Errorf("pause 7 of 2: %v", err)
	}
	if err := p.close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if st := p.cmd.ProcessState; st == nil || !st.Success() {
		t.Errorf("the child's exit: %v", st)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill -0 %d after close: %v (want no such process)", pid, err)
	}
	if stderr.Len() > 0 {
		t.Errorf("stderr: %q", stderr.String())
	}
}

// A child that dies during the run is reported on stderr, and the next
// command to it fails with what happened, not a hang.
func TestEmbeddedChildDies(t *testing.T) {
	var stderr bytes.Buffer
	p, _, err := startEmbeddedProc(t.Context(), 1, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.exited
	if !strings.Contains(stderr.String(), "embedded masters' process ended during the run (signal: killed") {
		t.Errorf("stderr: %q", stderr.String())
	}
	_, err = p.do(context.Background(), "pause 0")
	if err == nil || !strings.Contains(err.Error(), "signal: killed") {
		t.Errorf("pause after the child died: %v", err)
	}
	if err := p.close(); err == nil {
		t.Error("close after the child died: no error")
	}
}

// Closing the child's stdin (the bench ending without close) ends it.
func TestEmbeddedChildEndsWithItsStdin(t *testing.T) {
	p, _, err := startEmbeddedProc(t.Context(), 1, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	p.closing.Store(true)
	_ = p.stdin.Close()
	<-p.exited // a child that outlives its stdin hangs here until -timeout (Pdeathsig then ends it)
	if p.waitErr != nil {
		t.Errorf("exit: %v", p.waitErr)
	}
}

// A bad count makes the child exit at once, and the bench says why.
func TestEmbeddedChildBadCount(t *testing.T) {
	var out, errb bytes.Buffer
	if code := runEmbeddedChild("x", strings.NewReader(""), &out, &errb); code != 2 || !strings.Contains(errb.String(), "not a count") {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
}
