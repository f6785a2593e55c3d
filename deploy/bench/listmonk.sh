#!/usr/bin/env bash
# Fetches and builds listmonk, the self-hosted newsletter manager `postmill-bench listmonk` measures beside
# Postmill, and prints the directory to pass as -dir. The source comes from the Go module proxy, checked
# against the Go checksum database; the newest version the proxy serves under the module path
# github.com/knadh/listmonk is v1.1.0 (June 2021): later releases keep that module path with a major version
# above 1 and are not served as Go modules. Only the server is built: the admin UI (a Vue application) is
# not needed by the API the benchmark drives, so an empty placeholder stands in for its files.
#   LISTMONK_VERSION  the version to fetch (default v1.1.0)
#   LISTMONK_DIR      where to build it (default /var/tmp/postmill-listmonk-<version>)
set -euo pipefail
VERSION=${LISTMONK_VERSION:-v1.1.0}
DIR=${LISTMONK_DIR:-/var/tmp/postmill-listmonk-$VERSION}
if [ -x "$DIR/listmonk" ]; then
	echo "$DIR"
	exit 0
fi
SRC=$(cd "$(mktemp -d)" && GOFLAGS= go mod download -json "github.com/knadh/listmonk@$VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ -z "$SRC" ] || [ ! -d "$SRC" ]; then
	echo "listmonk.sh: could not download github.com/knadh/listmonk@$VERSION from the Go module proxy" >&2
	exit 1
fi
rm -rf "$DIR.tmp"
cp -r "$SRC" "$DIR.tmp"
chmod -R u+w "$DIR.tmp"
mkdir -p "$DIR.tmp/frontend/dist/frontend"
: > "$DIR.tmp/frontend/dist/favicon.png"
(cd "$DIR.tmp" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -o listmonk \
	-ldflags "-X 'main.versionString=$VERSION' -X 'main.buildString=$VERSION (module proxy)'" ./cmd) >&2
rm -rf "$DIR"
mv "$DIR.tmp" "$DIR"
echo "$DIR"
