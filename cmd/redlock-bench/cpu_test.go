package main

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

func TestParseInfoCPU(t *testing.T) {
	info := "# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:0.500000\r\nused_cpu_sys_children:9.000000\r\n" +
		"used_cpu_user_children:9.000000\r\nused_cpu_sys_main_thread:1.000000\r\nused_cpu_user_main_thread:0.400000\r\n"
	if got, err := parseInfoCPU(info); err != nil || got != 1.75 {
		t.Errorf("parseInfoCPU = %v, %v; want 1.75 (sys + user, without children or the main thread's share)", got, err)
	}
	for _, bad := range []string{"# CPU\r\n", "used_cpu_sys:1\r\n", "used_cpu_sys:x\r\nused_cpu_user:1\r\n", "used_cpu_sys:-1\r\nused_cpu_user:1\r\n"} {
		if _, err := parseInfoCPU(bad); err == nil {
			t.Errorf("parseInfoCPU(%q): no error", bad)
		}
	}
	if _, err := parseInfoCPU("# CPU\r\n"); !errors.Is(err, errNoCPUInfo) {
		t.Errorf("an empty section = %v, want errNoCPUInfo", err)
	}
}

func TestParseCommandUsec(t *testing.T) {
	if got, err := parseCommandUsec(commandstatsReply); err != nil || got != 300+8+900 {
		t.Errorf("parseCommandUsec = %v, %v; want 1208 (INFO's 90 left out)", got, err)
	}
	if _, err := parseCommandUsec("cmdstat_set:calls=1,usec=x\r\n"); err == nil {
		t.Error("a bad usec: no error")
	}
}

func TestSetCPU(t *testing.T) {
	var r Result
	r.setCPU(cpuWindow{client: time.Millisecond, server: 2 * time.Millisecond, commands: 500 * time.Microsecond})
	if r.ClientCPUUsPerAcquisition != nil || r.ServerCPUUsPerAcquisition != nil || r.ServerCommandUsPerAcquisition != nil {
		t.Error("CPU per acquisition set without any acquisition")
	}
	r.AcquireMs.Count = 100
	r.setCPU(cpuWindow{client: time.Millisecond, server: 2 * time.Millisecond, commands: 500 * time.Microsecond})
	if *r.ClientCPUUsPerAcquisition != 10 || *r.ServerCPUUsPerAcquisition != 20 || *r.ServerCommandUsPerAcquisition != 5 {
		t.Errorf("per acquisition %v %v %v µs, want 10 20 5", *r.ClientCPUUsPerAcquisition, *r.ServerCPUUsPerAcquisition, *r.ServerCommandUsPerAcquisition)
	}
}

// The meter on real masters: work sent by another client shows as
// server CPU and command time; miniredis reports it is not supported.
func TestCPUMeterLab(t *testing.T) {
	ctx := t.Context()
	_, admin := labClients(t, 2)
	m := startCPU(ctx, &masters{admin: admin})
	for _, c := range admin {
		for range 2000 {
			if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	w, err := m.stop(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if w.server <= 0 || w.commands <= 0 || w.client <= 0 {
		t.Errorf("window %+v: want server, command and client time for 4000 SETs", w)
	}
	if w.commands > w.server+10*time.Millisecond {
		t.Errorf("command time %v above the masters' CPU time %v", w.commands, w.server)
	}

	mr := miniredis.RunT(t)
	emb := []*redis.Client{redis.NewClient(&redis.Options{Addr: mr.Addr()})}
	defer closeClients(emb)
	if _, err := startCPU(ctx, &masters{admin: emb}).stop(ctx, emb); !errors.Is(err, errNoCPUInfo) {
		t.Errorf("miniredis: %v, want errNoCPUInfo", err)
	}
}

// Embedded masters report their process's CPU (the cpu command) and no
// command time: the meter gives client and server time for work sent to
// them.
func TestCPUMeterEmbedded(t *testing.T) {
	ctx := t.Context()
	ms, err := startEmbedded(ctx, 1, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer ms.shutdown()
	m := startCPU(ctx, ms)
	for range 2000 {
		if err := ms.admin[0].Set(ctx, "k", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	w, err := m.stop(ctx, ms.admin)
	if err != nil {
		t.Fatal(err)
	}
	if w.server <= 0 || w.client <= 0 || w.commands != 0 {
		t.Errorf("window %+v: want server and client time for 2000 SETs, no command time", w)
	}
}
