#!/usr/bin/env bash
# Installs promtool and prometheus (Debian package prometheus) when they are missing: `make
# test` runs `promtool test rules` on manifests/monitoring (tests/unit/test_monitoring.py) and a
# Prometheus on loopback that scrapes the e2e cluster (e2e/test_dashboard.py). Needs root and
# the package mirror; the Prometheus service the package ships is never started here.
set -euo pipefail

command -v promtool >/dev/null && command -v prometheus >/dev/null && exit 0
die() { echo "install-promtool: error: $*" >&2; exit 1; }
command -v apt-get >/dev/null || die "promtool or prometheus is missing and there is no apt-get: install Prometheus by hand"
[[ $(id -u) == 0 ]] || die "promtool or prometheus is missing: run 'sudo apt-get install prometheus' (installing needs root)"
echo "install-promtool: installing the Debian package prometheus (promtool, prometheus)"
# policy-rc.d 101: do not start the service the package enables
policy=/usr/sbin/policy-rc.d
[[ -e $policy ]] || { printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod +x "$policy"; trap 'rm -f "$policy"' EXIT; }
{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; } \
  || die "'apt-get install prometheus' failed (is the Debian mirror reachable?)"
