#!/usr/bin/env bash
# Private PostgreSQL cluster for Postmill on this machine.
#   pg.sh url [DBNAME]   start the cluster if needed, create DBNAME (default postmill), print its URL
#   pg.sh stop           stop the cluster
# The cluster lives in POSTMILL_PG_DIR (default ./.data/pg) and listens on 127.0.0.1:POSTMILL_PG_PORT
# (default 54329) with trust authentication for the local user "postgres". It uses the machine's initdb and
# pg_ctl; when they are missing and we may install (root with apt-get, and CI=true or POSTMILL_INSTALL=1),
# Debian's postgresql package is installed, otherwise the script says how to install it.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PGDIR=${POSTMILL_PG_DIR:-$ROOT/.data/pg}
PORT=${POSTMILL_PG_PORT:-54329}
FIXED_PORT=${POSTMILL_PG_PORT:-}

log() { echo "pg.sh: $*" >&2; }

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

# as_pg runs a command as the cluster's owner: PostgreSQL refuses to run as root.
as_pg() {
	if [ "$(id -u)" = 0 ]; then
		id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql --shell /bin/sh postgres
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

port_busy() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

start() {
	ensure_installed
	mkdir -p "$PGDIR"
	if [ "$(id -u)" = 0 ]; then
		chmod 755 "$(dirname "$PGDIR")"
		chown postgres "$PGDIR"
		chmod 700 "$PGDIR"
	fi
	if [ ! -f "$PGDIR/PG_VERSION" ]; then
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

case "${1:-url}" in
url)
	db=${2:-postmill}
	start
	ensure_db "$db"
	echo "postgres://postgres@127.0.0.1:$PORT/$db?sslmode=disable"
	;;
stop)
	ensure_installed
	as_pg "$PG_CTL" -D "$PGDIR" -m fast stop >/dev/null 2>&1 || true
	;;
*)
	echo "usage: pg.sh url [DBNAME] | stop" >&2
	exit 2
	;;
esac
