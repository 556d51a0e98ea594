#!/usr/bin/env bash
# The whole test suite: sets up what it needs, then runs lint, types and tests.
# As root it also installs and starts a Docker Engine and builds the local base
# image (tests/docker/setup.sh). Extra arguments go to pytest.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash scripts/ensure-venv.sh test
venv="${ENVLOCK_VENV:-$root/.venv}"
if [ "$(id -u)" = 0 ] && [ -f tests/docker/setup.sh ]; then
  bash tests/docker/setup.sh
fi
if [ "$(id -u)" = 0 ] && ! command -v shellcheck >/dev/null 2>&1; then
  # Debian's shellcheck lints the rendered bootstrap.sh (tests/test_render_golden.py).
  apt-get install -y --no-install-recommends shellcheck >/dev/null 2>&1 \
    || { apt-get update >/dev/null && apt-get install -y --no-install-recommends shellcheck >/dev/null; }
fi
if [ -f tests/docker/env.sh ]; then
  # shellcheck disable=SC1091
  . tests/docker/env.sh
fi
if [ "${CI:-}" = true ]; then
  export ENVLOCK_REQUIRE_DOCKER=1
fi
"$venv/bin/ruff" check envlock tests bench
"$venv/bin/mypy"
"$venv/bin/python" -m pytest "$@"
