#!/usr/bin/env bash
# Install, as root, every Debian package the test suite runs that this machine
# lacks, in one apt-get: a machine that starts without them (CI's does) pays for
# one package-list update and one dpkg run instead of one of each per setup
# script. The setup scripts (tests/docker/setup.sh, tests/chromium/setup.sh,
# tests/sigstore/setup.sh) still install what they need when run on their own.
# Not root, or no apt-get: does nothing (the tests that need a tool then skip,
# or fail in CI).
set -euo pipefail
[ "$(id -u)" = 0 ] && command -v apt-get >/dev/null || exit 0
# command the suite runs -> the Debian package that has it
wanted=(
  dockerd:docker.io               # the Docker Engine (tests/docker/setup.sh)
  mmdebstrap:mmdebstrap           # the local base image (tests/docker/setup.sh)
  docker-registry:docker-registry # the local registry (tests/docker/setup.sh)
  skopeo:skopeo                   # a second reader of the registry's manifests
  shellcheck:shellcheck           # lints the rendered bootstrap.sh
  chromium:chromium               # the report page (tests/chromium/setup.sh)
  node:nodejs                     # @sigstore/verify (tests/sigstore/setup.sh)
  npm:npm
)
missing=()
for pair in "${wanted[@]}"; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
done
[ "${#missing[@]}" = 0 ] && exit 0
echo "debian-packages: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
