"""Benchmark: ``envlock capture -r FREEZE --os-info FILE`` of a real Colab freeze
against raw ``uv pip compile`` of the same lockable lines.

    .venv/bin/python bench/capture.py [--runs 3] [--out FILE]

Warm cache for both (uv's default cache; envlock reads the index's PEP 691 pages
anew each run, as it always does): one capture first as a warm-up, which also
gives the lines to compare with, the lock's ``top_requirements`` (the freeze less
the lines left out, tensorflow as ``tensorflow[and-cuda]==2.20.0``, the nvidia
lines to the and-cuda pins). Then, interleaved run by run:

- ``envlock capture -r tests/fixtures/platforms/colab-gpu-2026-04-24-pip-freeze.txt
  --os-info ...-os-info.txt -o TMP``: a fresh process each time; everything a
  capture does (PEP 691 pages of ~720 projects, Python, triage, the resolver runs
  that leave out dependents of left-out lines, the CUDA facts, the bundle write);
- ``uv pip compile --generate-hashes`` of those lines, with the flags envlock's uv
  engine passes (``--python-version 3.12``, ``--python-platform``, the same index;
  source archives allowed, as envlock locks them since #41): one resolver run of
  the final set.

Prints a JSON document with the medians and the ratio (and writes it to --out).
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

import tomllib

ROOT = Path(__file__).resolve().parent.parent
PLATFORMS = ROOT / "tests" / "fixtures" / "platforms"
FREEZE = PLATFORMS / "colab-gpu-2026-04-24-pip-freeze.txt"
OS_INFO = PLATFORMS / "colab-gpu-2026-04-24-os-info.txt"


def _capture(out: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "envlock", "capture", "-r", str(FREEZE), "--os-info",
           str(OS_INFO), "-o", str(out), "--json"]  # fmt: skip
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    took = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"capture failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return took


def _uv(reqs: Path, index: str, out: Path) -> float:
    from envlock.lock.uv import uv_bin
    from envlock.lockplatform import Target

    target = Target.for_lock("3.12", None)
    cmd = [uv_bin(), "pip", "compile", "--no-config", "--quiet", "--default-index", index,
           "--python-version", "3.12", "--python-platform", target.uv_platform,
           "--python", sys.executable, "--no-header",
           "--generate-hashes", str(reqs), "-o", str(out)]  # fmt: skip
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    took = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"uv failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from envlock.index.config import index_url

    index = index_url(None)
    tmp = Path(tempfile.mkdtemp(prefix="envlock-bench-capture-"))
    try:
        warm = tmp / "warm"
        _capture(warm)
        doc = tomllib.loads((warm / "pylock.toml").read_text())
        top = doc["tool"]["envlock"]["top_requirements"]
        left = json.loads((warm / "left-out.json").read_text())
        reqs = tmp / "lockable.txt"
        reqs.write_text("\n".join(top) + "\n")
        _uv(reqs, index, tmp / "uv-warm.txt")
        envlock_s, uv_s = [], []
        for i in range(args.runs):
            envlock_s.append(_capture(tmp / f"run{i}"))
            uv_s.append(_uv(reqs, index, tmp / f"uv{i}.txt"))
        med_e, med_u = statistics.median(envlock_s), statistics.median(uv_s)
        result = {
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python "
            f"{platform.python_version()}",
            "freeze": str(FREEZE.relative_to(ROOT)),
            "lines": left["lines"],
            "locked": left["locked"],
            "left_out": len(left["left_out"]),
            "lockable_requirements": len(top),
            "envlock_capture_s": [round(x, 2) for x in envlock_s],
            "uv_pip_compile_s": [round(x, 2) for x in uv_s],
            "median_envlock_s": round(med_e, 2),
            "median_uv_s": round(med_u, 2),
            "ratio": round(med_e / med_u, 1),
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
