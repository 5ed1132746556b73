# The verbs people type. `make` alone lists them (help).
# Lab targets drive the five masters of compose.yaml; see docker/README.md.

# ---- variables ---------------------------------------------------------------
GO            ?= go
PROJECT       ?= redlock-lab
LOCAL_IMAGE   ?= redlock-lab/redis:local
LAB_TIMEOUT   ?= 60
FUZZTIME      ?= 10s
# The client adapters, each a module of its own (adapters/*/go.mod).
ADAPTERS      ?= adapters/rueidis adapters/valkey adapters/redigo
# The modules whose tests run first, in one go test through go.work: the
# library (./...), the two commands, SQL fencing (sqlfence: its tests start
# a throwaway PostgreSQL, and skip saying why without one) and the
# repository's test suites. ./... stops at a nested go.mod, so each of the
# others is named.
TEST_PKGS     ?= ./... ./cmd/redlock/... ./cmd/redlock-bench/... ./sqlfence/... ./tests/...
# The bench's optional parts (cmd/redlock-bench/extras.go): make test builds
# them all, so their tests run; tests/consumer installs the default build.
TEST_TAGS     ?= charts,docker,otel,peers,etcd,sqlfence
# Build tags for make bench, e.g. BENCH_TAGS=charts for -chart.
BENCH_TAGS    ?=
# make sim: how many simulated sections inside the assumptions, and the
# first seed (docs/design.md §20).
SIM_SECTIONS  ?= 100000000
SIM_SEED      ?= 1
# make sim: only the rows whose name matches (a regular expression; empty: all).
SIM_ROWS      ?=
# make mutations: which of redlock/testdata/mutations/*.patch (file name
# prefixes, e.g. 03 or "01 06"; empty: all), and each one's CPU limit in s.
MUTATIONS     ?=
MUTATION_CPU  ?= 60
# make mutate: which packages (empty: validity quorum internal/wait redlock).
MUTATE_PKGS   ?=
# FSYNC=1 adds compose.fsync.yaml (AOF, appendfsync always) to lab-up.
FSYNC         ?=
# FORCE=1 rebuilds the local image even if it exists.
FORCE         ?=
# N=1..5 picks the master for lab-pause/unpause/cut/heal.
N             ?=
# Compose v2 plugin if present, else docker-compose v1; empty means neither
# (lab targets then stop with an error). Set COMPOSE to override.
ifeq ($(origin COMPOSE),undefined)
COMPOSE := $(shell if docker compose version >/dev/null 2>&1; then echo "docker compose"; \
                   elif command -v docker-compose >/dev/null 2>&1; then echo docker-compose; fi)
endif
COMPOSE_FILES  = -f compose.yaml $(if $(FSYNC),-f compose.fsync.yaml)
DC             = $(COMPOSE) -p $(PROJECT) $(COMPOSE_FILES)
comma := ,
# Shell snippets used in recipes.
define need_n
case "$(N)" in [1-5]) ;; *) echo "error: give the master as N=1..5, e.g. make $@ N=2" >&2; exit 1;; esac
endef
# Containers by compose's labels (the same in v1 and v2, and fast).
svc_cid = docker ps -aq --filter label=com.docker.compose.project=$(PROJECT) --filter label=com.docker.compose.service=redis$(1)
cid_n   = cid=$$($(call svc_cid,$(N))); [ -n "$$cid" ] || { echo "error: redis$(N) is not running (make lab-up)" >&2; exit 1; }
# The lab network by compose's labels, not by name: v1 and v2 both prefix it
# with the project, and a cut container no longer lists it.
lab_net = net=$$(docker network ls -q --filter label=com.docker.compose.project=$(PROJECT) \
                   --filter label=com.docker.compose.network=redlock-lab); \
          [ -n "$$net" ] || { echo "error: lab network not found (make lab-up)" >&2; exit 1; }; \
          netname=$$(docker network inspect -f '{{.Name}}' $$net)
is_conn = [ -n "$$(docker inspect -f "{{if index .NetworkSettings.Networks \"$$netname\"}}yes{{end}}" $$cid)" ]

.DEFAULT_GOAL := help
.PHONY: help test sim mutations mutate check-deps check-rules fuzz image require-compose lab-up lab-down lab-status \
        lab-pause lab-unpause lab-cut lab-heal

help: ## list the verbs
	@echo "usage: make <target> [N=1..5] [FSYNC=1] [FORCE=1]"
	@awk 'BEGIN { FS = ":.*## " } /^[a-zA-Z0-9_%-]+:.*## / { printf "  %-16s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

# ---- go ----------------------------------------------------------------------
# -count=1: the tests talk to real servers, so a cached pass proves nothing.
# -p 2: two packages at a time. The tests stall, slow and kill real
# masters, yet assert nothing that depends on an idle machine (a user's CI
# is a loaded one: they pass beside stress-ng on both cores), and most of
# their time is spent waiting on masters, so two at once nearly halve the
# run. -p also bounds how many compilers run at once, so a first go test
# with every CPU and no test (-run '^$') builds everything, in parallel,
# beforehand. The simulator's run at the end is built with -trimpath, as
# tests/consumer builds, so that the two share the compiled standard
# library and go-redis.
# Every folder with a go.mod is a module of its own (docs/releasing.md);
# go.work ties them together, so one go test from the root runs TEST_PKGS.
# labdocker (the lab's Docker backend on testcontainers-go) runs second,
# with its own timeout; then the client adapters (their examples compile;
# tests/clients runs the safety tests once per client kind).
# tests/consumer publishes the modules to a local module proxy and builds
# and installs from it as a user would.
test: check-deps check-rules ## run every test with the race detector against real masters (installs redis-server and postgresql if it can)
	@env_lines=$$(scripts/test-setup.sh) || exit 1; eval "$$env_lines"; \
	echo "$(GO) test -race -tags $(TEST_TAGS) -run '^$$' $(TEST_PKGS) (builds on every CPU)"; \
	out=$$($(GO) test -race -count=1 -tags $(TEST_TAGS) -run '^$$' $(TEST_PKGS) 2>&1) || { echo "$$out"; exit 1; }; \
	echo "$(GO) test -race -count=1 -p 2 -timeout 15m -tags $(TEST_TAGS) $(TEST_PKGS)"; \
	$(GO) test -race -count=1 -p 2 -timeout 15m -tags $(TEST_TAGS) $(TEST_PKGS) && \
	{ echo "(cd labdocker && $(GO) test -race -count=1 -p 1 -timeout 5m ./...)"; (cd labdocker && $(GO) test -race -count=1 -p 1 -timeout 5m ./...); } && \
	for m in $(ADAPTERS); do \
		echo "(cd $$m && $(GO) vet ./... && $(GO) test -race -count=1 -timeout 5m ./...)"; \
		(cd $$m && $(GO) vet ./... && $(GO) test -race -count=1 -timeout 5m ./...) || exit 1; \
	done && \
	{ echo "$(GO) test -count=1 -trimpath -run 'TestSim$$|TestSimReplay' ./redlock"; $(GO) test -count=1 -trimpath -run 'TestSim$$|TestSimReplay' ./redlock; }

# A module importing only the library must get go-redis and nothing else it
# does not use (in its go.mod and go.sum): part of make test.
# The deterministic simulator (docs/design.md §20). make test runs its
# short run (TestSim: 300 000 sections); this is the long one, on every
# CPU, without the race detector (it would only slow the worlds, which run
# one goroutine each).
sim: ## the deterministic simulator's long run: SIM_SECTIONS (10^8) sections inside the assumptions over seeds from SIM_SEED, 0 violations (liveness included); each row outside must show one; prints sections per CPU-minute (SIM_ROWS=^lab-handed$$ for some rows)
	$(GO) test -count=1 -timeout 0 -run 'TestSim$$' -v ./redlock -sim.sections=$(SIM_SECTIONS) -sim.seed=$(SIM_SEED) -sim.rows='$(SIM_ROWS)'

# Each patch in redlock/testdata/mutations plants one protocol bug; the
# simulator must catch each (a script's, TestDifferential against a real
# redis-server) within MUTATION_CPU seconds of CPU, in a throw-away
# worktree of HEAD (scripts/mutations.sh).
mutations: ## plant each bug of redlock/testdata/mutations in a throw-away worktree and show TestSim (or TestDifferential) catch it within 60 s of CPU; prints a markdown table (MUTATIONS=03 for some)
	@GO="$(GO)" CPU_LIMIT=$(MUTATION_CPU) scripts/mutations.sh $(MUTATIONS)

# gremlins mutates the protocol code (validity, quorum, internal/wait and
# redlock's protocol files) one operator at a time and runs each package's
# fast deterministic tests against every mutant: docs/design.md §20 and
# docs/decisions/2026-12-06-mutation-testing.md. Not part of make test: it
# builds and tests the package once per mutant (about an hour on 2 CPUs).
mutate: ## mutation testing by gremlins over the protocol code against the fast deterministic tests; prints killed, lived, efficacy and mutant coverage per package (MUTATE_PKGS=quorum for some)
	@GO="$(GO)" scripts/mutate.sh $(MUTATE_PKGS)

check-deps: ## check that a module importing only redlock gets go-redis and nothing else it does not use
	@GO="$(GO)" scripts/check-consumer-deps.sh

check-rules: ## check and unit-test the Prometheus rules in observability/ with promtool (installs Debian's prometheus if it can)
	@scripts/check-rules.sh

fuzz: ## run the validity fuzz target briefly (FUZZTIME=10s)
	$(GO) test ./validity -run '^$$' -fuzz FuzzBudget -fuzztime $(FUZZTIME)

# ---- lab ---------------------------------------------------------------------
image: ## build the local image (redlock-lab/redis:local) FROM scratch from the host's redis-server (FORCE=1 rebuilds)
	@if [ -z "$(FORCE)" ] && docker image inspect $(LOCAL_IMAGE) >/dev/null 2>&1; then \
		echo "image: $(LOCAL_IMAGE) exists (FORCE=1 to rebuild)"; \
	else \
		docker/redis-local/build.sh $(LOCAL_IMAGE); \
	fi

require-compose:
	@[ -n "$(COMPOSE)" ] || { echo "error: neither 'docker compose' (v2) nor 'docker-compose' found; install one or set COMPOSE=..." >&2; exit 1; }

lab-up: require-compose ## start five masters on 127.0.0.1:7001..7005 and wait until healthy (FSYNC=1: AOF+fsync always)
	$(DC) up -d
	@deadline=$$(( $$(date +%s) + $(LAB_TIMEOUT) )); \
	while :; do \
		bad=""; \
		for i in 1 2 3 4 5; do \
			c=$$($(call svc_cid,$$i)); \
			s=$$( [ -n "$$c" ] && docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}' $$c 2>/dev/null || echo missing); \
			[ "$$s" = healthy ] || bad="$$bad redis$$i=$$s"; \
		done; \
		[ -z "$$bad" ] && { echo "lab-up: redis1..redis5 healthy on 127.0.0.1:7001..7005"; exit 0; }; \
		[ $$(date +%s) -ge $$deadline ] && { echo "error: not healthy after $(LAB_TIMEOUT)s:$$bad" >&2; exit 1; }; \
		sleep 1; \
	done

lab-down: require-compose ## remove the masters, their data and the lab network
	$(DC) down -v --remove-orphans

lab-status: ## show each master's state, health, network and port
	@docker ps -a --filter label=com.docker.compose.project=$(PROJECT) \
		--format 'table {{.Label "com.docker.compose.service"}}\t{{.Status}}\t{{.Networks}}\t{{.Ports}}' \
		| { IFS= read -r header; echo "$$header"; sort; }

lab-pause: ## freeze master N (docker pause: cgroup freezer; TCP still accepts, nothing answers)
	@$(need_n); $(cid_n); docker pause $$cid >/dev/null && echo "redis$(N) paused"

lab-unpause: ## thaw master N
	@$(need_n); $(cid_n); docker unpause $$cid >/dev/null && echo "redis$(N) unpaused"

lab-cut: ## disconnect master N from the lab network (its port then refuses; open connections get EOF)
	@$(need_n); $(cid_n); $(lab_net); \
	if $(is_conn); then docker network disconnect $$netname $$cid && echo "redis$(N) cut from $$netname"; \
	else echo "redis$(N) already cut"; fi

lab-heal: ## reconnect master N to the lab network
	@$(need_n); $(cid_n); $(lab_net); \
	if $(is_conn); then echo "redis$(N) already connected"; \
	else docker network connect --alias redis$(N) $$netname $$cid && echo "redis$(N) reconnected to $$netname"; fi

# make lab-pause-2 == make lab-pause N=2 (and likewise unpause, cut, heal).
lab-pause-%:   ; @$(MAKE) --no-print-directory lab-pause N=$*
lab-unpause-%: ; @$(MAKE) --no-print-directory lab-unpause N=$*
lab-cut-%:     ; @$(MAKE) --no-print-directory lab-cut N=$*
lab-heal-%:    ; @$(MAKE) --no-print-directory lab-heal N=$*

# ---- bench -------------------------------------------------------------------
.PHONY: bench bench-docker
bench: ## compare redlock with redsync on five masters (BENCH_FLAGS="-workers 64 -json out.json"; BENCH_TAGS=charts for -chart out.svg)
	$(GO) run $(if $(BENCH_TAGS),-tags $(BENCH_TAGS)) ./cmd/redlock-bench $(BENCH_FLAGS)

# One step: the local image if missing, then five containers the bench
# starts and removes itself (stall = docker pause, partition = network
# disconnect).
bench-docker: image ## the bench on five Docker containers it starts itself, with the partition scenario (BENCH_FLAGS as for bench)
	REDLOCK_REDIS_IMAGE=$${REDLOCK_REDIS_IMAGE:-$(LOCAL_IMAGE)} \
	$(GO) run -tags docker$(if $(BENCH_TAGS),$(comma)$(BENCH_TAGS)) ./cmd/redlock-bench -docker -scenarios uncontended,contended,stall,partition $(BENCH_FLAGS)

# ---- chaos -------------------------------------------------------------------
# CHAOS_BACKEND=docker faults Docker containers instead of processes
# (docker pause, network disconnect, container kill and restart) and writes
# results-docker.json, so the process run's results.json stays.
CHAOS_BACKEND ?= process
CHAOS_JSON     = results$(if $(filter docker,$(CHAOS_BACKEND)),-docker).json
SOAK_SEEDS    ?= 10
SOAK_SECTIONS ?= 25000
# Per backend, when one is slower (containers: about half the process rate).
SOAK_SECTIONS_PROCESS ?= $(SOAK_SECTIONS)
SOAK_SECTIONS_DOCKER  ?= $(SOAK_SECTIONS)
SOAK_BACKENDS ?= process docker
SOAK_DIR      ?= soak
SOAK_MIN      ?= 1000000
# Extra go test flags for every run.
SOAK_FLAGS    ?=
.PHONY: chaos chaos-soak chaos-election chaos-pg
chaos: ## long fault-lab run (≥ 100 000 critical sections inside the assumptions); prints the table, JSON in tests/chaos/results.json (CHAOS_BACKEND=docker: on containers; CHAOS_FLAGS=-chaos.seed=N replays)
	@env_lines=$$(scripts/test-setup.sh) || exit 1; eval "$$env_lines"; \
	echo "$(GO) test ./tests/chaos -run 'TestChaos$$' -chaos.long -chaos.backend $(CHAOS_BACKEND) -chaos.json $(CHAOS_JSON) -v -timeout 45m $(CHAOS_FLAGS)"; \
	$(GO) test ./tests/chaos -run 'TestChaos$$' -chaos.long -chaos.backend $(CHAOS_BACKEND) -chaos.json $(CHAOS_JSON) -v -timeout 45m $(CHAOS_FLAGS)

# The mutex rows with PostgreSQL as the fenced resource (module sqlfence;
# -chaos.resource postgres): every row but the hand-off one, which writes
# nothing. CHAOS_PG_ISOLATION=serializable for the other level.
CHAOS_PG_ISOLATION ?= read-committed
chaos-pg: ## long fault-lab run with PostgreSQL as the fenced resource (≥ 100 000 sections inside the assumptions, 0 violations; each outside row: 0 stale writes applied at the database); JSON in tests/chaos/results-pg.json
	@env_lines=$$(scripts/test-setup.sh) || exit 1; eval "$$env_lines"; \
	echo "$(GO) test ./tests/chaos -count=1 -run 'TestChaos$$/^(inside|outside|restart-empty|clock-jump|unsafe|kleppmann)' -chaos.long -chaos.resource postgres -chaos.pg.isolation $(CHAOS_PG_ISOLATION) -chaos.json results-pg.json -v -timeout 45m $(CHAOS_FLAGS)"; \
	$(GO) test ./tests/chaos -count=1 -run 'TestChaos$$/^(inside|outside|restart-empty|clock-jump|unsafe|kleppmann)' -chaos.long -chaos.resource postgres -chaos.pg.isolation $(CHAOS_PG_ISOLATION) -chaos.json results-pg.json -v -timeout 45m $(CHAOS_FLAGS)

chaos-election: ## long fault-lab run of leader elections (≥ 100 000 terms inside the assumptions, 0 violations; the constructed rows show theirs); JSON in tests/chaos/results-election.json (CHAOS_FLAGS=-chaos.terms=N)
	@env_lines=$$(scripts/test-setup.sh) || exit 1; eval "$$env_lines"; \
	echo "$(GO) test ./tests/chaos -count=1 -run 'TestElection$$' -chaos.long -chaos.election.json results-election.json -v -timeout 60m $(CHAOS_FLAGS)"; \
	$(GO) test ./tests/chaos -count=1 -run 'TestElection$$' -chaos.long -chaos.election.json results-election.json -v -timeout 60m $(CHAOS_FLAGS)

# SOAK_SEEDS random seeds × SOAK_BACKENDS, each a long run of the two
# scenarios inside the assumptions (fenced clients, and clients handed the
# key by the release), each to SOAK_SECTIONS critical sections, one JSON per run in
# tests/chaos/$(SOAK_DIR)/; then the summary (per run: sections, violations,
# stale writes accepted, heap and goroutines at start and end) and the check
# against SOAK_MIN sections over ≥ SOAK_SEEDS seeds and both backends.
chaos-soak: ## ≥ 1 000 000 critical sections inside the assumptions (fenced and handed) over 10 seeds × process and docker, 0 violations (SOAK_SEEDS, SOAK_SECTIONS[_PROCESS|_DOCKER], SOAK_MIN scale it)
	@env_lines=$$(scripts/test-setup.sh) || exit 1; eval "$$env_lines"; \
	mkdir -p tests/chaos/$(SOAK_DIR); \
	for k in $$(seq 1 $(SOAK_SEEDS)); do \
		seed=$$(( $$(od -An -N6 -tu8 /dev/urandom | tr -d ' ') )); \
		for b in $(SOAK_BACKENDS); do \
			case $$b in docker) n=$(SOAK_SECTIONS_DOCKER);; *) n=$(SOAK_SECTIONS_PROCESS);; esac; \
			cmd="$(GO) test ./tests/chaos -count=1 -run TestChaos\$$/^(inside|handoff) -chaos.long -chaos.backend $$b -chaos.seed $$seed -chaos.sections $$n -chaos.json $(SOAK_DIR)/$$b-$$seed.json -timeout 4h $(SOAK_FLAGS)"; \
			echo "$$cmd"; $$cmd || exit 1; \
		done; \
	done; \
	$(GO) test ./tests/chaos -count=1 -run 'TestSoakSummary$$' -chaos.soak $(SOAK_DIR) -chaos.soak.min-sections $(SOAK_MIN) -chaos.soak.min-seeds $(SOAK_SEEDS) -v
