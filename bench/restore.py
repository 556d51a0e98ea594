"""Benchmark: envlock restore from a wheelhouse (smoke included) against a hashed pip install.

    .venv/bin/python bench/restore.py [--bundle DIR] [--wheelhouse WH] [--runs 3] [--out FILE]

Without --bundle, locks ``tensorflow==2.15 --python 3.11`` (the index from
pip's configuration) into a temporary folder; without --wheelhouse, fills one
with ``envlock wheelhouse``. Then, interleaved run by run so both see the
same machine load, each into a fresh venv path:

- ``envlock restore DIR --wheelhouse WH --venv V --allow-cpu --json`` (console
  script: finds Python, ``python -m venv``, ``uv pip install --require-hashes
  --no-deps --no-index --offline --find-links WH``, the bundle's smoke harness
  in the new venv, the link switch), with a fresh, empty uv cache every run
  (no head start from earlier runs);
- the peer: ``python3.X -m venv V2`` then ``V2/bin/pip install --no-index
  --find-links WH --require-hashes -r DIR/requirements.txt`` (no smoke).

Medians and their ratio (goal: restore within 1.2x of the peer); prints a JSON
document (and writes it to --out).
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

VENV_BIN = Path(sys.executable).parent


def timed(argv: list[str], env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(argv)}\n{proc.stderr[-3000:]}")
    return took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bundle", type=Path)
    ap.add_argument("--wheelhouse", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    envlock = str(VENV_BIN / "envlock")
    with tempfile.TemporaryDirectory(prefix="envlock-bench-restore-") as tmp:
        work = Path(tmp)
        bundle = args.bundle
        if bundle is None:
            bundle = work / "tf215"
            timed([envlock, "lock", "tensorflow==2.15", "--python", "3.11", "-o", str(bundle)])
        wh = args.wheelhouse
        if wh is None:
            wh = work / "wh"
            timed([envlock, "wheelhouse", str(bundle), "-o", str(wh)])
        from envlock.lock.pylock import read_lock
        from envlock.venv.restore import find_python

        minor = read_lock(bundle).resolution.python
        python = find_python(minor, None)
        restore: list[float] = []
        pip: list[float] = []
        load: list[float] = [round(os.getloadavg()[0], 2)]  # other work shares the machine
        for run in range(args.runs):
            env = dict(os.environ, UV_CACHE_DIR=str(work / f"uv-cache-{run}"))
            venv = work / f"restored-{run}"
            restore.append(
                timed(
                    [envlock, "restore", str(bundle), "--wheelhouse", str(wh)]
                    + ["--venv", str(venv), "--allow-cpu", "--json"],
                    env,
                )
            )
            peer = work / f"pip-{run}"
            start = time.perf_counter()
            timed([python, "-m", "venv", str(peer)])
            timed(
                [str(peer / "bin" / "pip"), "install", "-q", "--no-index", "--find-links", str(wh)]
                + ["--require-hashes", "-r", str(bundle / "requirements.txt")]
            )
            pip.append(time.perf_counter() - start)
            for path in (venv, *work.glob(f"restored-{run}.envlock-*"), peer):
                if path.is_symlink() or path.is_file():
                    path.unlink()
                elif path.is_dir():
                    shutil.rmtree(path)
            shutil.rmtree(work / f"uv-cache-{run}", ignore_errors=True)
            load.append(round(os.getloadavg()[0], 2))
            print(
                f"run {run + 1}: restore {restore[-1]:.2f} s, pip {pip[-1]:.2f} s", file=sys.stderr
            )
        wheels = sorted(p for p in wh.iterdir() if p.suffix == ".whl")
        doc: dict[str, Any] = {
            "machine": f"{platform.machine()} {os.cpu_count()} CPUs, {platform.platform()}",
            "python": python,
            "wheels": len(wheels),
            "wheel_bytes": sum(p.stat().st_size for p in wheels),
            "runs": args.runs,
            "restore_s": [round(x, 2) for x in restore],
            "pip_s": [round(x, 2) for x in pip],
            "restore_median_s": round(statistics.median(restore), 2),
            "pip_median_s": round(statistics.median(pip), 2),
            "ratio": round(statistics.median(restore) / statistics.median(pip), 3),
            "goal_ratio": 1.2,
            "load_average_1min": load,  # before the first run, then after each
        }
    text = json.dumps(doc, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
