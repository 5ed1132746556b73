package main

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// schemaVersion is Report.SchemaVersion. Bump it on any change that is not
// purely additive, and change schema.json with it (the test checks both).
//
// 2: config.workers is a list of worker counts (the -workers sweep), and
// every ratio carries the worker count both of its sides ran with. Later
// additions within version 2 (always written, optional in schema.json so
// older version-2 files still validate): per result, commands,
// commands_by_name, commands_per_acquisition, ping_rtt_ms,
// ping_rtt_per_master_ms and ping_rtt_loaded_ms; client_cpu_us_per_acquisition,
// server_cpu_us_per_acquisition and server_command_us_per_acquisition;
// validity.source "none"; etcd, elections, config.election_ttl_ms,
// campaigners and failovers.
const schemaVersion = 2

// schemaJSON is the JSON Schema (draft 2020-12) of Report, printed by
// -schema and used by the tests to validate -json output.
//
//go:embed schema.json
var schemaJSON []byte

// Report is what -json writes: the whole run. Every field is always present
// (no omitempty) so consumers can rely on the shape; schema.json is the
// normative description.
type Report struct {
	SchemaVersion int            `json:"schema_version"`
	Tool          string         `json:"tool"`
	StartedAt     time.Time      `json:"started_at"`
	WallSeconds   float64        `json:"wall_seconds"`
	Env           Env            `json:"env"`
	Masters       Masters        `json:"masters"`
	Config        Config         `json:"config"`
	Scenarios     []ScenarioInfo `json:"scenarios"`
	Results       []Result       `json:"results"`
	Ratios        []Ratio        `json:"ratios"`
	// Etcd is the etcd cluster the run started (-impls etcd); omitted
	// otherwise.
	Etcd *EtcdInfo `json:"etcd,omitempty"`
	// Elections are the election scenarios' results (election.go);
	// omitted when none ran.
	Elections []ElectionResult `json:"elections,omitempty"`
}

// Env is where the bench ran.
type Env struct {
	GoVersion string `json:"go_version"`
	GOOS      string `json:"goos"`
	GOARCH    string `json:"goarch"`
	CPUs      int    `json:"cpus"`
}

// Masters says which masters were measured and how a stall was made.
type Masters struct {
	// Kind is "addrs" (given with -addrs), "lab" (local redis-server
	// processes), "lab-docker" (containers, -docker), "lab-cluster" (local
	// Redis Clusters, -cluster; each
	// address is one cluster's nodes, comma-separated) or "embedded"
	// (miniredis in a child process of the bench, on loopback: library
	// overhead, no real server).
	Kind        string   `json:"kind"`
	N           int      `json:"n"`
	Addrs       []string `json:"addrs"`
	StallMethod string   `json:"stall_method"`
	// PartitionMethod is how the partition scenario cuts a master (-docker).
	PartitionMethod string `json:"partition_method,omitempty"`
	Note            string `json:"note"`
}

// Config is the command line in force.
type Config struct {
	// Workers are the -workers counts, in run order; every scenario ×
	// implementation ran once per count.
	Workers         []int    `json:"workers"`
	DurationSeconds float64  `json:"duration_seconds"`
	TTLMs           int64    `json:"ttl_ms"`
	Scenarios       []string `json:"scenarios"`
	Impls           []string `json:"impls"`
	// Repeat is -repeat when above 1 (omitted otherwise).
	Repeat int `json:"repeat,omitempty"`
	// Lockers is -lockers when above 1 (omitted otherwise): each cell
	// opened its implementation that many times, each with the workers.
	Lockers int `json:"lockers,omitempty"`
	// The election scenarios' settings, when one ran (omitted
	// otherwise): -election-ttl, -campaigners and, for
	// election-failover, -failovers.
	ElectionTTLMs int64 `json:"election_ttl_ms,omitempty"`
	Campaigners   int   `json:"campaigners,omitempty"`
	Failovers     int   `json:"failovers,omitempty"`
}

// ScenarioInfo describes one scenario, run or not.
type ScenarioInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Available is true for every scenario of this build, and
	// Unavailable empty; both are kept from schema version 1.
	Available   bool        `json:"available"`
	Unavailable string      `json:"unavailable_reason"`
	Phases      []PhaseInfo `json:"phases"`
}

// PhaseInfo is a slice of a cell's time, as fractions of its duration, and
// the masters stopped during it.
type PhaseInfo struct {
	Name          string  `json:"name"`
	From          float64 `json:"from"`
	To            float64 `json:"to"`
	PausedMasters []int   `json:"paused_masters"`
}

// Result is one cell: one implementation in one scenario with one worker
// count.
type Result struct {
	Scenario        string  `json:"scenario"`
	Impl            string  `json:"impl"`
	Workers         int     `json:"workers"`
	DurationSeconds float64 `json:"duration_seconds"`
	// Ops is Lock+Unlock pairs that both succeeded and completed within
	// the cell's duration; LateOps completed after it, while draining.
	Ops       int64   `json:"ops"`
	OpsPerSec float64 `json:"ops_per_sec"`
	LateOps   int64   `json:"late_ops"`
	// Repeats (-repeat) is how many times the cell ran; this result is
	// the run of median ops/s, and OpsPerSecRuns has every run's, in the
	// order they ran. Omitted (0, null) for one run.
	Repeats       int       `json:"repeats,omitempty"`
	OpsPerSecRuns []float64 `json:"ops_per_sec_runs,omitempty"`
	// AcquireMs is the latency of successful Lock calls, retries included.
	AcquireMs Dist `json:"acquire_latency_ms"`
	// HandoffMs (one shared resource only, else null) is from a holder
	// calling Unlock to the next holder's Lock returning.
	HandoffMs *Dist `json:"handoff_latency_ms"`
	// Lockers (-lockers, omitted for 1) is how many separate instances
	// of the implementation the cell ran, each with Workers workers.
	// Fairness (one shared resource and several Lockers, else omitted)
	// is the fewest acquisitions of one Locker ÷ the most.
	Lockers  int      `json:"lockers,omitempty"`
	Fairness *float64 `json:"fairness,omitempty"`
	// WorkerFairness (one shared resource, else omitted) is the fewest
	// acquisitions of one worker ÷ the most, over every worker of the
	// cell. RetakenShare (one shared resource, else omitted) is the share
	// of acquisitions made by the worker that had just released the lock,
	// with no other holder in between: a lock that lets its releaser take
	// it straight back has a high share, a low acquire p50 (the releaser
	// waits for nobody) and a long p99 (the others wait for it).
	WorkerFairness *float64 `json:"worker_fairness,omitempty"`
	RetakenShare   *float64 `json:"retaken_share,omitempty"`
	// Failures counts failed calls by kind ("not_acquired", "timeout",
	// "unlock_lost", ...); calls cut short by the end of the cell are not
	// counted.
	Failures map[string]int64 `json:"failures"`
	Validity Validity         `json:"validity"`
	Phases   []PhaseResult    `json:"phases"`
	Notes    []string         `json:"notes"`

	// What the masters executed during the cell, from INFO commandstats
	// read on every master before the workers started and after the
	// implementation was closed, summed over masters, without the bench's
	// own INFO. Commands a Lua script runs are counted as well as the
	// EVALSHA that ran it (the server counts them so). All three are null
	// where a master does not report INFO commandstats (embedded
	// masters), and CommandsPerAcquisition also when no Lock succeeded.
	Commands       *int64           `json:"commands"`
	CommandsByName map[string]int64 `json:"commands_by_name"`
	// CommandsPerAcquisition is Commands ÷ AcquireMs.Count: every command
	// of the cell, failed attempts and releases included, per successful
	// Lock.
	CommandsPerAcquisition *float64 `json:"commands_per_acquisition"`
	// CPU per successful Lock, in µs, over the same window as Commands:
	// ClientCPUUsPerAcquisition is the bench process's user+system time
	// (getrusage: the implementation's goroutines and the bench's own
	// sampling; never the masters, which are other processes);
	// ServerCPUUsPerAcquisition the masters' process time (INFO cpu:
	// used_cpu_user + used_cpu_sys, summed over masters; for embedded
	// masters, their one process's getrusage); ServerCommandUsPerAcquisition
	// the time the masters' command handlers ran (INFO commandstats usec,
	// summed): the floor, without reading, parsing and writing, null for
	// embedded masters. Null where not measured or when no Lock succeeded.
	ClientCPUUsPerAcquisition     *float64 `json:"client_cpu_us_per_acquisition"`
	ServerCPUUsPerAcquisition     *float64 `json:"server_cpu_us_per_acquisition"`
	ServerCommandUsPerAcquisition *float64 `json:"server_command_us_per_acquisition"`
	// PingRTTMs is the median over masters (nearest rank) of each
	// master's median PING round trip; PingRTTPerMasterMs is each
	// master's. A master's median pools pingRounds sequential PINGs on one
	// connection (after a warm-up) just before the cell's window and as
	// many just after it. Null when not measured.
	PingRTTMs          *float64  `json:"ping_rtt_ms"`
	PingRTTPerMasterMs []float64 `json:"ping_rtt_per_master_ms"`
	// PingRTTLoadedMs is the same median, of PINGs sent during the cell
	// (one per master every 10 ms), under the cell's own load.
	PingRTTLoadedMs *float64 `json:"ping_rtt_loaded_ms"`

	// Raw samples for the chart; not part of the schema.
	acquireSorted  []float64
	validitySorted []float64
}

// Dist summarises a latency distribution in milliseconds (nearest-rank
// percentiles; all zero when Count is 0).
type Dist struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
	Mean  float64 `json:"mean"`
}

// Validity is the validity left at acquisition as a fraction of the TTL,
// and the median breakdown of what was subtracted from the TTL.
type Validity struct {
	// Source is how validity was obtained: "acquisition" (ours:
	// Lock.Acquisition().Validity), "until" (redsync: Mutex.Until() − now
	// right after Lock returned), "computed" (single: TTL − elapsed) or
	// "none" (etcd: not applicable, count 0).
	Source         string  `json:"source"`
	Count          int     `json:"count"`
	Min            float64 `json:"min"`
	P1             float64 `json:"p1"`
	P50            float64 `json:"p50"`
	ElapsedMsP50   float64 `json:"elapsed_ms_p50"`
	DriftMs        float64 `json:"drift_ms"`
	SafetyMarginMs float64 `json:"safety_margin_ms"`
}

// PhaseResult is the throughput within one phase, by completion time.
type PhaseResult struct {
	Name      string  `json:"name"`
	Seconds   float64 `json:"seconds"`
	Ops       int64   `json:"ops"`
	OpsPerSec float64 `json:"ops_per_sec"`
}

// Ratio is numerator ops/s ÷ denominator ops/s, both sides in the same
// scenario with the same worker count; Value is null when the denominator
// completed nothing.
type Ratio struct {
	Scenario    string   `json:"scenario"`
	Workers     int      `json:"workers"`
	Numerator   Side     `json:"numerator"`
	Denominator Side     `json:"denominator"`
	Value       *float64 `json:"value"`
}

// Side is one implementation in one phase ("all" for the whole cell).
type Side struct {
	Impl      string  `json:"impl"`
	Phase     string  `json:"phase"`
	OpsPerSec float64 `json:"ops_per_sec"`
}

func writeJSON(path string, rep *Report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding results: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing -json: %w", err)
	}
	return nil
}
