# Postmill. `make run` starts the platform on this machine; `make test` runs every module's tests.
SHELL := /bin/bash
GO ?= go
BIN := bin/postmill
BUF := $(GO) run github.com/bufbuild/buf/cmd/buf@v1.72.0
SQLC := $(GO) run github.com/sqlc-dev/sqlc/cmd/sqlc@v1.31.1

.PHONY: build run test generate check-generate lint bench clean-data

build:
	$(GO) build -o $(BIN) ./deploy/cmd/postmill

run: build
	@deploy/scripts/run.sh

test:
	@deploy/scripts/test.sh

# generate rebuilds the Connect code from the protos and the query code from the SQL, with pinned tools
# fetched from the Go module proxy.
# check-generate fails when the committed code is not what the sources give; it runs the generators only
# when adapters/generated.sha256 does not match the checkout (deploy/scripts/generate.sh).
generate:
	@BUF="$(BUF)" SQLC="$(SQLC)" deploy/scripts/generate.sh generate

check-generate:
	@BUF="$(BUF)" SQLC="$(SQLC)" deploy/scripts/generate.sh check

lint:
	$(BUF) lint
	$(GO) vet ./ports/... ./core/... ./adapters/... ./edge/... ./mta/... ./inbound/... ./analytics/... ./deploy/...

clean-data:
	deploy/scripts/pg.sh destroy
	rm -rf .data
