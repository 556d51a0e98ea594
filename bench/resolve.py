"""Benchmark: start-up of ``envlock resolve tensorflow==2.15 --json``.

    .venv/bin/python bench/resolve.py [--runs 15] [--out FILE]

Wall time of the command as a user runs it (the venv's ``envlock`` console
script, a fresh process each time) against ``python -c pass`` from the same
interpreter, interleaved run by run so that both see the same machine load;
medians, and their ratio (goal: at most 2.5). Bytecode is allowed to be
cached, as after any install (PYTHONDONTWRITEBYTECODE is removed for the
children; one warm-up run of each writes it first). Then, in one process,
where the time goes: importing the CLI, building the parser, loading and
validating the matrices (TOML parse alone shown separately), resolving.

Prints a JSON document (and writes it to --out when given).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
COMMAND = ["resolve", "tensorflow==2.15", "--json"]

PHASES = r"""
import json, sys, time
t0 = time.perf_counter()
import envlock.cli
t1 = time.perf_counter()
parser = envlock.cli.build_parser()
t2 = time.perf_counter()
import tomllib
from envlock import resources
toml = 0.0
for name in ("tensorflow.toml", "cuda.toml", "gpus.toml"):
    data = resources.read_bytes("matrices", name).decode()
    s = time.perf_counter(); tomllib.loads(data); toml += time.perf_counter() - s
t3 = time.perf_counter()
from envlock.matrix import load
matrix = load()
t4 = time.perf_counter()
from envlock.resolve import Constraints, resolve
resolve(Constraints(spec="tensorflow==2.15"), matrix)
t5 = time.perf_counter()
print(json.dumps({"import_cli": t1 - t0, "build_parser": t2 - t1, "toml_parse_only": toml,
                  "load_matrices": t4 - t3, "resolve": t5 - t4}))
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _time(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(
        argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{argv} failed ({proc.returncode}): {proc.stderr.decode()[-500:]}")
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.runs < 10:
        ap.error("--runs must be at least 10 (the goal is stated for a median of >= 10)")

    env = _env()
    envlock_cmd = [str(VENV_BIN / "envlock"), *COMMAND]
    python_cmd = [sys.executable, "-c", "pass"]
    _time(envlock_cmd, env)  # warm-up: bytecode, page cache
    _time(python_cmd, env)
    envlock_s: list[float] = []
    python_s: list[float] = []
    for _ in range(args.runs):
        envlock_s.append(_time(envlock_cmd, env))
        python_s.append(_time(python_cmd, env))

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
    phases = {
        k: round(statistics.median(r[k] for r in phases_runs) * 1000, 1) for k in phases_runs[0]
    }

    med_e = statistics.median(envlock_s)
    med_p = statistics.median(python_s)
    try:
        load = os.getloadavg()[0]
    except OSError:  # pragma: no cover
        load = -1.0
    result: dict[str, Any] = {
        "command": "envlock " + " ".join(COMMAND),
        "runs": args.runs,
        "envlock_median_ms": round(med_e * 1000, 1),
        "python_pass_median_ms": round(med_p * 1000, 1),
        "ratio": round(med_e / med_p, 2),
        "goal_ratio": 2.5,
        "envlock_ms": [round(x * 1000, 1) for x in envlock_s],
        "python_pass_ms": [round(x * 1000, 1) for x in python_s],
        "phases_median_ms": phases,
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
