# Lifecycle Manager. `make help` lists the targets.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

ROOT      := $(abspath .)
BIN       := $(ROOT)/bin
GO        ?= go
GOTESTFLAGS ?=

# No package of the project uses cgo. Without it, the tests, the binaries they build (the release
# images of internal/image, the operator of test/ha and test/faults, lmctl) and bin/ share one
# compiled graph of dependencies: with cgo the tests compiled it twice, since release builds go
# without, and a cold cache paid for both.
export CGO_ENABLED ?= 0

# Versions of everything built into bin/. Changing one rebuilds that binary.
KUBERNETES_VERSION  := v1.37.2
ETCD_VERSION        := v3.7.3
KWOK_VERSION        := v0.8.0
CONTROLLER_GEN      := $(BIN)/controller-gen
GOLANGCI_LINT       := $(BIN)/golangci-lint
GOTESTSUM           := $(BIN)/gotestsum
# The Prometheus of the rollout analysis tests; its version is hack/prometheus/go.mod's.
PROMETHEUS          := $(BIN)/prometheus

export LM_TESTBIN_DIR := $(BIN)

.DEFAULT_GOAL := help

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} \
		/^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2 } \
		/^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

# Flags for lmctl dev, e.g. make dev LMCTL_FLAGS="--runtimes 3 --keep"; bin/lmctl dev --help lists them.
LMCTL_FLAGS ?=

# No testbin prerequisite: lmctl dev runs `make testbin` itself, so that a first build shows its
# progress instead of several silent minutes.
.PHONY: dev
dev: ## Run a local fleet (bin/lmctl dev): control plane, runtimes, sample modules, the operator, live status. LMCTL_FLAGS passes flags.
	@echo "Building lmctl into $(BIN)/lmctl (the first build compiles the operator's dependencies: a minute or two) ..."
	@$(GO) build -o $(BIN)/lmctl ./cmd/lmctl
	@$(BIN)/lmctl dev $(LMCTL_FLAGS)

# make images IMAGE_REPOSITORY=registry.example.com/fleet VERSION=v0.2.0 IMAGE_PUSH=1
IMAGE_REPOSITORY ?= ghcr.io/runtime-fleet
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGE_PUSH ?=

.PHONY: images
images: ## Build the lifecycle-manager and runtime-watcher images without Docker into bin/images (OCI layout, SPDX SBOMs); IMAGE_PUSH=1 pushes them to IMAGE_REPOSITORY.
	$(GO) run ./internal/image/cmd --repository $(IMAGE_REPOSITORY) --version $(VERSION) --out $(BIN)/images $(if $(IMAGE_PUSH),--push)

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code for the API types.
	cd api && $(CONTROLLER_GEN) object paths=./...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs (config/crd/bases), the operator's RBAC (config/rbac, from internal/operator/rbac.go), and keep charts/lifecycle-manager and config/ in step.
	cd api && $(CONTROLLER_GEN) crd paths=./... output:crd:artifacts:config=$(ROOT)/config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=lifecycle-manager paths=./internal/operator output:rbac:artifacts:config=$(ROOT)/config/rbac
	$(GO) run ./internal/install/gen

.PHONY: verify
verify: generate manifests ## Fail when generated files or go.mod files are not up to date.
	@for d in . api hack/tools hack/prometheus hack/devtools/controller-gen hack/devtools/golangci-lint hack/devtools/gotestsum; do \
		(cd $$d && $(GO) mod tidy); done
	@if [ -n "$$(git status --porcelain -- api config charts go.mod go.sum hack)" ]; then \
		echo "Generated files or go.mod files are out of date; run 'make generate manifests' and 'go mod tidy', then commit:"; \
		git status --porcelain -- api config charts go.mod go.sum hack; git diff --stat; exit 1; fi

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint on the project and its API module.
	$(GOLANGCI_LINT) run ./...
	cd api && $(GOLANGCI_LINT) run --config $(ROOT)/.golangci.yml ./...

##@ Test

.PHONY: testbin
testbin: ## Build the control-plane binaries the tests run (kube-apiserver, etcd, kwok, ...) into bin/.
	@$(ROOT)/hack/testbin.sh $(BIN) $(KUBERNETES_VERSION) $(ETCD_VERSION) $(KWOK_VERSION)

# The tests of rollout analyses (internal/analysis, test/rollout) query it. Not part of
# testbin, which lmctl dev runs: a local fleet needs no Prometheus.
.PHONY: prometheus
prometheus: $(PROMETHEUS) ## Build the Prometheus server the tests of rollout analyses query into bin/ (make test does).

# No service discovery (remove_all_sd): the tests name their scrape targets, so the cloud
# SDKs of its discovery plugins are not compiled.
$(PROMETHEUS): hack/prometheus/go.mod
	@echo "Building Prometheus into $@ (hack/prometheus; 2-6 minutes on two cores the first time) ..."
	cd hack/prometheus && $(GO) build -tags remove_all_sd -o $@ github.com/prometheus/prometheus/cmd/prometheus

# The browser tests (test/console) drive Debian's headless Chromium; Go cannot build it, so it
# comes from the system's packages: installed here when missing and we are root (CI, a fresh
# machine), else the target says what to install instead of letting the tests fail obscurely.
CHROMIUM ?= /usr/bin/chromium

.PHONY: chromium
chromium: ## Install Debian's chromium and chromium-driver for the browser tests (test/console) when $(CHROMIUM) is missing.
	@if [ -x "$(CHROMIUM)" ]; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then \
		echo "The browser tests (test/console) need $(CHROMIUM): install Debian's packages chromium and chromium-driver (sudo apt-get install -y chromium chromium-driver), or run make as root to let it install them." >&2; \
		exit 1; fi; \
	echo "Installing chromium and chromium-driver for the browser tests (test/console) ..."; \
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	test -x "$(CHROMIUM)" || { echo "apt-get installed chromium, but $(CHROMIUM) is still missing" >&2; exit 1; }

# Both modules' tests run through gotestsum (hack/gotest.sh): a line per package as it finishes,
# every failure in full, then package times slowest first and a closing "test: N passed, N failed".
.PHONY: test
test: testbin $(PROMETHEUS) $(GOTESTSUM) chromium ## Run all tests against real API servers and headless Chromium (builds bin/ first); package times, slowest first, at the end.
	@GOTEST_MODULES=". api" $(ROOT)/hack/gotest.sh $(GOTESTSUM) test $(GOTESTFLAGS) -count=1 -timeout 30m ./...

# The slow packages, each run STRESS_COUNT times, e.g. make test-stress STRESS_PKGS=./test/ha STRESS_COUNT=5;
# STRESS_TIMEOUT (go test -timeout, 30m per count) and STRESS_BURNERS (busy loops, one per core) too.
STRESS_PKGS  ?= ./test/e2e ./test/ha ./test/watcher ./test/rollout ./test/backup ./test/lmctl ./test/console
STRESS_COUNT ?= 3

.PHONY: test-stress
test-stress: testbin $(PROMETHEUS) $(GOTESTSUM) chromium ## Run STRESS_PKGS (the slow packages) STRESS_COUNT (3) times with every core kept busy; lists every failed run at the end.
	@$(ROOT)/hack/stress.sh $(GOTESTSUM) $(STRESS_COUNT) $(GOTESTFLAGS) $(STRESS_PKGS)

.PHONY: screenshots
screenshots: testbin chromium ## Take the console's screenshots into docs/console (the browser tests of test/console, once), for docs/console.md.
	LM_SCREENSHOTS=$(ROOT)/docs/console $(GO) test -count=1 -run 'TestPagesRenderTheFleet|TestStateChangeReachesAnOpenPage|TestViewerWithoutRightsSeesNothing' ./test/console/

.PHONY: test-faults
test-faults: testbin ## Run the fault suite (test/faults, minutes): restarts, SIGKILLs and outages against the operator as its own process.
	LM_FAULTS=1 $(GO) test $(GOTESTFLAGS) -count=1 -timeout 20m ./test/faults/

# Flags for the fleet benchmark, e.g. make bench BENCH_FLAGS="--kymas 1000 --modules 20 --runtimes 4";
# go run ./cmd/fleet-bench --help lists them, docs/performance.md explains the figures.
BENCH_FLAGS ?=

.PHONY: bench
bench: testbin ## Run the benchmarks against real API servers and print their figures (BENCH_KYMAS, BENCH_MODULES; BENCH_FLAGS for the fleet benchmark).
	$(GO) test -count=1 -p 1 -run '^$$' -bench . -benchtime 1x -timeout 60m ./test/e2e/ ./test/watcher/
	$(GO) run ./cmd/fleet-bench $(BENCH_FLAGS)

# Time per fuzz target (make fuzz FUZZTIME=3m) and extra go test flags (FUZZFLAGS=-parallel=1).
FUZZTIME  ?= 30s
FUZZFLAGS ?=

.PHONY: fuzz
fuzz: ## Run every fuzz target (func FuzzXxx) in the repository for FUZZTIME each (30s), one after the other.
	@$(ROOT)/hack/fuzz.sh $(FUZZTIME) $(FUZZFLAGS)

##@ Tools

$(CONTROLLER_GEN): hack/devtools/controller-gen/go.mod
	cd hack/devtools/controller-gen && $(GO) build -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

$(GOTESTSUM): hack/devtools/gotestsum/go.mod
	cd hack/devtools/gotestsum && $(GO) build -o $@ gotest.tools/gotestsum

$(GOLANGCI_LINT): hack/devtools/golangci-lint/go.mod
	cd hack/devtools/golangci-lint && $(GO) build -o $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint
