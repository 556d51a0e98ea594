#!/usr/bin/env bash
# Make ./.venv with envlock installed (editable) and, with "test", its test tools.
# Idempotent: re-installs only when pyproject.toml changed. Installs Debian's
# python3-venv first when run as root on a machine that lacks it.
# ENVLOCK_VENV names another venv folder, ENVLOCK_PYTHON another interpreter
# (tests/pythons.sh makes ./.venv-py3.10 and ./.venv-py3.13 so), ENVLOCK_UV a uv
# to install with (default: pip installs uv into the venv first).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv="${ENVLOCK_VENV:-$root/.venv}"
extra="${1:-}"
if [ -n "${ENVLOCK_PYTHON:-}" ]; then
  py=$ENVLOCK_PYTHON
  if ! "$py" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    echo "envlock: ENVLOCK_PYTHON=$py is not a Python with the venv module" >&2
    exit 3
  fi
fi
py=${py:-$(command -v python3 || true)}
if [ -z "$py" ] || ! "$py" -c 'import venv, ensurepip' >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "envlock: installing python3 and python3-venv (Debian)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >/dev/null
    py=$(command -v python3)
  else
    echo "envlock: needs python3 (>= 3.10) with the venv module: apt-get install python3-venv" >&2
    exit 3
  fi
fi
if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
  echo "envlock: needs Python 3.10 or newer; $py is $("$py" -V 2>&1)" >&2
  exit 3
fi
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv"
fi
want="$(sha256sum "$root/pyproject.toml" | cut -d' ' -f1)-${extra}"
stamp="$venv/.envlock-installed"
have="$(cat "$stamp" 2>/dev/null || true)"
# an install with the test extra also serves the plain one (no re-install when
# ./envlock.sh and ./tests/run.sh take turns)
if [ "$have" != "$want" ] && { [ -n "$extra" ] || [ "$have" != "${want}test" ]; }; then
  spec="$root"
  [ -n "$extra" ] && spec="${root}[$extra]"
  # the distribution was called "envlock" before it became "envlock-gpu" (that
  # name on the index is an unrelated project): an install under the old name
  # would leave its files beside the new one
  if "$venv/bin/python" -m pip show -q envlock >/dev/null 2>&1; then
    "$venv/bin/python" -m pip uninstall -q -y envlock
  fi
  # uv installs envlock and its dependencies (a few seconds; pip took ~30 s here):
  # ENVLOCK_UV names one (tests/pythons.sh passes ./.venv's), else pip puts uv,
  # one of envlock's dependencies, into this venv first. The index is the one
  # envlock itself uses: the pip/uv configuration read by envlock.index.config
  # (uv alone would not read pip's). pip stays in the venv for its users.
  uv="${ENVLOCK_UV:-}"
  if [ -z "$uv" ]; then
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "uv>=0.11,<0.14"
    uv="$venv/bin/uv"
  fi
  index=$(PYTHONPATH="$root" "$venv/bin/python" -m envlock.index.config)
  "$uv" pip install -q --system-certs --python "$venv/bin/python" --default-index "$index" \
    -e "$spec"
  echo "$want" >"$stamp"
fi
