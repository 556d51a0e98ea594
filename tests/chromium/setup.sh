#!/usr/bin/env bash
# Give the report-page tests a headless browser, as root: Debian's chromium
# (tests/test_report_page.py renders the page with --dump-dom and --screenshot;
# as root it runs with --no-sandbox). Idempotent: an installed chromium is kept.
set -euo pipefail
command -v chromium >/dev/null 2>&1 && exit 0
echo "chromium-setup: installing chromium from Debian" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1 \
  || { apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends chromium >/dev/null; }
command -v chromium >/dev/null
