#!/usr/bin/env bash
# Install @sigstore/verify (npm: the Sigstore JavaScript client's verifier) for
# tests/test_report_referrers_docker.py, which checks envlock's bundles with a
# client that is not envlock. Idempotent: a folder that already holds the pinned
# version is reused. Needs node and npm (Node 18+); without them it says so and
# exits 0 (the tests that need it then skip, or fail in CI).
# ENVLOCK_SIGSTORE_JS names the folder (default: /var/cache/envlock-sigstore-js as
# root, else ~/.cache/envlock-sigstore-js; the tests look in the same places).
set -euo pipefail
if [ "$(id -u)" = 0 ]; then
  default=/var/cache/envlock-sigstore-js
else
  default="${HOME}/.cache/envlock-sigstore-js"
fi
dir="${ENVLOCK_SIGSTORE_JS:-$default}"
# the newest release whose "engines" admit this node: 4.x needs node 22.22+/24.15+,
# 3.x node 20.17+ (both tried here), 2.x node 18.17+ (Debian bookworm's; not tried)
pick_version() {
  node -e '
    const [a, b] = process.versions.node.split(".").map(Number);
    const at = (x, y) => a > x || (a === x && b >= y);
    console.log(at(24, 15) || (a === 22 && at(22, 22)) ? "4.1.3" : at(20, 17) ? "3.1.1" : "2.1.1");
  '
}
say() { echo "sigstore-setup: $*" >&2; }
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing nodejs and npm from Debian"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  else
    say "no node/npm here: the @sigstore/verify check will be skipped"
    exit 0
  fi
fi
version=$(pick_version)
have=$(node -e 'try{console.log(require(process.argv[1]+"/node_modules/@sigstore/verify/package.json").version)}catch(e){}' "$dir" 2>/dev/null || true)
if [ "$have" = "$version" ]; then
  exit 0
fi
mkdir -p "$dir"
say "installing @sigstore/verify@$version into $dir"
npm install --prefix "$dir" --no-audit --no-fund --silent "@sigstore/verify@$version" >/dev/null
