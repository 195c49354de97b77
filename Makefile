# Governor. `make run` starts the stack on embedded defaults; `make test` runs every test.
SHELL := /bin/bash
MODULES := $(dir $(wildcard go.mod sdk/go.mod sdk/grpc/go.mod bench/go.mod))
GO ?= go
TEST_FLAGS ?= -race -count=1 -timeout 20m
STATICCHECK := $(shell $(GO) env GOPATH)/bin/staticcheck

.PHONY: run test test-short bench bench-hotpath lint fmt tidy

## run: start the demo service (the whole stack once the engine lands).
run:
	$(GO) run ./cmd/demo

## test: go test -race over every module, unit and integration tests together.
test:
	@set -e; for m in $(MODULES); do echo "== $$m"; (cd $$m && $(GO) test $(TEST_FLAGS) ./...); done

## test-short: the fast subset (no integration tests).
test-short:
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) test -short -count=1 ./...); done

## bench: SDK micro-benchmarks (the overload laboratory adds its own targets).
bench:
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
