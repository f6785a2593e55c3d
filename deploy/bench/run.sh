#!/usr/bin/env bash
# Runs Postmill's benchmarks on this machine and prints the figures docs/benchmarks.md records, then a summary
# of the delivery figures side by side, each with its ratio to the RSA-2048 signing ceiling measured in the
# same benchmark (the ceiling is measured again by each one, because this machine's load changes):
#   ceilings: RSA-2048 signatures/s; smtp-source → smtp-sink messages/s (Postfix's tools, when installed)
#   send:     accepted sends/s through POST /v1/emails with p50/p99 latency (edge and core, no MTA)
#   drain:    messages/s DKIM-signed and delivered of a queue filled beforehand (all-in-one, then split)
#   e2e:      the platform with its default settings: N sends through the API while the MTA delivers them,
#             timed from the first send to the last arrival (all-in-one, split, Kafka queue)
#   webhooks: deliveries/s and first-attempt delay
#   broadcast: a broadcast to 100,000 topic subscribers over 20 domains, from POST …/send to the last arrival,
#             with transactional POST /v1/emails latency while it runs and the process's peak RSS
#   import:   a 10,000-row CSV through POST /v1/contacts/import, and 100,000 contacts by ten such imports
#   listmonk: the same imports and a campaign to the same 100,000 addresses by listmonk (fetched and built by
#             deploy/bench/listmonk.sh from the Go module proxy; skipped when that fails), into the same sink
# Every delivery benchmark delivers to the benchmark's in-process SMTP sink (sink.go), found through an MX
# record of its own DNS server. Needs PostgreSQL (a private cluster is started when
# POSTMILL_BENCH_DATABASE_URL is unset). Extra arguments go to the send benchmark.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
export PATH=$PATH:/usr/sbin

if ! command -v smtp-sink >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postfix >/dev/null || true
fi
DB=${POSTMILL_BENCH_DATABASE_URL:-$(deploy/scripts/pg.sh url postmill_bench)}
N=${POSTMILL_BENCH_SENDS:-20000}

go build -o bin/postmill ./deploy/cmd/postmill
go build -o bin/postmill-bench ./deploy/bench/postmill-bench

LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT
run() { "$@" 2>&1 | tee -a "$LOG"; }

echo "date: $(date -u +%Y-%m-%dT%H:%MZ); $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
run ./bin/postmill-bench rsa
if command -v smtp-sink >/dev/null 2>&1 && command -v smtp-source >/dev/null 2>&1; then
	SINK_PORT=${POSTMILL_BENCH_SINK_PORT:-2626}
	smtp-sink -u nobody -c 127.0.0.1:$SINK_PORT 1000 >/dev/null 2>&1 &
	SINK=$!
	sleep 0.5
	t0=$(date +%s.%N)
	smtp-source -s 20 -m 20000 -l 2000 127.0.0.1:$SINK_PORT
	t1=$(date +%s.%N)
	kill $SINK 2>/dev/null || true
	echo "smtp-source: 20000 messages of 2 KB over 20 sessions into smtp-sink = $(echo "20000 / ($t1 - $t0)" | bc) msg/s"
fi
run ./bin/postmill-bench send -db "$DB" "$@"
run ./bin/postmill-bench mta -db "$DB" -messages "$N"
run ./bin/postmill-bench mta -db "$DB" -messages "$N" -shape split
run ./bin/postmill-bench e2e -db "$DB" -sends "$N"
run ./bin/postmill-bench e2e -db "$DB" -sends "$N" -shape split
run ./bin/postmill-bench e2e -db "$DB" -sends "$N" -queue kafka
run ./bin/postmill-bench webhooks -db "$DB" -sends 5000
run ./bin/postmill-bench webhooks -db "$DB" -sends 3000 -rate 300
run ./bin/postmill-bench broadcast -db "$DB" -contacts "${POSTMILL_BENCH_CONTACTS:-100000}"
run ./bin/postmill-bench import -db "$DB"
if LISTMONK=$(deploy/bench/listmonk.sh); then
	run ./bin/postmill-bench listmonk -db "$DB" -dir "$LISTMONK" -contacts "${POSTMILL_BENCH_CONTACTS:-100000}"
else
	echo "listmonk: not measured (deploy/bench/listmonk.sh could not fetch or build it)"
fi

echo
echo "delivery figures of this run, each against the RSA ceiling measured in its own benchmark:"
grep '^summary:' "$LOG" | sed 's/^summary: /  /'
