"""Peer comparison: uv's ``--torch-backend auto`` and ``envlock resolve`` for one driver.

    .venv/bin/python bench/torch_backend.py [--release 2.11] [--driver 535.104.05 ...]

For each driver, uv is run as its users run it, with the driver given as
``UV_CUDA_DRIVER_VERSION`` (uv reads it in place of the machine's):
``uv pip compile - --torch-backend auto`` with ``torch==X`` on stdin, ``-v``. uv
then asks PyTorch's per-backend indexes in its order of preference (newest CUDA the
driver runs first); those indexes cannot be reached from here, so the order uv asked
them in (its debug log's GET requests for ``/whl/<backend>/torch/``) is what is
recorded, and uv's pick is the first backend in that order that has a build of the
release, by the builds matrices/torch.toml lists (the configured index's and those
of PyTorch's published table). envlock's answer is ``resolve torch==X --driver D``,
offline. Neither names a GPU: uv cannot take one, and its pick depends on the
machine it runs on unless the variable is set, which is what makes its lock differ
between machines; envlock's answer is for the declared driver wherever it runs.

Prints a JSON document: per driver, uv's order, uv's pick, envlock's version and CUDA.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from envlock.matrix import builds  # noqa: E402
from envlock.model import Constraints  # noqa: E402
from envlock.resolve import resolve  # noqa: E402

DRIVERS = ("525.60.13", "535.104.05", "550.54.15", "570.86.10", "580.65.06")
BACKEND = re.compile(r"/whl/(cu[0-9]+)/torch/")


def uv_order(uv: str, release: str, driver: str) -> list[str]:
    env = {**os.environ, "UV_CUDA_DRIVER_VERSION": driver, "UV_HTTP_RETRIES": "0"}
    args = [uv, "pip", "compile", "-", "--torch-backend", "auto", "--no-cache", "-v"]
    args += ["--python-version", "3.12", "--system-certs"]
    proc = subprocess.run(
        args, input=f"torch=={release}.*\n", env=env, capture_output=True, text=True, timeout=120
    )
    order: list[str] = []
    for backend in BACKEND.findall(proc.stderr):
        if backend not in order:
            order.append(backend)
    return order


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--release", default="2.11")
    parser.add_argument("--driver", action="append", default=[])
    args = parser.parse_args()
    uv = shutil.which("uv", path=str(ROOT / ".venv" / "bin")) or shutil.which("uv")
    if uv is None:
        print("uv is not installed", file=sys.stderr)
        return 3
    have = {
        b.build
        for b in builds.load("torch").builds
        if f"{b.version.major}.{b.version.minor}" == args.release
    }
    rows = []
    for driver in args.driver or DRIVERS:
        order = uv_order(uv, args.release, driver)
        pick = next((b for b in order if b in have), None)
        res = resolve(Constraints(spec=f"torch=={args.release}", driver=driver))
        mine = "cu" + res.cuda.replace(".", "")
        rows.append(
            {
                "driver": driver,
                "uv_order": order,
                "uv_pick": pick,
                "envlock": res.version,
                "envlock_build": mine,
                "agree": pick == mine,
            }
        )
    version = subprocess.run([uv, "--version"], capture_output=True, text=True).stdout.strip()
    doc = {"release": args.release, "builds_known": sorted(have), "uv": version, "rows": rows}
    print(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
