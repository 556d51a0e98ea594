#!/usr/bin/env bash
# Give the tests a working Docker Engine and a local base image, as root.
#
# No registry can be reached here, so nothing is pulled: the base image
# (Debian bookworm, minbase, python3 + venv + this machine's CA bundle) is made
# with mmdebstrap from the mirror in apt's own sources and `docker import`ed
# (mmdebstrap: ~30 s here where debootstrap took ~53 s; the same 118 packages).
# Idempotent: an engine that already answers and an image that already exists
# are reused. Prints nothing on success unless it had work to do.
set -euo pipefail

BASE_IMAGE="${ENVLOCK_TEST_BASE_IMAGE:-envlock-test/bookworm-python:1}"
STATE=/run/envlock-test
LOG=/var/log/envlock-dockerd.log

say() { echo "docker-setup: $*" >&2; }

engine_up() { docker info >/dev/null 2>&1; }

apt_install() {
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

if ! engine_up; then
  if ! command -v dockerd >/dev/null || ! command -v mmdebstrap >/dev/null; then
    say "installing docker.io and mmdebstrap from Debian"
    apt_install docker.io mmdebstrap
  fi
  mkdir -p "$STATE"
  say "starting dockerd (log: $LOG)"
  setsid dockerd --bridge=none --iptables=false >"$LOG" 2>&1 < /dev/null &
  echo $! >"$STATE/dockerd.pid"
  for _ in $(seq 1 60); do
    engine_up && break
    sleep 1
  done
  engine_up || { say "dockerd did not come up; last log lines:"; tail -n 20 "$LOG" >&2; exit 3; }
fi

if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  command -v mmdebstrap >/dev/null || apt_install mmdebstrap
  mirror=$(grep -h -E '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null \
             | awk '{print $2}' | grep -E '/debian/?$' | head -n 1 || true)
  if [ -z "$mirror" ]; then
    mirror=$(grep -h -E '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' \
               | grep -E '/debian/?$' | head -n 1 || true)
  fi
  [ -n "$mirror" ] || { say "no Debian mirror found in apt's sources"; exit 3; }
  tarball=$(mktemp /var/tmp/envlock-rootfs.XXXXXX.tar)
  trap 'rm -f "$tarball"' EXIT
  say "mmdebstrap bookworm from $mirror (about half a minute, once)"
  # The machine's CA bundle carries the TLS-intercepting proxy's CA; mmdebstrap
  # leaves no .deb files and no apt lists in the tarball. Its merged-usr hook
  # makes the /usr symlinks itself, as debootstrap does: without it apt picks
  # usrmerge, which brings perl and 7 more packages (48 MB) debootstrap leaves out.
  # shellcheck disable=SC2016 # $1, the root folder, is the hook's to expand
  mmdebstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --customize-hook='cp /etc/ssl/certs/ca-certificates.crt "$1/etc/ssl/certs/ca-certificates.crt"' \
    bookworm "$tarball" "$mirror" >/var/log/envlock-mmdebstrap.log 2>&1 \
    || { tail -n 20 /var/log/envlock-mmdebstrap.log >&2; exit 3; }
  docker import -c 'ENV LANG=C.UTF-8' -c 'CMD ["/bin/bash"]' "$tarball" "$BASE_IMAGE" >/dev/null
  say "built $BASE_IMAGE"
fi

# A real registry for push / pull-by-digest tests: Debian's docker-registry (the
# distribution registry) with the tests' own config: no auth, loopback only (the
# packaged config asks for htpasswd and listens on every interface).
REGISTRY_ADDR="${ENVLOCK_TEST_REGISTRY:-127.0.0.1:5000}"
registry_up() {
  python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
    "http://$REGISTRY_ADDR/v2/" >/dev/null 2>&1
}
if ! registry_up; then
  if ! command -v docker-registry >/dev/null; then
    say "installing docker-registry from Debian"
    apt_install docker-registry
  fi
  mkdir -p "$STATE" /var/lib/envlock-test-registry
  cat >"$STATE/registry.yml" <<YAML
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: /var/lib/envlock-test-registry
  delete:
    enabled: true
http:
  addr: $REGISTRY_ADDR
YAML
  say "starting docker-registry on $REGISTRY_ADDR (log: /var/log/envlock-registry.log)"
  setsid docker-registry serve "$STATE/registry.yml" >/var/log/envlock-registry.log 2>&1 < /dev/null &
  echo $! >"$STATE/registry.pid"
  for _ in $(seq 1 30); do
    registry_up && break
    sleep 1
  done
  registry_up || { say "docker-registry did not come up; last log lines:"; tail -n 20 /var/log/envlock-registry.log >&2; exit 3; }
fi

# A client that is not envlock reads the manifests envlock attaches
# (tests/test_report_referrers_docker.py): Debian's skopeo.
if ! command -v skopeo >/dev/null; then
  say "installing skopeo from Debian"
  apt_install skopeo
fi
