#!/usr/bin/env bash
# make generate / make check-generate: the Connect code from the protos (buf and its two plugins) and the
# query code from the SQL (sqlc), with the pinned tools the Makefile names, built through `go run`.
#
#   deploy/scripts/generate.sh generate   run the generators, then write adapters/generated.sha256
#   deploy/scripts/generate.sh check      fail when the committed generated code is not what its sources give
#
# adapters/generated.sha256 lists the tools' versions and the SHA-256 of every file the generators read
# (protos, buf and sqlc configuration, migrations, queries) and write (adapters/rpc/gen,
# adapters/postgres/internal/db), as `make generate` last left them. `check` compares that list with the
# files of the checkout: when they are the same, the generated code is the output of those very sources
# and tools, and the generators, which take minutes to build on a machine with a cold Go build cache, are
# not run. When anything differs — a changed query, a hand-edited generated file, another tool version —
# `check` runs the generators and fails on any difference in the generated code, then on a list that
# `make generate` would write differently (README, Development).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
export LC_ALL=C

: "${BUF:?the Makefile names the pinned tools: run make generate or make check-generate}"
: "${SQLC:?the Makefile names the pinned tools: run make generate or make check-generate}"
SUM=adapters/generated.sha256
GENERATED=(adapters/rpc/gen adapters/postgres/internal/db)
SOURCES=(buf.yaml buf.gen.yaml adapters/rpc/proto adapters/postgres/sqlc.yaml adapters/postgres/migrations
	adapters/postgres/queries)

# manifest prints the list: the tools, then one `sha256  path` line per file, sorted by path.
manifest() {
	echo "# Written by make generate (deploy/scripts/generate.sh); make check-generate reads it."
	echo "# tools: buf=${BUF##*@} sqlc=${SQLC##*@}"
	find "${SOURCES[@]}" "${GENERATED[@]}" -type f -print0 | sort -z | xargs -0 sha256sum
}

run_generators() {
	$BUF generate
	(cd adapters/postgres && $SQLC generate)
}

case "${1:-}" in
generate)
	run_generators
	manifest >"$SUM"
	;;
check)
	if [ -f "$SUM" ] && [ "$(manifest)" = "$(cat "$SUM")" ]; then
		echo "generated code: sources, tools and output are those of $SUM; generators not run"
		exit 0
	fi
	echo "generated code: $SUM differs from the checkout; running the generators"
	run_generators
	git diff --exit-code -- "${GENERATED[@]}" ||
		{ echo "generated code is stale: run make generate and commit" >&2; exit 1; }
	if [ -n "$(git status --porcelain -- "${GENERATED[@]}")" ]; then
		echo "untracked generated files: run make generate and commit" >&2
		git status --porcelain -- "${GENERATED[@]}" >&2
		exit 1
	fi
	if ! changes=$(diff -u <(cat "$SUM" 2>/dev/null) <(manifest)); then
		printf '%s\n' "$changes" | head -n 40 >&2
		echo "the generated code is current but $SUM is not: run make generate and commit it" >&2
		exit 1
	fi
	;;
*)
	echo "usage: $0 generate|check" >&2
	exit 2
	;;
esac
