#!/usr/bin/env bash
# The tests under other CPythons, from pyenv (part of ./tests/run.sh):
# - the unit tests (no docker, network or slow ones) that run some line or
#   branch of envlock no other kept test runs (tests/pythons-left-out.txt names
#   the rest), under the oldest and the newest Python envlock supports,
#   ENVLOCK_TEST_PYTHONS (default "3.10 3.13"), each in its own ./.venv-pyX.Y
#   with envlock-gpu[test] (this checkout) installed, and mypy for each;
# - the smoke harness's tests under ENVLOCK_HARNESS_PYTHON (default 3.8, the
#   oldest the harness runs on inside old images), in ./.venv-pyX.Y with pytest
#   only (pip picks its last release for that Python); the tests load the
#   harness file by its path, as a bundle's envlock_smoke.py.
# A version whose interpreter is absent is skipped, saying so; set a variable
# to "" to leave its runs out. Arguments go to the unit runs' pytest, after the
# marker selection. Exits non-zero when any run fails or collects no test.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
pyenv_versions="${PYENV_ROOT:-$HOME/.pyenv}/versions"
unit_pythons="${ENVLOCK_TEST_PYTHONS-3.10 3.13}"
harness_python="${ENVLOCK_HARNESS_PYTHON-3.8}"
# main_python: tests whose subject is decided outside the Python running envlock,
# under the main interpreter only: the SIGKILL loops (what the kernel leaves on
# disk: the restore and lock kill -9 tests) and the restores (the venvs that the
# locked Python, uv and pip make; 380 s of each run here). What those run of
# envlock under 3.10 and 3.13 still: the full restore (offline, from a
# wheelhouse: test_restore.py), restore's refusals, the wheelhouse, and mypy's
# check of every module against that Python's standard library (below).
unit_markers="not docker and not network and not slow and not main_python"
# and of those, the ones that run some line or branch of envlock no other kept
# test runs: tests/pythons-left-out.txt (made by tests/pythons_select.py, which
# says how) lists the others by node id; their assertions run under the main
# Python. ENVLOCK_PYTHONS_ALL=1 runs every unit test under every Python.
left_out=()
if [ "${ENVLOCK_PYTHONS_ALL:-}" != 1 ]; then
  while IFS= read -r nodeid; do
    case "$nodeid" in "" | "#"*) continue ;; esac
    left_out+=("--deselect=$nodeid")
  done <tests/pythons-left-out.txt
fi
failed=()

# the newest installed release of CPython X.Y, or nothing
find_python() {
  local found
  found=$(find "$pyenv_versions" -maxdepth 1 -name "$1.*" 2>/dev/null | sort -V | tail -n 1)
  if [ -n "$found" ] && [ -x "$found/bin/python" ]; then
    echo "$found/bin/python"
  fi
}

# a step's status, named; pytest's 5 (no test collected) is a failure here too
run_step() {
  local label=$1 rc=0
  shift
  local start=$SECONDS
  "$@" || rc=$?
  echo "tests/pythons.sh: $label: exit $rc in $((SECONDS - start)) s"
  if [ "$rc" = 5 ]; then
    echo "tests/pythons.sh: $label collected no test" >&2
  fi
  if [ "$rc" != 0 ]; then
    failed+=("$label")
  fi
}

# one Python's unit run (venv, mypy, pytest), in a subshell of its own: its
# output goes to a file, its status says whether a step failed
unit_run() {
  local version=$1 py venv start main_uv
  shift  # the rest: pytest's arguments
  py=$(find_python "$version")
  if [ -z "$py" ]; then
    echo "tests/pythons.sh: skipped CPython $version (not in $pyenv_versions)"
    return 0
  fi
  venv="$root/.venv-py$version"
  echo "tests/pythons.sh: unit tests under $("$py" -V 2>&1) in ${venv#"$root"/}"
  start=$SECONDS
  # uv from the main venv when it is there (ensure-venv.sh installs with it)
  main_uv="${ENVLOCK_VENV:-$root/.venv}/bin/uv"
  [ -x "$main_uv" ] || main_uv=""
  ENVLOCK_PYTHON="$py" ENVLOCK_VENV="$venv" ENVLOCK_UV="$main_uv" bash scripts/ensure-venv.sh test
  echo "tests/pythons.sh: CPython $version venv ready in $((SECONDS - start)) s"
  # every module against this Python's standard library as typeshed states it:
  # what exists in it, and what it deprecates (pyproject.toml's error code
  # "deprecated"), with the packages installed for this Python
  run_step "CPython $version mypy" \
    "$venv/bin/mypy" --python-version "$version" --cache-dir "$venv/.mypy_cache"
  # a quarter of each fuzz test's draws (tests/fuzz_support.py's scaled): the
  # same code paths, the full draws run under the main interpreter. In this
  # process (ENVLOCK_PYTHONS_WORKERS=0, the default): the Pythons run side by
  # side instead, and pytest-xdist's workers would each collect the suite again
  # (-n 2 took ~35% more CPU here)
  local workers=${ENVLOCK_PYTHONS_WORKERS:-0} parallel=()
  if [ "$workers" != 0 ]; then
    parallel=(-n "$workers" --dist loadfile --no-loadscope-reorder)
  fi
  run_step "CPython $version unit tests" \
    env ENVLOCK_FUZZ_SHARE="${ENVLOCK_FUZZ_SHARE:-0.25}" "$venv/bin/python" -m pytest \
    -p no:cacheprovider -m "$unit_markers" "${parallel[@]}" "${left_out[@]}" "$@"
  [ "${#failed[@]}" = 0 ]
}

# the Pythons side by side, each printed whole when it ends
versions=()
pids=()
logs=()
for version in $unit_pythons; do
  log=$(mktemp "${TMPDIR:-/tmp}/envlock-py$version.XXXXXX")
  (unit_run "$version" "$@") >"$log" 2>&1 &
  versions+=("$version")
  pids+=($!)
  logs+=("$log")
done
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -f "${logs[@]}"' EXIT

if [ -n "$harness_python" ]; then
  py=$(find_python "$harness_python")
  if [ -z "$py" ]; then
    echo "tests/pythons.sh: skipped the harness tests under CPython $harness_python" \
      "(not in $pyenv_versions)"
  else
    venv="$root/.venv-py$harness_python"
    echo "tests/pythons.sh: harness tests under $("$py" -V 2>&1) in ${venv#"$root"/}"
    start=$SECONDS
    if [ ! -x "$venv/bin/python" ]; then
      "$py" -m venv "$venv"
    fi
    if ! "$venv/bin/python" -c 'import pytest' >/dev/null 2>&1; then
      main_uv="${ENVLOCK_VENV:-$root/.venv}/bin/uv"
      if [ -x "$main_uv" ]; then  # uv picks pytest's last release for 3.8, as pip does
        index=$("${ENVLOCK_VENV:-$root/.venv}/bin/python" -m envlock.index.config)
        "$main_uv" pip install -q --system-certs --python "$venv/bin/python" \
          --default-index "$index" pytest
      else
        "$venv/bin/python" -m pip install -q --disable-pip-version-check pytest
      fi
    fi
    echo "tests/pythons.sh: CPython $harness_python venv ready in $((SECONDS - start)) s"
    run_step "CPython $harness_python harness tests" \
      "$venv/bin/python" -m pytest -p no:cacheprovider tests/test_smoke_harness.py
  fi
fi

for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || failed+=("CPython ${versions[$i]} unit run (above)")
  cat "${logs[$i]}"
done

if [ "${#failed[@]}" != 0 ]; then
  printf 'tests/pythons.sh: failed: %s\n' "${failed[@]}" >&2
  exit 1
fi
