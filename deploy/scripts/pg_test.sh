#!/usr/bin/env bash
# pg_test.sh: as root, pg.sh works from a checkout the postgres user cannot enter (a folder of mode 0700, as
# root's home and mktemp -d folders are): the cluster is kept where that user can reach it, accepts
# connections, reports running, and stops and is destroyed on request. test.sh runs it; as a normal user,
# or without PostgreSQL's programs, it has nothing to check and says so. It takes a few seconds (one initdb).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

fail() {
	echo "pg_test.sh: FAIL: $*" >&2
	exit 1
}

if [ "$(id -u)" != 0 ]; then
	echo "pg_test.sh: not root; nothing to check" >&2
	exit 0
fi
psql=$(command -v psql || ls -d /usr/lib/postgresql/*/bin/psql 2>/dev/null | sort -V | tail -n 1 || true)
initdb=$(command -v initdb || ls -d /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$psql" ] || [ -z "$initdb" ]; then
	echo "pg_test.sh: PostgreSQL's programs are not installed; nothing to check" >&2
	exit 0
fi

work=$(mktemp -d)
chmod 700 "$work"
base=$(mktemp -d /tmp/postmill-pg-test.XXXXXX)
chmod 755 "$base"
repo=$work/checkout
pg=$repo/deploy/scripts/pg.sh
export POSTMILL_PG_FALLBACK_BASE=$base
unset POSTMILL_PG_DIR POSTMILL_PG_PORT
cleanup() {
	"$pg" destroy >/dev/null 2>&1 || true
	rm -rf "$work" "$base"
}
trap cleanup EXIT
mkdir -p "$repo/deploy/scripts"
cp "$HERE/pg.sh" "$pg"

url=$("$pg" url pgtest 2>/dev/null) || fail "pg.sh url failed in a 0700 checkout"
dir=$("$pg" dir)
case "$dir" in
"$base"/pg-*) ;;
*) fail "the cluster is in $dir, want it under $base" ;;
esac
[ "$("$psql" "$url" -tAc 'SELECT 1')" = 1 ] || fail "no answer from $url"
"$pg" running || fail "pg.sh running says the cluster is down"
[ "$("$pg" url pgtest 2>/dev/null)" = "$url" ] || fail "a second pg.sh url gave another URL"
"$pg" stop
! "$pg" running || fail "the cluster still runs after pg.sh stop"
"$pg" destroy
[ ! -e "$dir" ] || fail "pg.sh destroy left $dir"
echo "pg_test.sh: ok" >&2
