#!/usr/bin/env bash
# The whole test suite: sets up what it needs, then runs lint, types and tests;
# beside the main pytest run (at the same time, so both cores stay busy), mypy
# and the unit tests that run what differs between Pythons
# under CPython 3.10 and 3.13 (tests/pythons-left-out.txt lists the rest) and the
# harness tests under 3.8, from pyenv (tests/pythons.sh; a version not installed
# is skipped), whose output is printed whole after the main run.
# As root it also installs the Debian packages the tests run
# (tests/debian-packages.sh), and starts a Docker Engine and builds the local
# base image (tests/docker/setup.sh) beside the venv and the first tests.
# Extra arguments go to pytest (both parts).
# Any failing step fails the script, and so does a pytest run that collects no
# test (pytest's exit 5).
# With --fast (anywhere among the arguments): the fast tier only (pytest --fast,
# tests/conftest.py: no docker, gpu, network, slow, venv, other_python, root or
# chromium test), in ./.venv (made if missing), with ENVLOCK_TEST_WORKERS
# pytest-xdist workers (default 4: many of its tests wait on sockets, timeouts
# and subprocesses, so 4 beat 2 on these 2 cores, BENCHMARKS.md; each module on
# one worker) and a quarter of each fuzz test's examples (ENVLOCK_FUZZ_SHARE, as
# tests/pythons.sh); no root set-up, no lint, mypy or other Pythons. It runs as
# any user.
set -euo pipefail
# Python's default, bytecode caches written: where PYTHONDONTWRITEBYTECODE is set (as
# in some sandboxed shells), each of the run's Python processes would compile again
# what it imports (envlock, the test modules' assertion rewriting, and TensorFlow's
# ~1,800 modules in each uv-made test venv: `import tensorflow` 7.5 s of CPU there,
# 3.6 s with the caches; BENCHMARKS.md); the venvs are the tests' own, under their
# temporary folders
unset PYTHONDONTWRITEBYTECODE
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
fast=0
args=()
for arg in "$@"; do
  if [ "$arg" = --fast ]; then
    fast=1
  else
    args+=("$arg")
  fi
done
if [ "$fast" = 1 ]; then
  bash scripts/ensure-venv.sh test
  venv="${ENVLOCK_VENV:-$root/.venv}"
  workers="${ENVLOCK_TEST_WORKERS:-4}"
  parallel=()
  if [ "$workers" != 0 ]; then
    parallel=(-n "$workers" --dist loadfile --no-loadscope-reorder)
  fi
  start=$SECONDS
  rc=0
  ENVLOCK_FUZZ_SHARE="${ENVLOCK_FUZZ_SHARE:-0.25}" \
    "$venv/bin/python" -m pytest --fast "${parallel[@]}" "${args[@]}" || rc=$?
  echo "tests/run.sh --fast: pytest exit $rc in $((SECONDS - start)) s"
  if [ "$rc" = 5 ]; then
    echo "tests/run.sh: pytest collected no test (exit 5)" >&2
  fi
  exit "$rc"
fi
# as root: the Debian packages the suite runs, in one apt-get (docker.io, shellcheck,
# chromium, nodejs, ...: tests/debian-packages.sh lists them)
bash tests/debian-packages.sh
docker_setup=""
if [ "$(id -u)" = 0 ] && [ -f tests/docker/setup.sh ]; then
  # The Docker Engine, the local base image and the registry (tests/docker/setup.sh:
  # ~30 s on a fresh machine, mostly mmdebstrap) are made beside the first tests, not
  # before them: a Docker test waits until the exit status is in
  # $ENVLOCK_TEST_DOCKER_SETUP/rc (tests/conftest.py) and fails naming the log if it
  # is not 0; its output is printed after the main run.
  docker_setup=$(mktemp -d "${TMPDIR:-/tmp}/envlock-docker-setup.XXXXXX")
  export ENVLOCK_TEST_DOCKER_SETUP="$docker_setup"
  (
    setup_rc=0
    bash tests/docker/setup.sh >"$docker_setup/log" 2>&1 || setup_rc=$?
    echo "$setup_rc" >"$docker_setup/rc.part" && mv "$docker_setup/rc.part" "$docker_setup/rc"
  ) &
  docker_setup_pid=$!
fi
bash scripts/ensure-venv.sh test
venv="${ENVLOCK_VENV:-$root/.venv}"
if [ "$(id -u)" = 0 ] && [ -f tests/chromium/setup.sh ]; then
  bash tests/chromium/setup.sh  # headless Chromium for tests/test_report_page.py
fi
# @sigstore/verify (npm), the Sigstore JavaScript client's verifier, checks envlock's
# bundles in tests/test_report_referrers_docker.py (idempotent; needs node and npm)
bash tests/sigstore/setup.sh
if [ -f tests/docker/env.sh ]; then
  # shellcheck disable=SC1091
  . tests/docker/env.sh
fi
if [ "${CI:-}" = true ]; then
  export ENVLOCK_REQUIRE_DOCKER=1
  export ENVLOCK_REQUIRE_CHROMIUM=1
fi
"$venv/bin/ruff" check envlock tests bench
"$venv/bin/ruff" format --check envlock tests bench
pythons_log=$(mktemp "${TMPDIR:-/tmp}/envlock-pythons.XXXXXX")
mypy_log=$(mktemp "${TMPDIR:-/tmp}/envlock-mypy.XXXXXX")
start=$SECONDS
# mypy (one core, ~15 s) beside the tests instead of before them; its output and
# status come after the main run
"$venv/bin/mypy" >"$mypy_log" 2>&1 &
mypy_pid=$!
bash tests/pythons.sh "$@" >"$pythons_log" 2>&1 &
pythons_pid=$!
trap 'kill "$pythons_pid" "$mypy_pid" 2>/dev/null || true' EXIT  # stopped with the main run
rc=0
# ENVLOCK_TEST_WORKERS pytest-xdist workers (default 3, with the 3.10/3.13 runs
# beside them: this 2-core machine reads 100 % busy from start to end, so the wall
# time is the CPU spent, BENCHMARKS.md; 0 runs it in this process), each test module on
# one worker (--dist loadfile: module-scoped fixtures are built once), handed out
# in conftest.py's order, longest first (--no-loadscope-reorder: xdist would
# otherwise sort the modules by their number of tests)
workers="${ENVLOCK_TEST_WORKERS:-3}"
parallel=()
if [ "$workers" != 0 ]; then
  parallel=(-n "$workers" --dist loadfile --no-loadscope-reorder)
fi
"$venv/bin/python" -m pytest "${parallel[@]}" "$@" || rc=$?
echo "tests/run.sh: main pytest run: exit $rc in $((SECONDS - start)) s"
drc=0
if [ -n "$docker_setup" ]; then
  wait "$docker_setup_pid" || true
  drc=$(cat "$docker_setup/rc" 2>/dev/null || echo 3)
  echo "tests/run.sh: tests/docker/setup.sh (run beside the first tests) ended with exit $drc:"
  cat "$docker_setup/log"
  rm -rf "$docker_setup"
fi
if [ "$rc" = 5 ]; then
  echo "tests/run.sh: pytest collected no test (exit 5)" >&2
fi
mrc=0
wait "$mypy_pid" || mrc=$?
echo "tests/run.sh: mypy (run beside it) ended with exit $mrc:"
cat "$mypy_log"
rm -f "$mypy_log"
prc=0
wait "$pythons_pid" || prc=$?
echo "tests/run.sh: tests/pythons.sh (run beside it) ended with exit $prc, $((SECONDS - start)) s after the start; its output:"
cat "$pythons_log"
rm -f "$pythons_log"
if [ "$rc" != 0 ]; then
  exit "$rc"
fi
if [ "$drc" != 0 ]; then
  exit "$drc"
fi
if [ "$mrc" != 0 ]; then
  exit "$mrc"
fi
exit "$prc"
