# treasury: the two commands a newcomer needs are `make run` and `make test`.
GO       ?= go
BIN      ?= bin
# Pure Go everywhere (modernc SQLite, no C compiler needed). Only the race detector needs
# cgo, so test-unit turns it back on for itself.
export CGO_ENABLED ?= 0
# Everything except the packages that link the embedded Temporal server; those are
# built once, without the race detector, to keep the build within reach of 2 cores.
FAST_PKGS = $(shell $(GO) list ./... | grep -v -e '/e2e$$' -e '/devstack$$' -e '/cmd/treasury-dev$$' -e '/bench/ceiling$$' -e '/faults$$' -e '/gethe2e$$')

.PHONY: devsvm run run-cluster build test test-unit test-e2e test-geth test-solana test-faults lint fmt bench bench-ceiling bench-lifecycle bench-burst bench-openloop bench-http bench-live bench-webhooks bench-retention bench-audit bench-payouts bench-scale bench-parked screenshots docs-events

## run: build and start the dev bundle (embedded Temporal + UI, API, worker, demo org)
run: $(BIN)/treasury-dev devsvm
	./$(BIN)/treasury-dev $(ARGS)

## run-cluster: the production topology on this machine, no Docker: Temporal on PostgreSQL
## with its UI, two api and two worker processes, the local PostgreSQL as the store
run-cluster: $(BIN)/treasury-dev $(BIN)/treasury devsvm
	./$(BIN)/treasury-dev cluster --treasury-bin $(BIN)/treasury $(ARGS)

## build: both binaries into ./bin
build: $(BIN)/treasury $(BIN)/treasury-dev

# The go tool decides what is stale; make always asks it. Symbols are stripped (-s -w);
# stack traces keep their function names.
# A first build of treasury-dev compiles the embedded Temporal server: it says so, and lists
# each package as it is compiled (go build -v) so that a long quiet wait shows progress.
$(BIN)/treasury $(BIN)/treasury-dev: FORCE
	@if [ "$(notdir $@)" = treasury-dev ] && [ ! -x $@ ]; then \
	  echo "First build of $@: it compiles the embedded Temporal server, several minutes (about 15 on 2 busy cores); each package is listed as it compiles. Later builds take seconds."; fi
	$(GO) build $(if $(wildcard $@),,-v) -ldflags="-s -w" -o $@ ./cmd/$(notdir $@)

# geth, for the suite against a separate node: built from the go-ethereum module go.mod
# pins (its tool directive), fetched through the module proxy and cached like the rest.
$(BIN)/geth: FORCE
	$(GO) build -ldflags="-s -w" -o $@ github.com/ethereum/go-ethereum/cmd/geth

FORCE:

## devsvm: the dev Solana chain's npm modules (litesvm, pinned by dev/devsvm/package-lock.json)
## in $(BIN)/devsvm, where dev/devsvm finds them
devsvm: $(BIN)/devsvm/node_modules/.package-lock.json

# npm install with the lock file, not npm ci: litesvm 1.5.0 lists six native packages as
# optional dependencies but only litesvm-linux-x64-gnu was published at 1.5.0, and npm ci
# refuses a lock file without the other five. npm install keeps to the lock's versions and
# integrity hashes and skips them.
$(BIN)/devsvm/node_modules/.package-lock.json: dev/devsvm/package.json dev/devsvm/package-lock.json
	mkdir -p $(BIN)/devsvm
	cp dev/devsvm/package.json dev/devsvm/package-lock.json $(BIN)/devsvm/
	cd $(BIN)/devsvm && npm install --omit=dev --no-audit --no-fund
	touch $@


## test: lint, unit/store/workflow tests with the race detector, then end-to-end tests
## (against the dev bundle, then against geth, then against Solana's runtime)
test: lint test-unit test-e2e test-geth test-solana

# The API package's race run is the longest: about 10 min on 2 cores beside the other
# packages (the race detector slows the pure-Go SQLite most), at go test's default limit.
test-unit: devsvm
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 30m $(FAST_PKGS)

# The end-to-end tests drive the binaries that make build builds (the README tour runs
# ./bin/treasury events tail), besides the in-process bundle.
test-e2e: $(BIN)/treasury-dev $(BIN)/treasury devsvm
	TREASURY_DEV_BIN=$(abspath $(BIN)/treasury-dev) TREASURY_BIN=$(abspath $(BIN)/treasury) $(GO) test -count=1 ./dev/e2e/... ./cmd/treasury-dev/

## test-geth: payments, a revert, fifty payments from one wallet, workers killed mid-flight,
## a trade, an earn deposit and a borrow draw, a compromised database against the verifying
## signer, on the cluster topology against `geth --dev`
## run as a process of its own (dev/gethe2e, about a minute once built)
SEPARATE_NODES = GETH_BIN=$(abspath $(BIN)/geth) TREASURY_DEV_BIN=$(abspath $(BIN)/treasury-dev) TREASURY_BIN=$(abspath $(BIN)/treasury) $(GO) test -v -count=1 -timeout 20m
test-geth: $(BIN)/geth $(BIN)/treasury-dev $(BIN)/treasury devsvm
	$(SEPARATE_NODES) -skip '^TestSolana' ./dev/gethe2e/

## test-solana: Solana payments on the cluster topology against Solana's runtime (dev/devsvm)
## as a process of its own: workers killed between a broadcast and its commit, the node
## stopped and started again mid-run (the same suite as test-geth, its TestSolana tests)
test-solana: $(BIN)/geth $(BIN)/treasury-dev $(BIN)/treasury devsvm
	$(SEPARATE_NODES) -run '^TestSolana' ./dev/gethe2e/

## test-fuzz: every fuzz target for about 20 s each, one after another; seed corpora and
## the inputs that once failed are under each package's testdata/fuzz
# Each budget is a count of executions (what the target ran in 20 s here), not a duration:
# Go before 1.27 can fail a duration-bounded run with "context deadline exceeded" as the
# time runs out, no input at fault (go.dev/issue/75804). FUZZSCALE multiplies every budget
# for a longer run.
FUZZSCALE ?= 1
# Minimising each new input would take up to a minute of its own (Go's default), most of a
# short run on the slower targets.
FUZZMINIMIZETIME ?= 2s
FUZZ = $(GO) test -run '^$$' -fuzzminimizetime $(FUZZMINIMIZETIME)
fuzzruns = -fuzztime $(shell echo $$(($(1) * $(FUZZSCALE))))x
.PHONY: test-fuzz
test-fuzz:
	$(FUZZ) $(call fuzzruns,1000) -fuzz '^FuzzRequestBody$$' ./api/
	$(FUZZ) $(call fuzzruns,12000) -fuzz '^FuzzCursor$$' ./api/
	$(FUZZ) $(call fuzzruns,5000) -fuzz '^FuzzIdempotencyKey$$' ./api/
	$(FUZZ) $(call fuzzruns,200000) -fuzz '^FuzzAmount$$' ./internal/orders/
	$(FUZZ) $(call fuzzruns,90000) -fuzz '^FuzzSubscriptionEntry$$' ./internal/events/
	$(FUZZ) $(call fuzzruns,28000) -fuzz '^FuzzClientFrames$$' ./wshub/
	$(FUZZ) $(call fuzzruns,180000) -fuzz '^FuzzVerify$$' ./webhook/

## test-faults: fault tests on the cluster topology (make run-cluster's): workers killed with
## SIGKILL mid-flight, an api killed under live clients, PostgreSQL restarted, Temporal
## stopped for 30 s; prints one table row per scenario (about 4 minutes)
test-faults: $(BIN)/treasury-dev $(BIN)/treasury devsvm
	TREASURY_DEV_BIN=$(abspath $(BIN)/treasury-dev) TREASURY_BIN=$(abspath $(BIN)/treasury) $(GO) test -v -count=1 -timeout 20m ./dev/faults/

## screenshots: the console's browser test, saving a screenshot of every page in docs/console
screenshots:
	CONSOLE_SCREENSHOTS=$(abspath docs/console) $(GO) test -count=1 -run TestConsoleInABrowser ./dev/e2e/

## docs-events: rewrite docs/events.md from a run of the dev bundle
docs-events:
	WRITE_EVENTS_DOC=1 $(GO) test -count=1 -run TestEventsCatalogue ./dev/e2e/

## bench: every benchmark below, about 15 minutes on 2 cores, ending with one table of every
## target beside its figure; figures and their reading are in docs/benchmarks.md. Each part
## runs alone too (make bench-ceiling, ...).
BENCH_SUMMARY = $(CURDIR)/$(BIN)/bench-summary.tsv
bench:
	@mkdir -p $(BIN) && rm -f $(BENCH_SUMMARY)
	BENCH_SUMMARY=$(BENCH_SUMMARY) $(MAKE) --no-print-directory bench-ceiling bench-lifecycle bench-burst bench-openloop bench-http bench-live bench-webhooks bench-retention bench-audit bench-payouts
	$(GO) run ./dev/bench/summary $(BENCH_SUMMARY)

# Payouts: 500 recipients as one batch payment beside the same 500 as single payments, on
# one fresh dev bundle in alternating rounds: wall time, CPU and transactions.
bench-payouts: $(BIN)/treasury-dev devsvm
	$(GO) run ./dev/bench/payouts -dev-bin $(BIN)/treasury-dev -recipients 500 -rounds 2

# The lifecycle beside the engine's ceiling: a bare workflow of an order's shape on the same
# embedded Temporal server in the same process, on the SQLite and the PostgreSQL store
# (a database made on the local server for the run, dropped after).
bench-ceiling:
	$(GO) run ./dev/bench/ceiling -orders 200 -rounds 3 -store sqlite
	$(GO) run ./dev/bench/ceiling -orders 200 -rounds 3 -store postgres

# 200 payments submitted at once to the dev bundle, then 20 one at a time against the
# chain's floor (block time x confirmations), then 20 approved ones signed by treasury signer,
# plain beside signed approvals with the verifying signer (the verification's cost); then
# 20 Solana payments one at a time against the slot time, and 200 at once on the dev
# Solana chain beside the same on the in-process EVM (ratio and CPU per order).
bench-lifecycle: $(BIN)/treasury-dev devsvm
	$(GO) run ./dev/bench/lifecycle -dev-bin $(BIN)/treasury-dev -orders 200
	$(GO) run ./dev/bench/lifecycle -dev-bin $(BIN)/treasury-dev -lone 20
	$(GO) run ./dev/bench/lifecycle -dev-bin $(BIN)/treasury-dev -lone 20 -signed
	$(GO) run ./dev/bench/lifecycle -dev-bin $(BIN)/treasury-dev -lone 20 -scenario solana-payments
	$(GO) run ./dev/bench/lifecycle -dev-bin $(BIN)/treasury-dev -svm -orders 200 -rounds 3

# A burst: 1,000 payments submitted at once to a fresh bundle (the per-key rate limit
# lifted, so that one key sends them all): how many answers were not 2xx (target 0), how
# many were accepted with the policy's decision still pending, and the answers' p50 and p99
# beside a lone submit's; then every order followed to its end.
bench-burst: $(BIN)/treasury-dev
	$(GO) run ./dev/bench/burst -dev-bin $(BIN)/treasury-dev -orders 1000

# Open-loop latency curves: payments at fixed rates, raised until the bundle saturates;
# prints the table and draws docs/bench/openloop-sqlite.svg.
bench-openloop: $(BIN)/treasury-dev
	$(GO) run ./dev/bench/openloop -dev-bin $(BIN)/treasury-dev -step 15s -svg docs/bench/openloop-sqlite.svg

# The API's cost per request: portfolio reads and payment creates through the real router
# on SQLite and on PostgreSQL (DATABASE_URL, or the local server's "test" database; a schema
# of its own, dropped after), each beside a bare Gin handler answering the same bytes in the
# same process. No dev bundle: the router runs inside the load program.
bench-http:
	$(GO) run ./dev/bench/httpcost -duration 6s

# The live channel: commit-to-client latency at 1,000 and 10,000 clients, five runs each on
# a fresh bundle, and the memory an idle connection holds.
bench-live: $(BIN)/treasury-dev
	$(GO) run ./dev/bench/wsfanout -dev-bin $(BIN)/treasury-dev -clients 1000,10000 -events 30 -runs 5
	$(GO) test -run '^$$' -bench IdleConnectionMemory -benchtime 1x ./wshub/

# Webhooks: how fast the dispatcher drains a backlog (beside a bare client), and the
# lifecycle with one webhook on every event beside the lifecycle without.
bench-webhooks: $(BIN)/treasury-dev
	$(GO) run ./dev/bench/webhooks -deliveries 10000
	$(GO) test -run '^$$' -bench HealthyLatency -benchtime 40x ./internal/webhook/dispatch/
	$(GO) run ./dev/bench/lifecycle -dev-bin $(BIN)/treasury-dev -orders 200 -webhooks 1 -rounds 3

# Retention: nine hours of steady traffic on a compressed clock, the hourly maintenance
# after each, on SQLite and on PostgreSQL (a database made on the local server for the run,
# dropped after): each table's rows hour by hour, levelling off, and what the deletes cost
# beside writing the same rows (about 2 minutes).
bench-retention:
	$(GO) run ./dev/bench/retention

# The audit chain's background verification: a chain of 1,000,000 entries imported into a
# fresh store, then verified page after page as its workflow does, beside the same pages
# read unchecked; on SQLite and on PostgreSQL (a database made on the local server for the
# run, dropped after).
bench-audit:
	$(GO) run ./dev/bench/auditverify -n 1000000

## bench-scale: how each read's and write's cost grows with the data: the dev bundle grown
## to 10 k, 100 k and 1 M orders of history on PostgreSQL (a database made on the local
## server, dropped after) and 10 k and 100 k on SQLite, beside 10,000 orders waiting for
## approvers and 1,000 wallets; p50/p99 at each size in one table (about 13 minutes; not
## part of make bench).
bench-scale: $(BIN)/treasury-dev devsvm
	$(GO) run ./dev/bench/scale -dev-bin $(BIN)/treasury-dev -explain

## bench-parked: 20,000 payments waiting for their approvers at once: the bundle's memory
## and idle CPU beside the same with none waiting, an approver deciding them all at a
## credential's rate limit, every one confirming, and listing orders meanwhile (about 20
## minutes; not part of make bench).
bench-parked: $(BIN)/treasury-dev devsvm
	$(GO) run ./dev/bench/parked -dev-bin $(BIN)/treasury-dev -orders 20000

## lint: go vet and a gofmt check
lint:
	$(GO) vet ./...
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

## fmt: rewrite files with gofmt
fmt:
	gofmt -w $$(git ls-files '*.go')
