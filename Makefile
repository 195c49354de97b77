# Governor. `make run` starts the stack on embedded defaults; `make test` runs every test.
SHELL := /bin/bash
MODULES := $(dir $(wildcard go.mod sdk/go.mod sdk/grpc/go.mod bench/go.mod))
GO ?= go
TEST_FLAGS ?= -race -count=1 -timeout 20m
STATICCHECK := $(shell $(GO) env GOPATH)/bin/staticcheck

.PHONY: run test test-short bench bench-hotpath bench-sdk lint fmt tidy

## run: the zero-setup stack: embedded NATS, SQLite in ./var/, the embedded metrics store, the
## relay, the engine and a demo fleet of three services; prints where to look; Ctrl-C stops it.
run:
	$(GO) run ./cmd/engine -dev

## test: go test -race over every module, unit and integration tests together.
test:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './e2e/node_modules/*')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	@failed=""; for m in $(MODULES); do echo "== $$m"; (cd $$m && $(GO) test $(TEST_FLAGS) ./...) || failed="$$failed $$m"; done; \
	echo "== sdk allocation checks (without -race, which allocates)"; \
	(cd sdk && $(GO) test -count=1 -run 'DoesNotAllocate' ./...) || failed="$$failed sdk-allocs"; \
	if [ -n "$$failed" ]; then echo "FAILED:$$failed"; exit 1; fi

## test-short: the fast subset (no integration tests).
test-short:
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) test -short -count=1 ./...); done

## bench: the overload laboratory: every scenario in the simulator and live on loopback
## (about 40 minutes, CPU-bound: run it on a quiet machine); rewrites bench/RESULTS.md.
## BENCH_MODES=sim for the simulator only (seconds).
BENCH_MODES ?= sim,live
bench:
	cd bench && $(GO) build -o $${TMPDIR:-/tmp}/governor-overload ./cmd/overload && \
		$${TMPDIR:-/tmp}/governor-overload -all scenarios -modes "$(BENCH_MODES)" -save results \
		-analysis results/analysis.md -results RESULTS.md

## bench-hotpath: admit + release of Governor and its peers, benchstat table.
BENCHSTAT := $(shell $(GO) env GOPATH)/bin/benchstat
bench-hotpath: $(BENCHSTAT)
	@out=$$(mktemp); \
	(cd bench && $(GO) test -run '^$$' -bench '^BenchmarkAdmit$$' -benchmem -cpu 1,2 -count 5 ./limiters) | tee $$out; \
	$(BENCHSTAT) $$out; rm -f $$out

$(BENCHSTAT):
	$(GO) install golang.org/x/perf/cmd/benchstat@latest

## bench-sdk: SDK micro-benchmarks.
bench-sdk:
	cd sdk && $(GO) test -run '^$$' -bench . -benchmem -cpu 1,2 ./...

## lint: go vet and staticcheck over every module.
lint: $(STATICCHECK)
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) vet ./... && $(STATICCHECK) ./...); done

$(STATICCHECK):
	$(GO) install honnef.co/go/tools/cmd/staticcheck@latest

## fmt: gofmt every Go file.
fmt:
	gofmt -s -w $$(git ls-files '*.go')

tidy:
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) mod tidy); done
