# Postmill. `make run` starts the platform on this machine; `make test` runs every module's tests.
SHELL := /bin/bash
GO ?= go
BIN := bin/postmill
BUF := $(GO) run github.com/bufbuild/buf/cmd/buf@v1.72.0
SQLC := $(GO) run github.com/sqlc-dev/sqlc/cmd/sqlc@v1.31.1
GENERATED := adapters/rpc/gen adapters/postgres/internal/db

.PHONY: build run test generate check-generate lint bench clean-data

build:
	$(GO) build -o $(BIN) ./deploy/cmd/postmill

run: build
	@deploy/scripts/run.sh

test:
	@deploy/scripts/test.sh

# generate rebuilds the Connect code from the protos and the query code from the SQL, with pinned tools
# fetched from the Go module proxy.
generate:
	$(BUF) generate
	cd adapters/postgres && $(SQLC) generate

check-generate: generate
	@git diff --exit-code -- $(GENERATED) || { echo "generated code is stale: run make generate and commit" >&2; exit 1; }
	@test -z "$$(git status --porcelain -- $(GENERATED))" || { echo "untracked generated files: run make generate and commit" >&2; git status --porcelain -- $(GENERATED) >&2; exit 1; }

lint:
	$(BUF) lint
	$(GO) vet ./ports/... ./core/... ./adapters/... ./edge/... ./mta/... ./inbound/... ./analytics/... ./deploy/...

clean-data:
	deploy/scripts/pg.sh destroy
	rm -rf .data
