"""Choose which unit tests the CPython 3.10/3.13 runs leave out.

tests/pythons.sh runs the unit tests again under the oldest and the newest Python
envlock supports. What can differ there is how the standard library behaves under
envlock's own code; the tests' assertions do not change. So a test may be left
out of those runs when every line and branch of envlock that it runs under that
Python is also run there by the tests that stay in, whose assertions check what
those lines did.

This script measures that (run by hand when tests or envlock change, after
tests/pythons.sh has made its venvs; CI does not run it, it reads its output):

    .venv/bin/python tests/pythons_select.py

1. collects the unit tests with the marker selection tests/pythons.sh uses;
2. under each Python of those runs (./.venv-py3.10 and ./.venv-py3.13, or each
   ``--python``), runs each module on its own (``--jobs`` at a time) under
   coverage.py with branch measurement and one context a test (this file,
   loaded as a pytest plugin, switches it), subprocesses included (``[run] patch
   = subprocess``: ``python -m envlock`` and the other Python processes of that
   venv, each under the context of the test that started it), with the runs'
   share of fuzz draws, and the CPU seconds each test took, its subprocesses and
   the module fixtures it set up included (tests/conftest.py's ENVLOCK_TEST_CPU);
3. picks the tests to keep: a greedy weighted set cover of every (Python, file,
   arc) of envlock that some test runs (what module imports and collection run
   is run in every run, and left aside), the test with the most new arcs per CPU
   second first, then drops a kept test again when the others cover everything
   without it; so a branch that only one Python takes (an exception one
   raises, a fallback for a module another lacks) keeps a test that takes it;
4. writes tests/pythons-left-out.txt: the node ids left out, one a line;
   tests/pythons.sh passes each to pytest as --deselect.

A test that is not in the file runs under every Python, so a new or renamed test
does until this script is run again. The main run (3.11) runs every test.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Generator
from concurrent.futures import ThreadPoolExecutor
from itertools import repeat
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "pythons-left-out.txt"
Arc = tuple[str, int, int]


# -- the pytest plugin (``-p pythons_select``, under coverage) --


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None]:
    import coverage

    cov = coverage.Coverage.current()
    if cov is None:
        return (yield)
    cov.switch_context(item.nodeid)
    # a Python subprocess started by this test records under its node id too
    config = copy.copy(cov.config)
    config.context = item.nodeid
    os.environ["COVERAGE_PROCESS_CONFIG"] = config.serialize()
    try:
        return (yield)
    finally:
        cov.switch_context("")


# -- the script --


def unit_markers() -> str:
    """The marker expression of tests/pythons.sh's unit runs (one place for it)."""
    text = (ROOT / "tests" / "pythons.sh").read_text(encoding="utf-8")
    found = re.search(r'^unit_markers="([^"]+)"$', text, re.MULTILINE)
    if found is None:
        raise SystemExit('tests/pythons.sh: no unit_markers="..." line')
    return found.group(1)


def unit_tests(markers: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        + ["-m", markers],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"pytest --collect-only: exit {done.returncode}\n{done.stdout[-2000:]}")
    return [line for line in done.stdout.splitlines() if "::" in line]


def _name(module: str) -> str:
    """The file-name stem of a module's data in the work folder."""
    return module.replace("/", "_").removesuffix(".py")


def measure(python: str, module: str, markers: str, work: Path, reuse: bool) -> tuple[str, int]:
    """Run one module under coverage with ``python``, a context and a CPU time a
    test; its exit."""
    name = _name(module)
    data = work / "data" / name
    if reuse and (work / f"{name}.main.json").is_file():
        return module, 0  # measured by an earlier run into the same --keep-data
    if data.exists():
        shutil.rmtree(data)
    data.mkdir(parents=True)
    rc = work / f"{name}.rc"
    rc.write_text(
        "[run]\nbranch = true\nsource_pkgs = envlock\nparallel = true\n"
        f"data_file = {data}/cov\npatch = subprocess\n",
        encoding="utf-8",
    )
    env = dict(
        os.environ,
        ENVLOCK_FUZZ_SHARE=os.environ.get("ENVLOCK_FUZZ_SHARE", "0.25"),
        ENVLOCK_TEST_CPU=str(work / name),  # tests/conftest.py writes NAME.main.json
        PYTHONPATH=os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]),
    )
    with (work / f"{name}.log").open("wb") as log:
        done = subprocess.run(
            [python, "-m", "coverage", "run", f"--rcfile={rc}", "-m", "pytest"]
            + ["-q", "-p", "no:cacheprovider", "-p", "pythons_select", "-m", markers, module],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            check=False,
        )
    return module, done.returncode


def read(module: str, work: Path) -> tuple[dict[str, set[Arc]], dict[str, float]]:
    """Each test's arcs of envlock, and its CPU seconds."""
    from coverage import CoverageData

    name = _name(module)
    times: dict[str, float] = json.loads((work / f"{name}.main.json").read_text("utf-8"))
    arcs: dict[str, set[Arc]] = {test: set() for test in times}
    for part in sorted((work / "data" / name).glob("cov*")):
        data = CoverageData(basename=str(part))
        data.read()
        files = {path: os.path.relpath(path, ROOT) for path in data.measured_files()}
        for context in data.measured_contexts():
            if context not in arcs:
                continue  # "": imports and collection, run in every run
            data.set_query_contexts([f"^{re.escape(context)}$"])
            for path, rel in files.items():
                arcs[context].update((rel, a, b) for a, b in data.arcs(path) or ())
    return arcs, times


def cover(arcs: dict[str, set[Any]], cost: dict[str, float]) -> list[str]:
    """Greedy weighted set cover, then drop what the rest already covers."""
    universe = set().union(*arcs.values())
    left = set(universe)
    kept: list[str] = []
    while left:
        best = max(
            (m for m in arcs if m not in kept and arcs[m] & left),
            key=lambda m: (len(arcs[m] & left) / max(cost[m], 0.01), m),
        )
        kept.append(best)
        left -= arcs[best]
    for test in sorted(kept, key=lambda m: -cost[m]):
        rest = set().union(*(arcs[m] for m in kept if m != test))
        if rest >= universe:
            kept.remove(test)
    return sorted(kept)


def pythons_of_the_runs() -> list[str]:
    """The interpreters of tests/pythons.sh's unit runs: ./.venv-pyX.Y/bin/python."""
    versions = os.environ.get("ENVLOCK_TEST_PYTHONS", "3.10 3.13").split()
    return [str(ROOT / f".venv-py{v}" / "bin" / "python") for v in versions]


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--python",
        action="append",
        metavar="PY",
        help="measure under this interpreter, with coverage and the test tools installed "
        "(again for more; default: tests/pythons.sh's venvs, .venv-py3.10 and .venv-py3.13)",
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--keep-data", metavar="DIR", help="write the coverage data here")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="take the modules measured by an earlier run into the --keep-data folder as they are",
    )
    args = parser.parse_args()
    pythons = args.python or pythons_of_the_runs()
    for python in pythons:
        if not Path(python).is_file():
            raise SystemExit(f"{python}: no such interpreter (tests/pythons.sh makes the venvs)")
    markers = unit_markers()
    tests = unit_tests(markers)
    modules = sorted({test.split("::", 1)[0] for test in tests})
    work = Path(args.keep_data or tempfile.mkdtemp(prefix="envlock-pythons-select."))
    start = time.monotonic()
    # every (interpreter, file, arc) some test runs, and each test's CPU seconds
    # summed over the interpreters: the kept tests run every arc under each
    arcs: dict[str, set[tuple[str, str, int, int]]] = {test: set() for test in tests}
    cost: dict[str, float] = dict.fromkeys(tests, 0.0)
    per_python = {}
    for python in pythons:
        label = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        here = work / label
        here.mkdir(parents=True, exist_ok=True)
        failed = []
        with ThreadPoolExecutor(args.jobs) as pool:
            jobs = pool.map(
                measure, repeat(python), modules, repeat(markers), repeat(here), repeat(args.reuse)
            )
            for module, rc in jobs:
                print(f"{label} {module}: exit {rc}", flush=True)
                if rc != 0:
                    failed.append(module)
        if failed:
            print(f"failed under coverage (logs in {here}): {', '.join(failed)}", file=sys.stderr)
            return 1
        seen: set[tuple[str, int, int]] = set()
        cpu = 0.0
        for module in modules:
            more_arcs, more_times = read(module, here)
            for test, found in more_arcs.items():
                seen |= found
                if test in arcs:
                    arcs[test] |= {(label, *arc) for arc in found}
            for test, seconds in more_times.items():
                cpu += seconds
                if test in cost:
                    cost[test] += seconds
        per_python[label] = {"arcs": len(seen), "cpu_s": round(cpu, 1)}
    kept = set(cover(arcs, cost))
    left_out = [test for test in tests if test not in kept]
    summary = {
        "tests": len(tests),
        "kept": len(kept),
        "pythons": per_python,
        "cpu_s_all": round(sum(cost.values()), 1),
        "cpu_s_kept": round(sum(cost[t] for t in kept), 1),
        "wall_s": round(time.monotonic() - start, 1),
    }
    lines = [
        "# Unit tests the CPython 3.10/3.13 runs of tests/pythons.sh leave out: every",
        "# line and branch of envlock each runs under 3.10 and 3.13 (coverage.py,",
        "# subprocesses included) is run there by the tests that stay in. Made by",
        "# `.venv/bin/python tests/pythons_select.py` (its docstring says how); the",
        "# main run runs every test. Arcs and CPU seconds (under coverage, summed",
        "# over the Pythons) on the machine that made the list:",
        f"# {json.dumps(summary)}",
        *sorted(left_out),
    ]
    tmp = OUT.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(OUT)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
