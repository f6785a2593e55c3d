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
addr=${POSTMILL_HTTP_ADDR:-127.0.0.1:8080}
base=${POSTMILL_BASE_URL:-http://$addr}
cat <<MSG
Postmill is starting (Ctrl-C stops it).
  API            $base/v1
  API docs       $base/docs
  OpenAPI        $base/v1/openapi.json
  health         $base/healthz  $base/readyz
  metrics        $base/metrics
  SMTP (MX)      ${POSTMILL_SMTP_ADDR:-127.0.0.1:2525}
  SMTP submit    ${POSTMILL_SUBMISSION_ADDR:-127.0.0.1:1587}
  database       ${POSTMILL_DATABASE_URL%%\?*}
MSG
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
