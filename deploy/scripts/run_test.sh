#!/usr/bin/env bash
# run_test.sh: `make run` as a new user runs it. A copy of the scripts and a freshly built bin/postmill, in a
# folder of mode 0700 (as mktemp -d makes them; as root, the postgres user cannot enter it, as with a
# checkout in root's home), is started through run.sh on free ports, with a private PostgreSQL cluster of
# its own on a free port. The test waits for /readyz, checks that the startup output announces local mode,
# signs up through the API and fetches /docs, then presses Ctrl-C (SIGINT to run.sh's process group) and
# checks that run.sh stopped the cluster it started (pg.sh running says so, with the same directory choice)
# and that nothing listens on the ports any more.
#
# It runs as root and as a normal user: as root the cluster belongs to the postgres user and lives under a
# fallback directory of this test's own (POSTMILL_PG_FALLBACK_BASE), as a normal user in the copy's
# .data/pg. It never touches the developer's cluster, database or ports: every POSTMILL_* variable of the
# caller is dropped. Without PostgreSQL's programs or curl it has nothing to check and says so. test.sh
# runs it; it takes about 15-30 s (one build from the Go cache, one initdb, the migrations).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

fail() {
	echo "run_test.sh: FAIL: $*" >&2
	if [ -n "${log:-}" ] && [ -f "$log" ]; then
		echo "--- output of make run (last 40 lines) ---" >&2
		tail -n 40 "$log" >&2
	fi
	exit 1
}

skip() {
	echo "run_test.sh: $*; nothing to check" >&2
	exit 0
}

initdb=$(command -v initdb || ls -d /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1 || true)
[ -n "$initdb" ] || skip "PostgreSQL's programs are not installed"
command -v curl >/dev/null || skip "curl is not installed"

# Nothing of the caller's configuration (POSTMILL_DATABASE_URL, addresses, POSTMILL_PG_DIR, ...) applies.
while read -r v; do unset "$v"; done < <(compgen -e | grep '^POSTMILL_' || true)

work=$(mktemp -d)
chmod 700 "$work"
repo=$work/checkout
pg=$repo/deploy/scripts/pg.sh
log=$work/run.log
base=
if [ "$(id -u)" = 0 ]; then
	base=$(mktemp -d /tmp/postmill-run-test.XXXXXX)
	chmod 755 "$base"
	export POSTMILL_PG_FALLBACK_BASE=$base
fi
runpid=
cleanup() {
	if [ -n "$runpid" ] && kill -0 "$runpid" 2>/dev/null; then
		kill -TERM -- "-$runpid" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$runpid" 2>/dev/null || break; sleep 0.2; done
		kill -KILL -- "-$runpid" 2>/dev/null || true
	fi
	[ ! -x "$pg" ] || "$pg" destroy >/dev/null 2>&1 || true
	rm -rf "$work" ${base:+"$base"}
}
trap cleanup EXIT

mkdir -p "$repo/deploy/scripts" "$repo/bin"
cp "$HERE/run.sh" "$HERE/pg.sh" "$repo/deploy/scripts/"
(cd "$ROOT" && go build -o "$repo/bin/postmill" ./deploy/cmd/postmill) || fail "go build"
if [ "$(id -u)" = 0 ] && id postgres >/dev/null 2>&1 && runuser -u postgres -- test -x "$work" 2>/dev/null; then
	fail "the postgres user can enter $work; the test needs a folder it cannot enter"
fi

# pick_port sets the variable $1 to a port nobody listens on (TCP) and that no other variable got. A port
# can still be taken before Postmill binds it: the start is then tried again with new ports.
taken=" "
pick_port() {
	local candidate
	while :; do
		candidate=$((20000 + RANDOM % 12000)) # below the ephemeral ports the kernel picks
		case "$taken" in *" $candidate "*) continue ;; esac
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$candidate") 2>/dev/null; then
			taken="$taken$candidate "
			printf -v "$1" '%s' "$candidate"
			return
		fi
	done
}

port_vars=(POSTMILL_HTTP_ADDR POSTMILL_METRICS_ADDR POSTMILL_RPC_ADDR POSTMILL_SMTP_ADDR POSTMILL_SUBMISSION_ADDR
	POSTMILL_LOCAL_DNS_ADDR POSTMILL_CATCHER_ADDR)
started=
for attempt in 1 2 3; do
	taken=" "
	for v in "${port_vars[@]}"; do
		pick_port port
		export "$v=127.0.0.1:$port"
	done
	pick_port POSTMILL_PG_PORT
	export POSTMILL_PG_PORT
	api=http://$POSTMILL_HTTP_ADDR

	# Job control puts run.sh in a process group of its own, as a terminal would, and keeps SIGINT
	# deliverable to it (a script's background job otherwise ignores it).
	set -m
	"$repo/deploy/scripts/run.sh" >"$log" 2>&1 &
	runpid=$!
	set +m
	for _ in $(seq 240); do
		if ! kill -0 "$runpid" 2>/dev/null; then break; fi
		if [ "$(curl -s -o /dev/null -w '%{http_code}' "$api/readyz" || true)" = 200 ]; then
			started=1
			break
		fi
		sleep 0.25
	done
	[ -z "$started" ] || break
	if ! kill -0 "$runpid" 2>/dev/null && grep -q 'address already in use' "$log" && [ "$attempt" -lt 3 ]; then
		echo "run_test.sh: a port was taken before Postmill bound it; trying again with other ports" >&2
		wait "$runpid" || true
		runpid=
		"$pg" destroy >/dev/null 2>&1 || true
		continue
	fi
	fail "/readyz did not answer 200 within 60 s"
done

dir=$("$pg" dir)
if [ "$(id -u)" = 0 ]; then
	case "$dir" in "$base"/pg-*) ;; *) fail "as root the cluster is in $dir, want it under $base" ;; esac
else
	[ "$dir" = "$repo/.data/pg" ] || fail "the cluster is in $dir, want $repo/.data/pg"
fi
"$pg" running || fail "pg.sh running says the cluster make run started is down"
grep -q "127.0.0.1:$POSTMILL_PG_PORT/postmill" "$log" || fail "make run did not use the cluster on port $POSTMILL_PG_PORT"

grep -q 'LOCAL MODE (POSTMILL_LOCAL=true' "$log" || fail "run.sh's banner does not announce local mode"
grep -q 'LOCAL MODE: DNS and recipients' "$log" || fail "Postmill's startup log does not announce local mode"
grep -q "API            $api/v1" "$log" || fail "the banner does not name the API at $api/v1"

code=$(curl -s -o "$work/signup.json" -w '%{http_code}' "$api/v1/auth/signup" -H 'content-type: application/json' \
	-d '{"email":"ada@example.com","password":"correct horse battery"}' || true)
[ "$code" = 201 ] || fail "POST /v1/auth/signup answered $code: $(head -c 500 "$work/signup.json" 2>/dev/null)"
grep -q '"accessToken"' "$work/signup.json" || fail "the signup answer has no accessToken"
code=$(curl -s -o /dev/null -w '%{http_code}' "$api/docs" || true)
[ "$code" = 200 ] || fail "GET /docs answered $code"

# The ports Postmill listens on: the ones chosen here, and ports the kernel picked (the simulator's). A fixed
# port would clash with another make run on the machine.
ports=("$POSTMILL_PG_PORT")
for v in "${port_vars[@]}"; do ports+=("${!v##*:}"); done
if command -v ss >/dev/null; then
	pid=$(pgrep -P "$runpid" -x postmill || true)
	[ -n "$pid" ] || fail "no postmill process under run.sh"
	read -r ephemeral _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || ephemeral=32768
	while read -r p; do
		case " ${ports[*]} " in *" $p "*) continue ;; esac
		[ "$p" -ge "$ephemeral" ] || fail "Postmill listens on port $p, which no variable chose"
		ports+=("$p")
	done < <(ss -Hltunp | grep "pid=$pid," | awk '{print $5}' | sed 's/.*://' | sort -u)
fi

# Ctrl-C: SIGINT to the whole process group, as a terminal sends it.
kill -INT -- "-$runpid"
status=
for _ in $(seq 150); do
	if ! kill -0 "$runpid" 2>/dev/null; then
		wait "$runpid" && status=0 || status=$?
		break
	fi
	sleep 0.2
done
[ -n "$status" ] || fail "make run still runs 30 s after Ctrl-C"
runpid=
[ "$status" = 0 ] || fail "make run exited with status $status after Ctrl-C"
! "$pg" running || fail "the PostgreSQL cluster make run started still runs after it stopped"
for p in "${ports[@]}"; do
	if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
		fail "something still listens on 127.0.0.1:$p after make run stopped"
	fi
	if command -v ss >/dev/null && ss -Hlun | awk '{print $4}' | grep -q ":$p\$"; then
		fail "something still listens on UDP port $p after make run stopped"
	fi
done
echo "run_test.sh: ok (${SECONDS}s)" >&2
