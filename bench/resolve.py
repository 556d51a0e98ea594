"""Benchmark: start-up of ``envlock resolve tensorflow==2.15 --json``.

    .venv/bin/python bench/resolve.py [--runs 21] [--module] [--out FILE]

Wall time of the command as a user runs it (the venv's ``envlock`` console
script, or ``python -m envlock`` with --module where no console script is
installed), a fresh process each time, against ``python -c pass`` from the
same interpreter, interleaved run by run so that both see the same machine
load; medians, their ratio, and the absolute goal (issue #10: at most 100 ms).
CPU time (user + sys) of the same runs is reported too: on a shared machine it
moves less than wall time. Bytecode is allowed to be cached, as after any
install (PYTHONDONTWRITEBYTECODE is removed for the children; one warm-up run
of each writes it, and fills envlock's matrix cache).

Also measured: the floor, what runs before envlock's own code in the console
script (pip's wrapper imports ``re``; ``python -m`` imports ``runpy``); what
each standard part costs to import alone in a fresh interpreter (``-X
importtime``, cumulative microseconds of its top-level line, median of 7);
and, in one process, where the time goes: CLI import, argparse, the matrix
modules, the matrix load from the cache, the same load without it (TOML parse
alone shown separately), resolve, and writing the JSON.

Prints a JSON document (and writes it to --out when given).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
COMMAND = ["resolve", "tensorflow==2.15", "--json"]
FLOOR = "import re"  # pip's console-script wrapper does this before envlock runs
# pip's console-script template (pip/_vendor/distlib/scripts.py), as pip writes
# .venv/bin/envlock
PIP_WRAPPER = """# -*- coding: utf-8 -*-
import re
import sys
from envlock.cli import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""

PHASES = r"""
import json, re, time
t0 = time.perf_counter()
import envlock.cli
t1 = time.perf_counter()
argv = ["resolve", "tensorflow==2.15", "--json"]
args = envlock.cli.build_parser(argv).parse_args(argv)
t2 = time.perf_counter()
import envlock.matrix, envlock.matrix.cuda, envlock.matrix.gpus
t3 = time.perf_counter()
from envlock.commands.resolve import constraints_from_args
from envlock.matrix.cache import load_matrix
from envlock.resolve import resolve
matrix = load_matrix()
t4 = time.perf_counter()
res = resolve(constraints_from_args(args), matrix)
t5 = time.perf_counter()
from envlock.output import dumps
dumps(res.to_dict())
t6 = time.perf_counter()
import tomllib
from envlock import resources
toml = 0.0
for name in ("tensorflow.toml", "cuda.toml", "gpus.toml"):
    data = resources.read_bytes("matrices", name).decode()
    s = time.perf_counter(); tomllib.loads(data); toml += time.perf_counter() - s
from envlock.matrix import load
s = time.perf_counter(); load(); uncached = time.perf_counter() - s
print(json.dumps({"import_cli": t1 - t0, "argparse_parse": t2 - t1,
                  "matrix_modules": t3 - t2, "load_matrices_cached": t4 - t3,
                  "resolve": t5 - t4, "write_json": t6 - t5,
                  "load_matrices_uncached": uncached, "toml_parse_only": toml}))
"""

# the standard parts on the resolve path, each imported alone in a fresh interpreter
STANDARD_PARTS = (
    "re",
    "typing",
    "dataclasses",
    "argparse",
    "json",
    "packaging.version",
    "packaging.specifiers",
    "packaging.requirements",
)
GOAL_MS = 100.0


def _import_cost_ms(module: str, env: dict[str, str], runs: int = 7) -> float:
    """Median cumulative import time of ``module`` alone (``-X importtime``)."""
    costs = []
    for _ in range(runs):
        err = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", f"import {module}"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stderr
        for line in err.splitlines():
            parts = [p.strip() for p in line.removeprefix("import time:").split("|")]
            if len(parts) == 3 and parts[2] == module:
                costs.append(int(parts[1]) / 1000)
    return round(statistics.median(costs), 1)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds user+sys) of one run of ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{argv} failed ({proc.returncode}): {proc.stderr.decode()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _ms(values: list[float]) -> float:
    return round(statistics.median(values) * 1000, 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=21)
    how = ap.add_mutually_exclusive_group()
    how.add_argument("--module", action="store_true", help="run 'python -m envlock'")
    how.add_argument(
        "--pip-wrapper",
        action="store_true",
        help="run pip's console-script template for envlock from a temporary folder "
        "(where no console script is installed, e.g. a source tree on another host)",
    )
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.runs < 10:
        ap.error("--runs must be at least 10 (the goal is stated for a median of >= 10)")

    env = _env()
    if args.module:
        envlock_cmd = [sys.executable, "-m", "envlock", *COMMAND]
        label = "python -m envlock " + " ".join(COMMAND)
    elif args.pip_wrapper:
        import tempfile

        wrapper = Path(tempfile.mkdtemp()) / "envlock"
        wrapper.write_text(PIP_WRAPPER, encoding="utf-8")
        envlock_cmd = [sys.executable, str(wrapper), *COMMAND]
        label = "envlock " + " ".join(COMMAND) + " (pip's console-script template)"
    else:
        envlock_cmd = [str(VENV_BIN / "envlock"), *COMMAND]
        label = "envlock " + " ".join(COMMAND)
    commands = {
        "envlock": envlock_cmd,
        "python_pass": [sys.executable, "-c", "pass"],
        "floor": [sys.executable, "-c", "import runpy" if args.module else FLOOR],
    }
    for argv in commands.values():  # warm-up: bytecode, page cache, matrix cache
        _run(argv, env)
    wall: dict[str, list[float]] = {k: [] for k in commands}
    cpu: dict[str, list[float]] = {k: [] for k in commands}
    for _ in range(args.runs):
        for name, argv in commands.items():
            w, c = _run(argv, env)
            wall[name].append(w)
            cpu[name].append(c)

    phases_runs = []
    for _ in range(5):
        out = subprocess.run(
            [sys.executable, "-c", PHASES],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        phases_runs.append(json.loads(out))
    phases = {k: _ms([r[k] for r in phases_runs]) for k in phases_runs[0]}

    try:
        load = os.getloadavg()[0]
    except OSError:  # pragma: no cover
        load = -1.0
    result: dict[str, Any] = {
        "command": label,
        "runs": args.runs,
        "wall_median_ms": {k: _ms(v) for k, v in wall.items()},
        "cpu_median_ms": {k: _ms(v) for k, v in cpu.items()},
        "ratio_wall": round(
            statistics.median(wall["envlock"]) / statistics.median(wall["python_pass"]), 2
        ),
        "ratio_cpu": round(
            statistics.median(cpu["envlock"]) / statistics.median(cpu["python_pass"]), 2
        ),
        "floor": "import runpy" if args.module else FLOOR,
        "ratio_floor_wall": round(
            statistics.median(wall["floor"]) / statistics.median(wall["python_pass"]), 2
        ),
        "goal_ms": GOAL_MS,
        "goal_met": statistics.median(wall["envlock"]) * 1000 <= GOAL_MS,
        "standard_part_import_ms": {m: _import_cost_ms(m, env) for m in STANDARD_PARTS},
        "phases_in_process_median_ms": phases,
        "wall_ms": {k: [round(x * 1000, 1) for x in v] for k, v in wall.items()},
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "loadavg_1min_at_end": round(load, 2),
            "platform": platform.platform(),
        },
    }
    text = json.dumps(result, indent=2) + "\n"
    sys.stdout.write(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
