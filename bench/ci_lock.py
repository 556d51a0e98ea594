"""Benchmark: ``envlock ci lock`` of 4 cells against the slowest single cell's ``envlock lock``.

    .venv/bin/python bench/ci_lock.py [--runs 5] [--jobs 4] [--out FILE]

The cells are those of ``tensorflow>=2.14,<2.18`` (2.14.1, 2.15.1, 2.16.2,
2.17.1, each with the Python and CUDA source ``envlock resolve`` picks). In
each run, interleaved so every command sees the same machine load, and every
command cold (a fresh UV_CACHE_DIR each, no resolver cache), all against the
same index (``envlock.index.config.index_url()``, the machine's pip/uv configuration):

- ``envlock ci lock SPEC -o TMP --jobs 4``: the console script, a fresh
  process, the four bundles plus cells.json and docker-bake.json;
- for each cell, ``envlock lock <cell spec> --python X --cuda-source Y -o TMP``,
  the exact command the cell stands for.

With ``--warm`` the index is taken out of the measurement: one ``ci lock``
fills a uv cache first, and every timed command gets its own copy of that
cache and ``--offline`` (uv answers from the cache, no network), so what is
left is envlock and uv themselves. Without it the index is part of every
run; through the index this machine reaches, two pip-CUDA locks at once take
longer than the two one after the other (the index's throughput is shared),
so no parallelism can show there.

Goal: the median ``ci lock`` within 1.5x of the median of the slowest
single cell (the cells run in parallel). The load average is read from
/proc/loadavg before and after; this machine's cores are shared.
Prints a JSON document (and writes it to --out when given).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
SPEC = "tensorflow>=2.14,<2.18"
GOAL = 1.5


def _loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().strip()
    except OSError:
        return "unknown"


def _env(cache: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UV_")}
    env["UV_CACHE_DIR"] = cache
    return env


def _timed(cmd: list[str], cache: str, cwd: str, warm: str | None = None) -> float:
    if warm is not None:
        shutil.copytree(warm, cache, symlinks=True)
        cmd = [*cmd, "--offline"]
    start = time.perf_counter()
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=_env(cache), cwd=cwd, check=False
    )
    took = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    return took


def _cells() -> list[dict[str, Any]]:
    proc = subprocess.run(
        [str(VENV_BIN / "envlock"), "ci", "matrix", SPEC, "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    cells: list[dict[str, Any]] = json.loads(proc.stdout)
    return cells


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--warm", action="store_true", help="every command offline, on a copy of a filled cache"
    )
    args = parser.parse_args(argv)
    envlock = str(VENV_BIN / "envlock")
    cells = _cells()
    if len(cells) != 4:
        raise SystemExit(f"expected 4 cells of {SPEC}, got {[c['id'] for c in cells]}")
    load_before = _loadavg()
    ci_times: list[float] = []
    single: dict[str, list[float]] = {c["id"]: [] for c in cells}
    with tempfile.TemporaryDirectory(prefix="envlock-bench-ci-") as tmp:
        warm: str | None = None
        if args.warm:
            warm = str(Path(tmp) / "uv-warm")
            _timed([envlock, "ci", "lock", SPEC, "-o", str(Path(tmp) / "fill")], warm, tmp)
        for run in range(args.runs):
            base = Path(tmp) / f"run{run}"
            base.mkdir()
            ci_times.append(
                _timed(
                    [envlock, "ci", "lock", SPEC, "-o", str(base / "ci"), "--jobs", str(args.jobs)],
                    str(base / "uv-ci"),
                    tmp,
                    warm,
                )
            )
            for cell in cells:
                single[cell["id"]].append(
                    _timed(
                        [envlock, "lock", cell["spec"], "--python", cell["python"]]
                        + ["--cuda-source", cell["cuda_source"], "-o", str(base / cell["id"])],
                        str(base / f"uv-{cell['id']}"),
                        tmp,
                        warm,
                    )
                )
            print(
                f"run {run + 1}/{args.runs}: ci lock {ci_times[-1]:.2f} s; "
                + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in single.items()),
                file=sys.stderr,
            )
    medians = {k: round(statistics.median(v), 3) for k, v in single.items()}
    slowest = max(medians, key=lambda k: medians[k])
    ci_median = round(statistics.median(ci_times), 3)
    ratio = round(ci_median / medians[slowest], 2)
    result: dict[str, Any] = {
        "benchmark": "ci lock of 4 cells vs the slowest single cell's lock",
        "command": "bench/ci_lock.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "spec": SPEC,
        "cells": [c["id"] for c in cells],
        "runs": args.runs,
        "jobs": args.jobs,
        "index": "offline, a copy of a filled uv cache per command" if args.warm else "network",
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "loadavg_before": load_before,
            "loadavg_after": _loadavg(),
            "note": "cores shared with other work running at the same time",
        },
        "ci_lock_s": {"median": ci_median, "runs": [round(t, 3) for t in ci_times]},
        "single_lock_s": {
            k: {"median": medians[k], "runs": [round(t, 3) for t in v]} for k, v in single.items()
        },
        "slowest_single": slowest,
        "ratio": ratio,
        "goal": GOAL,
        "ok": ratio <= GOAL,
    }
    text = json.dumps(result, indent=2) + "\n"
    sys.stdout.write(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
