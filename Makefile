# Skep's build, lint and test entry points. `make test` is what CI runs.
SHELL := /bin/bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/skep-cd/skep/version.Version=$(VERSION) -X github.com/skep-cd/skep/version.Commit=$(COMMIT)
# Integration tests share one swarm. Packages are compiled two at a time,
# then run one at a time: the Engine (20.10) has crashed in swarmkit when
# several suites create and remove services on it at once. Within a
# package, the end-to-end tests that wait on the swarm far more than they
# compute (reconcile's) run four at a time, each on its own controller id,
# stack prefix, git server and ports.
TEST_FLAGS ?= -race -count=1 -timeout 40m -p 1 -parallel 4

.PHONY: demo build test lint vet fmt-check staticcheck swarm-up swarm-down swarm2-up swarm2-down cluster-up cluster-down unit faults fuzz bench soak soak-ha clean

build: ## build bin/skep (static: the demo packages it FROM scratch)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/skep ./cmd/skep

# The main job: a demo that deploys something real on this machine's swarm.
# DEMO_FLAGS=--exit-after-showcase ends it after the showcase (CI does).
demo: swarm-up build
	bin/skep demo $(DEMO_FLAGS)

swarm-up:
	scripts/swarm-up

swarm-down:
	scripts/swarm-down

# A second, independent swarm for multi-destination tests (docs/testing.md).
swarm2-up:
	scripts/swarm2-up

swarm2-down:
	scripts/swarm2-down

# A multi-node swarm, 3 managers and 2 workers, for the multi-node tests
# (docs/testing.md).
cluster-up:
	scripts/cluster-up

cluster-down:
	scripts/cluster-down

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

staticcheck:
	$(GO) tool staticcheck ./...

lint: fmt-check vet staticcheck

# Every test, with a real swarm required: a missing swarm fails, never skips,
# and so does a missing multi-node cluster (the multinode package, about
# six minutes of the run). scripts/go-test ends a failed run with what
# failed, so that the tail of the output names it.
test: swarm-up swarm2-up cluster-up lint
	$(GO) test -race -p 2 -run '^$$' ./... >/dev/null
	SKEP_REQUIRE_SWARM=1 SKEP_REQUIRE_CLUSTER=1 GO=$(GO) scripts/go-test $(TEST_FLAGS) ./...

# The whole fault suite (docs/reliability.md): the controller, the daemon,
# git, the registry, the store and notifiers broken mid-work, about seven
# minutes. make test runs only its fast cases; this runs every one. The
# daemon case restarts the second swarm's Engine (never the main one).
faults: swarm-up swarm2-up
	SKEP_REQUIRE_SWARM=1 SKEP_FAULTS=1 GO=$(GO) scripts/go-test $(TEST_FLAGS) -run '^TestFault' ./cli/

# Unit tests only: integration tests skip without a swarm.
unit:
	$(GO) test -race -count=1 -short ./...

# Every fuzz target for FUZZTIME each (not part of `make test`): a crash
# lands in the package's testdata/fuzz and becomes a regression test.
FUZZTIME ?= 1m
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  for target in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/^func //'); do \
	    echo "fuzz $$pkg $$target ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

# Speed (issue 16; not part of `make test`, see docs/performance.md): the
# Go benchmarks of the hot pure functions (benchstat-friendly, kept in
# bin/bench-go.txt), then the measurements on the local swarm side by side
# with `docker stack deploy`, printed as one table. It takes about 30
# minutes; BENCH_IDLE, BENCH_SAMPLES and BENCH_SCALE (-1 skips the large
# scale point) shorten it, BENCH_SCALE_REPOS spreads the large scale
# point over that many repositories; BENCH_ONLY=scale, deploy, idle, polling, webhook or failover
# measures one part alone (docs/performance.md).
BENCH_PKGS ?= ./stack ./plan ./notify ./gitsource
BENCH_IDLE ?= 5m
BENCH_SAMPLES ?= 10
BENCH_SCALE ?= 200
BENCH_SCALE_SERVICES ?= 1
BENCH_SCALE_REPOS ?= 1
BENCH_ONLY ?=
bench: swarm-up build
	set -o pipefail; $(GO) test -count=1 -run '^$$' -bench . -benchmem $(BENCH_PKGS) | tee bin/bench-go.txt
	set -o pipefail; SKEP_REQUIRE_SWARM=1 $(GO) test -count=1 -run '^$$' -bench '^BenchmarkQuietTick$$' -benchtime 2000x -benchmem ./reconcile \
	| grep -E '^(Benchmark|PASS|ok|FAIL|goos|goarch|pkg|cpu)' | tee -a bin/bench-go.txt
	SKEP_REQUIRE_SWARM=1 SKEP_BENCH=1 SKEP_BENCH_BINARY=$(CURDIR)/bin/skep SKEP_BENCH_GO=$(CURDIR)/bin/bench-go.txt \
	SKEP_BENCH_IDLE=$(BENCH_IDLE) SKEP_BENCH_SAMPLES=$(BENCH_SAMPLES) SKEP_BENCH_SCALE=$(BENCH_SCALE) SKEP_BENCH_SCALE_SERVICES=$(BENCH_SCALE_SERVICES) SKEP_BENCH_SCALE_REPOS=$(BENCH_SCALE_REPOS) SKEP_BENCH_ONLY=$(BENCH_ONLY) \
	$(GO) test -count=1 -timeout 90m -run '^$$' -bench '^BenchmarkSwarm$$' -benchtime 1x ./bench

# Load (issue 18; not part of `make test`, see docs/reliability.md): SOAK_APPS
# applications on the local swarm under commits every 3 s, out-of-band
# changes every 20 s, 200 event-stream subscribers and API readers for
# SOAK_DURATION, then one table. It fails on any error or when the
# controller's memory is not flat. Setup and clean-up add about 10 minutes.
SOAK_DURATION ?= 10m
SOAK_APPS ?= 100
SOAK_TIMEOUT ?= 3h
soak: swarm-up build
	SKEP_REQUIRE_SWARM=1 SKEP_SOAK=1 SKEP_SOAK_BINARY=$(CURDIR)/bin/skep \
	SKEP_SOAK_DURATION=$(SOAK_DURATION) SKEP_SOAK_APPS=$(SOAK_APPS) \
	$(GO) test -count=1 -timeout $(SOAK_TIMEOUT) -run '^TestSoak$$' -v ./bench

# High availability (issue 38; not part of `make test`, see
# docs/reliability.md): three replicas of the controller, a random one
# killed every 30–90 s for SOAK_HA_DURATION while a commit lands every few
# seconds; it fails unless every commit was applied exactly once, no
# replica wrote while another held the lease, and every replica kept the
# same event history.
SOAK_HA_DURATION ?= 20m
soak-ha: swarm-up build
	SKEP_REQUIRE_SWARM=1 SKEP_SOAK_HA=1 SKEP_SOAK_BINARY=$(CURDIR)/bin/skep SKEP_SOAK_DURATION=$(SOAK_HA_DURATION) \
	$(GO) test -count=1 -timeout $(SOAK_TIMEOUT) -run '^TestSoakHA$$' -v ./bench

clean:
	rm -rf bin
