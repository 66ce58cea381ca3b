# keel — make targets. `make run` and `make test` are the two set-up commands; both install
# what they need (PostgreSQL server binaries) on a fresh Debian machine.
GO        ?= go
BIN       := bin/keel
PKGS      := ./...
GOFLAGS   ?=
TEST_P    ?= 2
SERVICE_PORT ?= 3100
export SERVICE_PORT

.PHONY: all build run test bench proto deps vet fmt clean examples plugins generate

all: build

# deps installs the PostgreSQL 15 server binaries when they are missing (Debian layout).
deps:
	@if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null 2>&1 && [ -z "$$SERVICE_PG_BIN_DIR" ]; then \
		echo "installing postgresql-15 (server binaries for the embedded database)"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq postgresql-15 >/dev/null; \
	fi

build: plugins
	$(GO) build $(GOFLAGS) -o $(BIN) ./host/cmd/keel

# plugins builds the bundled first-party plugins' executables beside their manifests, so
# the bundled catalog (plugins/ of the bundled root) installs them as they are.
plugins:
	$(GO) build $(GOFLAGS) -o plugins/wiki/llm-wiki ./plugins/wiki

# run builds keel and starts it on its embedded PostgreSQL, loopback, local_trusted mode.
# SERVICE_HOME (default ~/.keel) and SERVICE_PORT (default 3100) are honoured.
run: deps build
	./$(BIN) serve

# test builds everything and runs the whole suite against real PostgreSQL and real
# extension processes: the host module, then the SDK module (sdk/, a Go module of its own).
test: deps build vet
	$(GO) test $(GOFLAGS) -p $(TEST_P) -count=1 -timeout 20m $(PKGS)
	cd sdk && $(GO) test $(GOFLAGS) -p $(TEST_P) -count=1 -timeout 20m $(PKGS)

vet:
	$(GO) vet $(PKGS)
	cd sdk && $(GO) vet $(PKGS)
	GOOS=wasip1 GOARCH=wasm $(GO) vet ./examples/wasm-counter/
	cd sdk && GOOS=wasip1 GOARCH=wasm $(GO) vet ./wasmguest/

# bench prints start-up times, the extension hop p50/p99, kernel and extension read
# throughput, the PSS of the host and each extension process, PostgreSQL's client backends
# and PSS right after that load burst and the instance's connection budget, and issue list and search
# times in a company of 100 issues against one of 100,000, the heartbeat engine's
# wake-to-running latency and runs per second for a process agent, what still starts beside
# fifty agents in ten-minute runs (a 51st run, a wake, a job, an event delivery, the routines
# tick), public webhook fires
# per second (hmac_sha256), spend reads and the dashboard over 1,000,000 cost events,
# cost events ingested per second, dashboard reads per second, case list times with filters
# in a company of 100 cases against one of 50,000, the p50 of a 200 KB case document PUT,
# deciding a decision with ten effects (p50/p99), the decision list in a company of 100
# decisions against one of 100,000, status-card change detection for a card watching 5,000
# issues (p50/p99), wiki_search over a wiki of 10,000 pages (p50/p99), and, for a plugin upgraded under a steady load of reads
# (BenchmarkUpgradeUnderLoad), the requests served during the upgrade, the failed ones and the
# longest request, and the server time (p50/p99) of each board page in a company of 10,000
# issues (BenchmarkBoardPages).
bench: deps build
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 20m ./host/bench/
	$(GO) test -run '^$$' -bench . -benchtime 200x -timeout 20m ./extensions/work/
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 20m ./extensions/agents/
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 20m ./extensions/agents/internal/loadbench/
	$(GO) test -run '^$$' -bench BenchmarkPublicFireHMAC -benchtime 1000x -timeout 20m ./extensions/routines/
	$(GO) test -run '^$$' -bench 1M -benchtime 50x -timeout 20m ./extensions/costs/
	$(GO) test -run '^$$' -bench Ingest -benchtime 2000x -timeout 20m ./extensions/costs/
	$(GO) test -run '^$$' -bench . -benchtime 2000x -timeout 20m ./extensions/dashboard/
	$(GO) test -run '^$$' -bench 'CaseList|CaseDocumentPut' -benchtime 200x -timeout 20m ./extensions/cases/
	$(GO) test -run '^$$' -bench DecideTenEffects -benchtime 1x -timeout 20m ./extensions/decisions/
	$(GO) test -run '^$$' -bench DecisionList -benchtime 200x -timeout 20m ./extensions/decisions/
	$(GO) test -run '^$$' -bench ChangeDetection -benchtime 50x -timeout 20m ./extensions/statuscards/
	$(GO) test -run '^$$' -bench Portability10k -benchtime 1x -timeout 60m ./extensions/portability/
	$(GO) test -run '^$$' -bench WikiSearch -benchtime 200x -timeout 20m ./plugins/wiki/
	$(GO) test -run '^$$' -bench BoardPages -benchtime 100x -timeout 20m ./board/

# proto regenerates the protocol code and the manifest JSON Schema (needs protoc and the
# protoc-gen-go/-go-grpc generators; the generated files are committed).
proto:
	cd sdk/proto && protoc -I . --go_out=. --go_opt=paths=source_relative \
		--go-grpc_out=. --go-grpc_opt=paths=source_relative extension/v1/extension.proto host/v1/host.proto
	cd sdk && $(GO) run ./internal/genschema

# generate regenerates the board's templ components (board/*_templ.go, committed) with the
# templ generator pinned as a Go tool dependency in go.mod; TestGeneratedCodeIsFresh fails when
# they are stale.
generate:
	$(GO) tool templ generate -path board

fmt:
	gofmt -w $$(git ls-files '*.go' | grep -v '\.pb\.go$$')

clean:
	rm -rf bin plugins/wiki/llm-wiki
