#!/usr/bin/env bash
# Private PostgreSQL cluster for Postmill on this machine.
#   pg.sh url [DBNAME]   start the cluster if needed, create DBNAME (default postmill), print its URL
#   pg.sh running        exit 0 when the cluster is running, 1 when it is not
#   pg.sh stop           stop the cluster
#   pg.sh dir            print the cluster's directory
#   pg.sh destroy        stop the cluster and delete its directory
# The cluster lives in POSTMILL_PG_DIR (default ./.data/pg) and listens on 127.0.0.1:POSTMILL_PG_PORT
# (default 54329) with trust authentication for the local user "postgres". It uses the machine's initdb and
# pg_ctl; when they are missing and we may install (root with apt-get, and CI=true or POSTMILL_INSTALL=1),
# Debian's postgresql package is installed, otherwise the script says how to install it.
#
# PostgreSQL refuses to run as root, so as root the cluster belongs to the "postgres" user, which must be
# able to reach its directory. A checkout in a directory that user cannot enter (root's home, of mode 0700,
# or a mktemp -d folder) keeps its default cluster in /var/lib/postmill/pg-<hash of the checkout's path>
# instead; `pg.sh dir` prints where.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PGDIR=${POSTMILL_PG_DIR:-$ROOT/.data/pg}
case "$PGDIR" in /*) ;; *) PGDIR=$PWD/$PGDIR ;; esac
PORT=${POSTMILL_PG_PORT:-54329}
FIXED_PORT=${POSTMILL_PG_PORT:-}
# FALLBACK_BASE holds the clusters of checkouts the postgres user cannot reach (root only).
FALLBACK_BASE=${POSTMILL_PG_FALLBACK_BASE:-/var/lib/postmill}

log() { echo "pg.sh: $*" >&2; }

# reachable_by_postgres reports whether the postgres user can enter the directory $1 names, or, when it
# does not exist yet, the nearest ancestor that does (the script creates the rest, with modes it chooses).
# Entering needs search permission on every directory of the path, which `test -x` as that user checks.
reachable_by_postgres() {
	local dir=$1
	while [ ! -d "$dir" ]; do dir=$(dirname "$dir"); done
	runuser -u postgres -- test -x "$dir" 2>/dev/null
}

# choose_dir sets PGDIR for a root caller: the default ./.data/pg when the postgres user can reach the
# checkout, otherwise a directory of its own under FALLBACK_BASE, named after a hash of the checkout's path
# so that each checkout keeps its own cluster across runs. A cluster already initialised in ./.data/pg is
# kept where it is. POSTMILL_PG_DIR is taken as given.
choose_dir() {
	[ "$(id -u)" = 0 ] || return 0
	[ -z "${POSTMILL_PG_DIR:-}" ] || return 0
	[ ! -f "$PGDIR/PG_VERSION" ] || return 0
	ensure_postgres_user
	reachable_by_postgres "$(dirname "$PGDIR")" && return 0
	local hash
	hash=$(printf '%s' "$ROOT" | sha256sum | cut -c1-16)
	PGDIR=$FALLBACK_BASE/pg-$hash
}

ensure_postgres_user() {
	id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql --shell /bin/sh postgres
}

find_bin() {
	if command -v "$1" >/dev/null 2>&1; then command -v "$1"; return 0; fi
	local found
	found=$(ls -d /usr/lib/postgresql/*/bin/"$1" 2>/dev/null | sort -V | tail -n 1 || true)
	[ -n "$found" ] && echo "$found"
}

ensure_installed() {
	INITDB=$(find_bin initdb || true)
	PG_CTL=$(find_bin pg_ctl || true)
	PSQL=$(find_bin psql || true)
	if [ -n "$INITDB" ] && [ -n "$PG_CTL" ] && [ -n "$PSQL" ]; then return 0; fi
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && { [ "${CI:-}" = true ] || [ "${POSTMILL_INSTALL:-}" = 1 ]; }; then
		log "installing PostgreSQL from Debian's packages"
		apt-get update -qq >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
		INITDB=$(find_bin initdb); PG_CTL=$(find_bin pg_ctl); PSQL=$(find_bin psql)
		return 0
	fi
	cat >&2 <<'MSG'
PostgreSQL's server programs (initdb, pg_ctl) were not found.
Either install them:
    sudo apt-get install postgresql        # Debian, Ubuntu
    brew install postgresql@16             # macOS
(or run with POSTMILL_INSTALL=1 as root to let this script install them), or point Postmill at an existing
database with POSTMILL_DATABASE_URL (and POSTMILL_TEST_DATABASE_URL for the tests).
MSG
	exit 1
}

# as_pg runs a command as the cluster's owner: PostgreSQL refuses to run as root. It starts in /, since
# the caller's directory may be one the postgres user cannot enter.
as_pg() {
	if [ "$(id -u)" = 0 ]; then
		ensure_postgres_user
		(cd / && runuser -u postgres -- "$@")
	else
		"$@"
	fi
}

port_busy() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

start() {
	ensure_installed
	if [ "$(id -u)" = 0 ] && ! reachable_by_postgres "$(dirname "$PGDIR")"; then
		log "the postgres user cannot enter $(dirname "$PGDIR") (PostgreSQL runs as that user, never as root);"
		log "unset POSTMILL_PG_DIR to use a directory it can reach, or choose one outside private folders"
		exit 1
	fi
	mkdir -p "$PGDIR"
	if [ "$(id -u)" = 0 ]; then
		chmod 755 "$(dirname "$PGDIR")"
		chown postgres "$PGDIR"
		chmod 700 "$PGDIR"
	fi
	if [ ! -f "$PGDIR/PG_VERSION" ]; then
		case "$PGDIR" in
		"$FALLBACK_BASE"/*) log "the postgres user cannot enter $ROOT, so its cluster lives in $PGDIR" ;;
		esac
		log "initialising a private cluster in $PGDIR"
		as_pg "$INITDB" -D "$PGDIR" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null 2>&1 ||
			as_pg "$INITDB" -D "$PGDIR" -U postgres --auth=trust -E UTF8 >/dev/null
	fi
	if as_pg "$PG_CTL" -D "$PGDIR" status >/dev/null 2>&1; then
		# Running already: its port is the fourth line of postmaster.pid.
		PORT=$(sed -n 4p "$PGDIR/postmaster.pid")
	else
		# Another cluster (say, another checkout's) may hold the port: take the next free one unless the
		# port was fixed by POSTMILL_PG_PORT.
		while port_busy "$PORT"; do
			if [ -n "$FIXED_PORT" ]; then
				log "127.0.0.1:$PORT is in use by something else (POSTMILL_PG_PORT)"
				exit 1
			fi
			PORT=$((PORT + 1))
		done
		log "starting PostgreSQL on 127.0.0.1:$PORT"
		as_pg "$PG_CTL" -D "$PGDIR" -l "$PGDIR/server.log" -w -t 60 \
			-o "-p $PORT -k $PGDIR -c listen_addresses=127.0.0.1 -c max_connections=400 -c shared_buffers=256MB" \
			start >/dev/null
	fi
}

ensure_db() {
	local db=$1
	local exists
	exists=$("$PSQL" -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'")
	if [ "$exists" != 1 ]; then
		"$PSQL" -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -qc "CREATE DATABASE \"$db\"" >/dev/null
	fi
}

choose_dir
case "${1:-url}" in
url)
	db=${2:-postmill}
	start
	ensure_db "$db"
	echo "postgres://postgres@127.0.0.1:$PORT/$db?sslmode=disable"
	;;
running)
	[ -f "$PGDIR/PG_VERSION" ] || exit 1
	ensure_installed
	as_pg "$PG_CTL" -D "$PGDIR" status >/dev/null 2>&1
	;;
stop)
	[ -f "$PGDIR/PG_VERSION" ] || exit 0
	ensure_installed
	as_pg "$PG_CTL" -D "$PGDIR" -m fast stop >/dev/null 2>&1 || true
	;;
dir)
	echo "$PGDIR"
	;;
destroy)
	if [ -f "$PGDIR/PG_VERSION" ]; then
		ensure_installed
		as_pg "$PG_CTL" -D "$PGDIR" -m fast stop >/dev/null 2>&1 || true
	fi
	rm -rf "$PGDIR"
	;;
*)
	echo "usage: pg.sh url [DBNAME] | running | stop | dir | destroy" >&2
	exit 2
	;;
esac
