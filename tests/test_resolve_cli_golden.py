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
from concurrent.futures import ThreadPoolExecutor
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


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """Every case run once, a few at a time (each is a fresh interpreter)."""
    cache = tmp_path_factory.mktemp("cache")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENVLOCK_", "PYTHON"))}
    env.update(ENVLOCK_CACHE_DIR=str(cache), COLUMNS="80", LC_ALL="C.UTF-8")

    def run(name: str) -> bytes:
        proc = subprocess.run(
            [sys.executable, "-m", "envlock", "resolve", *_args(name)],
            capture_output=True,
            cwd=REPO,
            env=env,
            timeout=120,
            check=False,
        )
        return _record(proc.returncode, proc.stdout, proc.stderr)

    run(NAMES[0])  # fills the matrix cache once
    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(NAMES, pool.map(run, NAMES), strict=True))


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
