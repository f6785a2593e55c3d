#!/usr/bin/env bash
# react-bundle.sh: rebuilds adapters/react/bundle/react-email.js (and VERSIONS next to it), the React,
# react-dom/server and @react-email JavaScript that Postmill embeds to render React Email templates.
#
# The packages are those pinned in adapters/react/js/package.json and package-lock.json; `npm ci` installs
# exactly the locked versions (integrity-checked) into a temporary directory, and the bundle is built with
# esbuild's Go API (adapters/react/internal/bundler), so the only tools needed are Go and npm. The output is
# committed: `go build` never runs npm. Re-running with the same lock file gives the same bytes.
#
# To change a version: edit package.json, run `npm install --package-lock-only` in adapters/react/js, then this
# script, and commit the three files with the new bundle.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
js="$root/adapters/react/js"
out="$root/adapters/react/bundle/react-email.js"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cp "$js/package.json" "$js/package-lock.json" "$js/entry.js" "$work/"
(cd "$work" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)

mkdir -p "$(dirname "$out")"
(cd "$root/adapters" && go run ./react/internal/bundler -dir "$work" -out "$out")

echo "wrote $out ($(wc -c <"$out") bytes)"
cat "$(dirname "$out")/VERSIONS"
