#!/usr/bin/env bash
# generate_test.sh: make check-generate skips the generators only when adapters/generated.sha256 matches the
# checkout, and fails on a changed source, a hand-edited generated file or a stale list. It works on a
# clone of the committed tree, with stand-ins for buf and sqlc that write nothing (`true`) or must not run
# (`false`), so it takes a second and needs no tool build. test.sh runs it.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

fail() {
	echo "generate_test.sh: FAIL: $*" >&2
	exit 1
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git clone -q "$ROOT" "$work/repo"
cd "$work/repo"
git config user.email test@postmill.invalid
git config user.name generate_test
script=deploy/scripts/generate.sh

# The pinned tools as the Makefile names them (the list records their versions). A stand-in is `true` or
# `false` followed by the tool's module path and version, which both ignore.
buf=$(sed -n 's/^BUF := .* \([^ ]*@[^ ]*\)$/\1/p' Makefile)
sqlc=$(sed -n 's/^SQLC := .* \([^ ]*@[^ ]*\)$/\1/p' Makefile)
[ -n "$buf" ] && [ -n "$sqlc" ] || fail "the Makefile's BUF and SQLC were not found"

# check runs the stand-in CMD as both generators and sets $out to the script's output and $status to its
# exit status.
check() {
	set +e
	out=$(BUF="$1 $buf" SQLC="$1 $sqlc" "$script" check 2>&1)
	status=$?
	set -e
}

# 1. The committed list matches: the generators are not run (`false` would fail the check).
check false
[ "$status" = 0 ] || fail "a checkout matching its list was not accepted: $out"
[[ $out == *"generators not run"* ]] || fail "the matching checkout did not skip the generators: $out"

# 2. A changed query whose generated code nobody regenerated: the list no longer matches, the generators
# run, and the check fails (here the stand-in generator leaves the code as it was: the list is stale).
echo "-- a change" >>adapters/postgres/queries/queue.sql
check false
[ "$status" != 0 ] || fail "a changed query skipped the generators"
check true
[ "$status" != 0 ] || fail "a changed query with stale generated code passed: $out"
[[ $out == *"run make generate and commit it"* ]] || fail "a stale list was not named: $out"
git checkout -q -- adapters/postgres/queries/queue.sql

# 3. A hand-edited generated file: the generators run and the difference fails the check.
echo "// edited by hand" >>adapters/postgres/internal/db/queue.sql.go
check true
[ "$status" != 0 ] || fail "a hand-edited generated file passed: $out"
[[ $out == *"generated code is stale"* ]] || fail "a hand-edited generated file was not reported as stale: $out"
git checkout -q -- adapters/postgres/internal/db/queue.sql.go

# 4. make generate writes the list anew: after a committed change and a regeneration, check skips again.
echo "-- a change" >>adapters/postgres/queries/queue.sql
BUF="true $buf" SQLC="true $sqlc" "$script" generate
git commit -qam "a change"
check false
[ "$status" = 0 ] || fail "the list make generate wrote did not match: $out"

echo "generate_test.sh: ok"
