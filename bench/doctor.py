"""Benchmark: ``envlock doctor`` (without --deep) on a healthy TensorFlow venv.

    .venv/bin/python bench/doctor.py --venv /path/to/tf-venv [--lock DIR] [--runs 5] [--out FILE]

Wall time of ``envlock doctor --venv V --allow-cpu --json`` (a fresh process each
time, the venv's console script), against the peer ``V/bin/python -c "import
tensorflow"`` in the same venv, interleaved run by run so that both see the same
machine load; medians, their ratio and the goal of issue #12 (doctor within 5 s).
The venv must hold TensorFlow; make one with ``python3 -m venv V && V/bin/pip
install tensorflow==2.15.1``. Prints a JSON document (and writes it to --out).
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

VENV_BIN = Path(sys.executable).parent
GOAL_S = 5.0


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, env=env, timeout=600)
    return time.perf_counter() - start, done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", required=True, help="a venv with TensorFlow installed")
    parser.add_argument("--lock", help="compare against this bundle too")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", help="also write the JSON here")
    args = parser.parse_args()
    venv = Path(args.venv)
    doctor = [str(VENV_BIN / "envlock"), "doctor", "--venv", str(venv), "--allow-cpu", "--json"]
    if args.lock:
        doctor += ["--lock", args.lock]
    peer = [str(venv / "bin" / "python"), "-c", "import tensorflow"]
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    timed(doctor, env)  # warm-up: bytecode, matrix cache, page cache of TensorFlow
    timed(peer, env)
    runs: dict[str, list[float]] = {"doctor": [], "peer": []}
    codes: set[int] = set()
    for _ in range(args.runs):
        seconds, code = timed(doctor, env)
        runs["doctor"].append(seconds)
        codes.add(code)
        runs["peer"].append(timed(peer, env)[0])
    med = {name: statistics.median(values) for name, values in runs.items()}
    result: dict[str, Any] = {
        "command": " ".join(["envlock", *doctor[1:]]),
        "peer": " ".join(peer),
        "runs": args.runs,
        "seconds": {k: [round(v, 3) for v in vs] for k, vs in runs.items()},
        "median_s": {k: round(v, 3) for k, v in med.items()},
        "ratio": round(med["doctor"] / med["peer"], 2),
        "overhead_s": round(med["doctor"] - med["peer"], 3),
        "goal_s": GOAL_S,
        "within_goal": med["doctor"] <= GOAL_S,
        "doctor_exit_codes": sorted(codes),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load": list(os.getloadavg()),
            "platform": platform.platform(),
        },
    }
    text = json.dumps(result, indent=2) + "\n"
    sys.stdout.write(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
