"""Benchmark: envlock restore --in-place of an unchanged environment against uv pip sync.

    .venv/bin/python bench/restore_inplace.py [--bundle DIR] [--venv V] [--runs 7] [--out FILE]

Without --bundle, locks ``tensorflow==2.15 --python 3.11`` (the index from
pip's configuration) into a temporary folder; without --venv, builds the venv
once with ``envlock restore DIR --venv V --allow-cpu``. Then, interleaved run by
run so both see the same machine load, against that unchanged venv:

- ``envlock restore DIR --venv V --in-place --allow-cpu --json`` (console
  script, a fresh process): read and check the bundle, doctor's probe in V's
  interpreter (every installed distribution), the plan (nothing differs), no
  install, no undo state saved;
- the peer: ``uv pip sync --python V/bin/python --require-hashes
  DIR/requirements.txt`` (uv's own check that the environment matches, warm
  cache, the same index).

Medians (goal: envlock within 2 s) and the ratio to the peer; prints a JSON
document (and writes it to --out).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

VENV_BIN = Path(sys.executable).parent


def timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(argv)}\n{proc.stderr[-3000:]}")
    return took, proc.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bundle", type=Path)
    ap.add_argument("--venv", type=Path)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    envlock = str(VENV_BIN / "envlock")
    from envlock.index.config import index_url
    from envlock.lock.uv import uv_bin

    with tempfile.TemporaryDirectory(prefix="envlock-bench-inplace-") as tmp:
        work = Path(tmp)
        bundle = args.bundle or work / "tf215"
        if args.bundle is None:
            timed([envlock, "lock", "tensorflow==2.15", "--python", "3.11", "-o", str(bundle)])
        venv = args.venv or work / "venv"
        if args.venv is None:
            took, _ = timed(
                [envlock, "restore", str(bundle), "--venv", str(venv), "--allow-cpu", "--json"]
            )
            print(f"venv built by envlock restore in {took:.1f} s", file=sys.stderr)
        python = str(venv / "bin" / "python")
        env = dict(os.environ, UV_SYSTEM_CERTS="1")
        env.pop("UV_NATIVE_TLS", None)
        ours: list[float] = []
        peer: list[float] = []
        load: list[float] = [round(os.getloadavg()[0], 2)]
        for run in range(args.runs):
            took, out = timed(
                [envlock, "restore", str(bundle), "--venv", str(venv), "--in-place"]
                + ["--allow-cpu", "--json"]
            )
            doc = json.loads(out)
            if doc.get("changed"):
                sys.exit(f"the venv was not unchanged: {doc.get('changed')}")
            ours.append(took)
            took, _ = timed(
                [uv_bin(), "pip", "sync", "--python", python, "--require-hashes", "--no-config"]
                + ["--index-url", index_url(None), str(bundle / "requirements.txt")],
                env,
            )
            peer.append(took)
            load.append(round(os.getloadavg()[0], 2))
            print(f"run {run + 1}: envlock {ours[-1]:.2f} s, uv {peer[-1]:.2f} s", file=sys.stderr)
        result: dict[str, Any] = {
            "machine": f"{platform.machine()} {os.cpu_count()} CPUs, {platform.platform()}",
            "runs": args.runs,
            "envlock_s": [round(x, 3) for x in ours],
            "uv_pip_sync_s": [round(x, 3) for x in peer],
            "envlock_median_s": round(statistics.median(ours), 3),
            "uv_pip_sync_median_s": round(statistics.median(peer), 3),
            "ratio": round(statistics.median(ours) / statistics.median(peer), 2),
            "goal_s": 2.0,
            "load_average_1min": load,
        }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
