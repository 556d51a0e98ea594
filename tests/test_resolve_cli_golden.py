"""`python -m envlock resolve` for every resolve case the tests and the README
use, compared whole with its golden record: exit code, stdout and stderr.

The cases are listed in tests/golden/resolve-cli/cases.json (name -> the
arguments after ``resolve``); each one's record is ``<name>.txt``:

    exit N
    --- stdout
    <stdout, byte for byte>
    --- stderr
    <stderr, byte for byte>

Refresh the records only with ENVLOCK_UPDATE_GOLDEN=1, and review the diff:
these files pin the resolve command's output for people and machines. No case
reads the host (--driver auto); every value is given on the command line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
GOLDEN = REPO / "tests" / "golden" / "resolve-cli"
CASES: list[dict[str, object]] = json.loads((GOLDEN / "cases.json").read_text(encoding="utf-8"))
NAMES = [str(case["name"]) for case in CASES]
UPDATE = os.environ.get("ENVLOCK_UPDATE_GOLDEN") == "1"


def _args(name: str) -> list[str]:
    for case in CASES:
        if case["name"] == name:
            args = case["args"]
            assert isinstance(args, list)
            return [str(a) for a in args]
    raise KeyError(name)


def _record(code: int, stdout: bytes, stderr: bytes) -> bytes:
    return b"exit %d\n--- stdout\n%s--- stderr\n%s" % (code, stdout, stderr)


# Runs every case in one interpreter, each as `python -m envlock resolve ...` runs
# it: envlock/__main__.py executed afresh by runpy with sys.argv set, stdout and
# stderr written to UTF-8 text streams over bytes (what a pipe gives under
# LC_ALL=C.UTF-8), SystemExit's code as the exit status. A fresh interpreter per
# case cost ~0.2 s of CPU each, 184 times, in each of the three Pythons' runs;
# test_the_driver_answers_as_a_fresh_interpreter checks the two agree.
DRIVER = r"""
import io, json, runpy, sys, traceback

results = []
for argv in json.load(sys.stdin):
    out, err = io.BytesIO(), io.BytesIO()
    sys.stdout = io.TextIOWrapper(out, encoding="utf-8", newline="\n", write_through=True)
    sys.stderr = io.TextIOWrapper(
        err, encoding="utf-8", errors="backslashreplace", newline="\n", write_through=True
    )
    sys.argv = ["envlock", *argv]
    try:
        runpy.run_module("envlock", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, (int, type(None))):
            sys.stderr.write(str(e.code) + "\n")
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    results.append([code, out.getvalue().hex(), err.getvalue().hex()])
sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
json.dump(results, sys.stdout)
"""


def _env(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENVLOCK_", "PYTHON"))}
    env.update(ENVLOCK_CACHE_DIR=str(cache), COLUMNS="80", LC_ALL="C.UTF-8")
    return env


def _fresh(name: str, cache: Path) -> bytes:
    """One case in an interpreter of its own: `python -m envlock resolve ...`."""
    proc = subprocess.run(
        [sys.executable, "-m", "envlock", "resolve", *_args(name)],
        capture_output=True,
        cwd=REPO,
        env=_env(cache),
        timeout=120,
        check=False,
    )
    return _record(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cache")
    _fresh(NAMES[0], path)  # fills the matrix cache once
    return path


@pytest.fixture(scope="module")
def outputs(cache: Path) -> dict[str, bytes]:
    """Every case's record, from one interpreter running them in turn (DRIVER)."""
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER],
        input=json.dumps([["resolve", *_args(name)] for name in NAMES]),
        capture_output=True,
        text=True,
        cwd=REPO,
        env=_env(cache),
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout)
    return {
        name: _record(code, bytes.fromhex(out), bytes.fromhex(err))
        for name, (code, out, err) in zip(NAMES, results, strict=True)
    }


def test_case_names_are_distinct_file_names() -> None:
    assert len(set(NAMES)) == len(NAMES)
    assert all(name and "/" not in name and not name.startswith(".") for name in NAMES)
    assert all("auto" not in _args(name) for name in NAMES)  # no case reads the host


@pytest.mark.parametrize("name", NAMES)
def test_resolve_cli_matches_golden(name: str, outputs: dict[str, bytes]) -> None:
    got = outputs[name]
    path = GOLDEN / f"{name}.txt"
    if UPDATE:
        path.write_bytes(got)
    assert path.is_file(), f"{path} missing: run with ENVLOCK_UPDATE_GOLDEN=1 and review the diff"
    assert got == path.read_bytes(), f"envlock resolve {_args(name)} differs from {path.name}"
    assert b"Traceback" not in got


def test_no_stale_golden_files() -> None:
    on_disk = {p.stem for p in GOLDEN.glob("*.txt")}
    assert on_disk == set(NAMES)


def _first(exit_line: bytes, json_flag: bool) -> str:
    for name in NAMES:
        record = (GOLDEN / f"{name}.txt").read_bytes()
        if record.startswith(exit_line) and ("--json" in _args(name)) == json_flag:
            return name
    raise LookupError(exit_line)


def test_the_driver_answers_as_a_fresh_interpreter(outputs: dict[str, bytes], cache: Path) -> None:
    """A table, an error (exit 2) and a JSON answer, each from `python -m envlock`
    in an interpreter of its own, byte for byte as the one-interpreter driver gave."""
    names = [_first(b"exit 0\n", False), _first(b"exit 2\n", False), _first(b"exit 0\n", True)]
    assert len(set(names)) == 3
    for name in names:
        assert _fresh(name, cache) == outputs[name], name
