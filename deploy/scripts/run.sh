#!/usr/bin/env bash
# make run: start the whole platform on this machine. Uses POSTMILL_DATABASE_URL when set; otherwise the
# private PostgreSQL cluster of pg.sh, which it stops again on exit when this run started it.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
stop_pg=
if [ -z "${POSTMILL_DATABASE_URL:-}" ]; then
	deploy/scripts/pg.sh running || stop_pg=1
	POSTMILL_DATABASE_URL=$(deploy/scripts/pg.sh url postmill)
	export POSTMILL_DATABASE_URL
	if [ -n "$stop_pg" ]; then
		# The private PostgreSQL this run started stops when Postmill does, Ctrl-C included.
		trap 'deploy/scripts/pg.sh stop' EXIT
	else
		echo "The private PostgreSQL was already running and stays up; deploy/scripts/pg.sh stop stops it."
	fi
fi
# Local mode is make run's default (docs/local.md); POSTMILL_LOCAL=false gives the production shape that
# `postmill serve` has on its own.
export POSTMILL_LOCAL=${POSTMILL_LOCAL:-true}
addr=${POSTMILL_HTTP_ADDR:-127.0.0.1:8080}
base=${POSTMILL_BASE_URL:-http://$addr}
cat <<MSG
Postmill is starting (Ctrl-C stops it).
  API            $base/v1
  API docs       $base/docs
  OpenAPI        $base/v1/openapi.json
  health         $base/healthz  $base/readyz
  metrics        http://${POSTMILL_METRICS_ADDR:-127.0.0.1:9090}/metrics  (operations listener, not public)
  SMTP (MX)      ${POSTMILL_SMTP_ADDR:-127.0.0.1:2525}
  SMTP submit    ${POSTMILL_SUBMISSION_ADDR:-127.0.0.1:1587}
  database       ${POSTMILL_DATABASE_URL%%\?*}
MSG
case "$(echo "$POSTMILL_LOCAL" | tr '[:upper:]' '[:lower:]')" in
1 | t | true)
	cat <<MSG

LOCAL MODE (POSTMILL_LOCAL=true; POSTMILL_LOCAL=false runs the production shape). Simulated in the process:
  DNS            ${POSTMILL_LOCAL_DNS_ADDR:-127.0.0.1:1053} publishes the records of every domain created here,
                 so POST /v1/domains/{id}/verify passes${POSTMILL_DNS_RESOLVER:+ (but POSTMILL_DNS_RESOLVER=$POSTMILL_DNS_RESOLVER is used for lookups)}
  mailboxes      every message is delivered to the built-in catcher at ${POSTMILL_CATCHER_ADDR:-127.0.0.1:1025}${POSTMILL_MTA_RELAY:+ (but POSTMILL_MTA_RELAY=$POSTMILL_MTA_RELAY takes the mail instead)}
                 no email leaves this machine; the newest ${POSTMILL_CATCHER_MAX:-1000} are kept
  caught mail    $base/local/mail   (JSON: $base/local/api/messages)
Shortened for local mode (production: 1m and 72h; a value you set wins):
  retries        POSTMILL_MTA_RETRY_BASE=${POSTMILL_MTA_RETRY_BASE:-5s} POSTMILL_MTA_MAX_AGE=${POSTMILL_MTA_MAX_AGE:-1m}
                 so delay@simulator.postmill.test fails (email.failed) in minutes, not days
MSG
	;;
esac
# Postmill runs as a child rather than in this shell's place, so that the EXIT trap can stop PostgreSQL
# after it; an interrupt or a termination is passed on as SIGTERM, Postmill's graceful shutdown.
./bin/postmill serve "$@" &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null || true' INT TERM
status=0
while kill -0 "$pid" 2>/dev/null; do
	wait "$pid" && status=0 || status=$?
done
exit "$status"
