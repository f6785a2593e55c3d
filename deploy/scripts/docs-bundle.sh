#!/usr/bin/env bash
# docs-bundle.sh: refreshes edge/docsui/assets/swagger-ui/, the OpenAPI viewer the edge serves at /docs from
# the binary (no CDN: the page renders on a machine with no internet access).
#
# It fetches swagger-ui-dist at the pinned version with `npm pack` into a temporary directory, checks the
# tarball's sha512 against the pinned integrity (npm checks it against the registry; the pin also guards
# against a re-published version), and copies the two files the page loads plus the licence texts.
# The output is committed: `go build` never runs npm. Re-running with the same pin gives the same bytes.
#
# To change the version: set version below, run the script once with integrity="" to print the new
# integrity, pin it, run again, update edge/docsui/README.md, check /docs in a browser (the edge's
# TestDocsRenderOffline does) and commit the directory with the script.
set -euo pipefail

package=swagger-ui-dist
version=5.35.0
integrity=sha512-U06rpMtW9V3XPGOBeamTUSr0Z09jMX4IJuANpE/EZbAhw0G8CgwrzU4YmXkn/h0wCDNsXdGarTNNHC3sU8yVUQ==
# what the page loads, then the licence, notice and third-party licence texts that travel with it
files=(swagger-ui-bundle.js swagger-ui.css LICENSE NOTICE swagger-ui-bundle.js.LICENSE.txt)

root=$(cd "$(dirname "$0")/../.." && pwd)
out="$root/edge/docsui/assets/swagger-ui"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

(cd "$work" && npm pack "$package@$version" --silent --no-fund --no-audit --loglevel=error >/dev/null)
tarball="$work/$package-$version.tgz"
got="sha512-$(openssl dgst -sha512 -binary "$tarball" | base64 -w0)"
if [ "$got" != "$integrity" ]; then
	echo "integrity of $package@$version is $got, pinned $integrity" >&2
	exit 1
fi
tar -xzf "$tarball" -C "$work"

rm -rf "$out"
mkdir -p "$out"
for f in "${files[@]}"; do
	cp "$work/package/$f" "$out/$f"
done
license=$(cd "$work/package" && node -p 'require("./package.json").license')
{
	echo "$package $version ($license) from the npm registry, $integrity"
	(cd "$out" && sha256sum "${files[@]}")
} >"$out/VERSION"

echo "wrote $out"
cat "$out/VERSION"
