#!/usr/bin/env bash
# make test, last step: a short run of every Go fuzz target in the repository, found by grepping the
# modules' test files for `func FuzzX(`, so a new target joins without being listed anywhere. go test runs
# one fuzz target of one package per invocation, so each gets its own.
#
#   deploy/scripts/fuzz.sh                                    every target, POSTMILL_FUZZ_TIME each (3s)
#   POSTMILL_FUZZ_TIME=10m deploy/scripts/fuzz.sh FuzzParseDSN  one target (or several) for longer
#
# A failing input is written to <package>/testdata/fuzz/<FuzzX>/ and the script fails; see docs/testing.md.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
fuzztime=${POSTMILL_FUZZ_TIME:-3s}
modules=(ports core adapters edge mta inbound analytics deploy)

# "package-dir FuzzName" per target, sorted.
mapfile -t targets < <(grep -rEo --include='*_test.go' --exclude-dir=testdata --exclude-dir=node_modules \
	'^func Fuzz[A-Za-z0-9_]*\(' "${modules[@]}" |
	sed -E 's#^(.*)/[^/]+:func (Fuzz[A-Za-z0-9_]*)\($#\1 \2#' | sort -u)
if [ "${#targets[@]}" -eq 0 ]; then
	echo "fuzz: no fuzz targets found" >&2
	exit 1
fi

want=" $* "
failed=()
ran=0
start=$SECONDS
for t in "${targets[@]}"; do
	dir=${t% *} name=${t#* }
	if [ $# -gt 0 ] && [[ $want != *" $name "* ]]; then
		continue
	fi
	ran=$((ran + 1))
	t0=$SECONDS
	if out=$(go test -run '^$' -fuzz "^${name}\$" -fuzztime="$fuzztime" "./$dir" 2>&1); then
		printf 'ok    %-16s %-20s %3ds\n' "$dir" "$name" $((SECONDS - t0))
	elif [[ $out == *"context deadline exceeded"* ]] && [ -z "$(printf '%s\n' "$out" | grep -v \
		-e '^fuzz: ' -e "^--- FAIL: ${name} (" -e '^    context deadline exceeded$' -e '^FAIL' -e '^exit status ')" ]; then
		# Go 1.26's fuzz coordinator can report its own -fuzztime deadline as a failure when a worker is
		# slow to stop (golang/go#75804, fixed in Go 1.27): no input failed and none was written.
		printf 'ok    %-16s %-20s %3ds  (deadline race of golang/go#75804, no failing input)\n' "$dir" "$name" $((SECONDS - t0))
	else
		printf 'FAIL  %-16s %-20s %3ds\n' "$dir" "$name" $((SECONDS - t0))
		printf '%s\n' "$out" | grep -v '^fuzz: elapsed: ' >&2
		failed+=("$dir $name")
	fi
done
if [ "$ran" -eq 0 ]; then
	echo "fuzz: no target named $*" >&2
	exit 1
fi
echo "fuzz: $ran targets, ${fuzztime} each, $((SECONDS - start))s"
if [ "${#failed[@]}" -gt 0 ]; then
	echo "fuzz: failed: ${failed[*]} (failing inputs are in <package>/testdata/fuzz/<target>/, see docs/testing.md)" >&2
	exit 1
fi
