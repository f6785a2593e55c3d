#!/usr/bin/env bash
# make test: every module's tests against a real PostgreSQL — POSTMILL_TEST_DATABASE_URL when set, otherwise
# the private cluster of pg.sh (database postmill_test; each test makes its own schema in it) — then a short
# run of every fuzz target (fuzz.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
if [ -z "${POSTMILL_TEST_DATABASE_URL:-}" ]; then
	POSTMILL_TEST_DATABASE_URL=$(deploy/scripts/pg.sh url postmill_test)
	export POSTMILL_TEST_DATABASE_URL
fi
echo "test database: ${POSTMILL_TEST_DATABASE_URL%%\?*}"
# pg.sh itself, from a checkout the postgres user cannot enter (a few seconds; only as root).
deploy/scripts/pg_test.sh
# make check-generate's list of sources and outputs (a second, with stand-ins for buf and sqlc).
deploy/scripts/generate_test.sh
# make run itself, as a new user runs it, on free ports and a cluster of its own (run_test.sh; 15-30 s).
deploy/scripts/run_test.sh
# Engines the tests start themselves besides PostgreSQL (clamd) and the independent DKIM verifier.
if ! deploy/scripts/test-deps.sh >&2; then
	[ "${CI:-}" = true ] && exit 1
	echo "some engines are missing: their tests skip (see above)" >&2
fi
# The longest packages first: go test starts packages in the order given, and deploy/e2e (about four
# minutes, half of it waiting on processes it starts) overlaps the others instead of running alone last
# (a whole run: 326 s against 453 s with the modules in dependency order, docs/testing.md).
modules=(deploy adapters edge mta inbound analytics core ports)
pkgs=()
for m in "${modules[@]}"; do pkgs+=("./$m/..."); done
go vet "${pkgs[@]}"
go test -count=1 -timeout 15m "${pkgs[@]}" "$@"
# A short run of every fuzz target, POSTMILL_FUZZ_TIME each (docs/testing.md).
deploy/scripts/fuzz.sh
