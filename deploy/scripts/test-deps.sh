#!/usr/bin/env bash
# test-deps.sh: the Debian packages the tests and benchmarks use besides PostgreSQL, installed when missing.
#   clamav-daemon  /usr/sbin/clamd, the real ClamAV the clamd adapter's tests start (no signature download:
#                  the tests bring a one-line database)
#   postfix        smtp-sink and smtp-source (the SMTP server and load generator of the MTA benchmark), and
#                  a private relaying instance that sends real DSNs back to Postmill in the e2e tests
#   python3-dkim   dkimverify, an independent DKIM verifier for the signatures the MTA makes
#   swaks          an SMTP client nobody on the team wrote, submitting to Postmill's submission port in the e2e
#                  tests
#   libsasl2-modules  the PLAIN and LOGIN mechanisms of Postfix's SMTP client, for the e2e test that relays
#                  through a private Postfix authenticating to Postmill's submission port
#   clickhouse-server  /usr/sbin/clickhouse-server (Debian's 18.16), the ClickHouse the analytics adapter's
#                  contract test and the e2e test with POSTMILL_ANALYTICS=clickhouse start privately
#   chromium       headless browser of the edge's TestDocsRenderOffline, which loads /docs with the network cut
#                  to loopback
#   spamd          SpamAssassin's daemon, the real spam checker behind the spamd adapter's e2e test
#   ldnsutils      ldns-keygen and ldns-signzone, which sign the DNSSEC test zone of the DANE tests
#   nsd            the authoritative server serving that signed zone on loopback
#   unbound        the validating resolver the DANE tests resolve through (the AD bit and SERVFAIL for bogus
#                  signatures come from its validation)
# As root on a machine with apt-get it installs what is missing (idempotent: nothing is done when all are
# present); otherwise it prints what is missing and how to install it, and exits 1 if anything is.
# Nothing is started or enabled: the tests run each engine as a private process of their own.
set -euo pipefail

# package|a file it provides (checked instead of asking dpkg, so a copy installed another way counts); the file
# may be a glob pattern when its directory depends on the architecture
deps=(
	"clamav-daemon|/usr/sbin/clamd"
	"postfix|/usr/sbin/smtp-sink"
	"python3-dkim|/usr/bin/dkimverify"
	"swaks|/usr/bin/swaks"
	"libsasl2-modules|/usr/lib/*/sasl2/libplain.so"
	"chromium|/usr/bin/chromium"
	"clickhouse-server|/usr/sbin/clickhouse-server"
	"spamd|/usr/sbin/spamd"
	"ldnsutils|/usr/bin/ldns-signzone"
	"nsd|/usr/sbin/nsd"
	"unbound|/usr/sbin/unbound"
)

# present reports whether a file matching the pattern exists.
present() {
	compgen -G "$1" >/dev/null
}

missing=()
for dep in "${deps[@]}"; do
	pkg=${dep%%|*}
	file=${dep#*|}
	if present "$file"; then
		echo "ok       $pkg ($file)"
	else
		echo "missing  $pkg ($file)"
		missing+=("$pkg")
	fi
done

if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo >&2
	echo "not installing (needs root and apt-get); on Debian or Ubuntu run as root:" >&2
	echo "  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}" >&2
	echo "tests that need a missing engine skip with the reason, or fail when CI=true" >&2
	exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update
# postfix asks which mail setup to use; "No configuration" leaves it unconfigured, which smtp-sink and
# smtp-source do not need.
if [[ " ${missing[*]} " == *" postfix "* ]] && command -v debconf-set-selections >/dev/null 2>&1; then
	echo "postfix postfix/main_mailer_type select No configuration" | debconf-set-selections
fi
apt-get install -y --no-install-recommends "${missing[@]}"

status=0
for dep in "${deps[@]}"; do
	file=${dep#*|}
	if ! present "$file"; then
		echo "still missing after install: ${dep%%|*} ($file)" >&2
		status=1
	fi
done
exit $status
