#!/usr/bin/env bash
# make run: start the whole platform on this machine. Uses POSTMILL_DATABASE_URL when set; otherwise a
# private PostgreSQL cluster under ./.data/pg.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
if [ -z "${POSTMILL_DATABASE_URL:-}" ]; then
	POSTMILL_DATABASE_URL=$(deploy/scripts/pg.sh url postmill)
	export POSTMILL_DATABASE_URL
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
exec ./bin/postmill serve "$@"
