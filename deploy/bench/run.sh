#!/usr/bin/env bash
# Runs Postmill's benchmarks on this machine and prints the figures docs/benchmarks.md records:
#   ceilings: RSA-2048 signatures/s, smtp-source → smtp-sink messages/s (Postfix's tools)
#   send:     accepted sends/s through POST /v1/emails with p50/p99 latency
#   mta:      messages/s DKIM-signed and delivered into smtp-sink
# Needs PostgreSQL (a private cluster is started when POSTMILL_BENCH_DATABASE_URL is unset) and Postfix's
# smtp-sink/smtp-source (installed from Debian's postfix package when missing and running as root).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
export PATH=$PATH:/usr/sbin

if ! command -v smtp-sink >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postfix >/dev/null
	else
		echo "smtp-sink not found: install Postfix (apt-get install postfix)" >&2
		exit 1
	fi
fi
DB=${POSTMILL_BENCH_DATABASE_URL:-$(deploy/scripts/pg.sh url postmill_bench)}

go build -o bin/postmill ./deploy/cmd/postmill
go build -o bin/postmill-bench ./deploy/bench/postmill-bench

SINK_PORT=${POSTMILL_BENCH_SINK_PORT:-2626}
smtp-sink -u nobody -c 127.0.0.1:$SINK_PORT 1000 >/dev/null 2>&1 &
SINK=$!
trap 'kill $SINK 2>/dev/null || true' EXIT
sleep 0.5

echo "date: $(date -u +%Y-%m-%dT%H:%MZ); $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
./bin/postmill-bench rsa
N=20000
t0=$(date +%s.%N)
smtp-source -s 20 -m $N -l 2000 127.0.0.1:$SINK_PORT
t1=$(date +%s.%N)
echo "smtp-source: $N messages of 2 KB over 20 sessions into smtp-sink = $(echo "$N / ($t1 - $t0)" | bc) msg/s"
./bin/postmill-bench send -db "$DB" "$@"
./bin/postmill-bench mta -db "$DB" -sink 127.0.0.1:$SINK_PORT -messages 15000
./bin/postmill-bench mta -db "$DB" -sink 127.0.0.1:$SINK_PORT -messages 6000 -shape split
./bin/postmill-bench webhooks -db "$DB" -sends 5000
./bin/postmill-bench webhooks -db "$DB" -sends 3000 -rate 300
