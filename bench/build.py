"""Benchmark: envlock build (cached rebuild) and envlock smoke IMAGE against the docker CLI.

    .venv/bin/python bench/build.py [--bundle DIR] [--runs 5] [--out FILE]

Without --bundle, locks ``tensorflow==2.15`` for the local base image
(tests/docker/setup.sh) into a temporary folder, as the Docker tests do, and
builds it once (that first build is timed too, one run, no peer: it is
dominated by downloading ~560 MB of wheels).

Then, interleaved run by run so both see the same machine load:

- rebuild of the unchanged bundle: ``envlock build DIR --json`` (console script,
  a fresh process: interpreter start, docker-py import, context tar, the
  engine's cache lookups) against ``docker build -q DIR`` (the peer: the CLI
  against the same engine, same cache). Goal: at most 5 s, every cacheable step
  from the cache (read from envlock's own step accounting).
- smoke in the image without GPU: ``envlock smoke IMAGE --gpus none
  --allow-cpu --json`` against ``docker run --rm --network none IMAGE python
  /opt/envlock/envlock_smoke.py --expect ... --allow-cpu`` (the same harness
  started by hand): what envlock's runner adds.

Medians and their ratio; prints a JSON document (and writes it to --out).
The image built here is removed at the end unless --keep.
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
ENVLOCK = str(VENV_BIN / "envlock")
TAG = "envlock-test/bench-build:2.15"
BASE = os.environ.get("ENVLOCK_TEST_BASE_IMAGE", "envlock-test/bookworm-python:1")
CA = "/etc/ssl/certs/ca-certificates.crt"


def timed(argv: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        sys.stderr.write(proc.stderr[-3000:])
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(argv)}")
    return elapsed, proc.stdout


def summary(times: list[float]) -> dict[str, Any]:
    return {
        "median_s": round(statistics.median(times), 3),
        "min_s": round(min(times), 3),
        "max_s": round(max(times), 3),
        "runs": [round(t, 3) for t in times],
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bundle", type=Path, help="an existing bundle folder (default: lock one)")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--out", type=Path)
    p.add_argument("--keep", action="store_true", help="keep the image")
    args = p.parse_args()

    doc: dict[str, Any] = {
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average": [round(x, 2) for x in os.getloadavg()],
        },
        "date": time.strftime("%Y-%m-%d"),
    }
    with tempfile.TemporaryDirectory(prefix="envlock-bench-") as tmp:
        bundle = args.bundle
        if bundle is None:
            bundle = Path(tmp) / "bundle"
            lock = [ENVLOCK, "lock", "tensorflow==2.15", "--python", "3.11"]
            lock += ["--base-image", BASE, "--python-from", "image", "--ca-cert", CA]
            subprocess.run([*lock, "-o", str(bundle)], check=True, capture_output=True)
        first, out = timed(
            [ENVLOCK, "build", str(bundle), "-t", TAG, "--network", "host", "--json"]
        )
        built = json.loads(out)
        doc["first_build"] = {
            "seconds": round(first, 1),
            "steps": built["total_steps"],
            "from_cache": built["cached_steps"],
            "size_mb": round((built["size_bytes"] or 0) / 1e6),
        }

        rebuild_envlock: list[float] = []
        rebuild_docker: list[float] = []
        cached: list[bool] = []
        for _ in range(args.runs):
            t, out = timed(
                [ENVLOCK, "build", str(bundle), "-t", TAG, "--network", "host", "--json"]
            )
            rebuild_envlock.append(t)
            cached.append(bool(json.loads(out)["fully_cached"]))
            t, _ = timed(["docker", "build", "-q", "--network", "host", "-t", TAG, str(bundle)])
            rebuild_docker.append(t)
        doc["rebuild"] = {
            "envlock": summary(rebuild_envlock),
            "docker_cli": summary(rebuild_docker),
            "ratio": round(
                statistics.median(rebuild_envlock) / statistics.median(rebuild_docker), 2
            ),
            "every_run_fully_cached": all(cached),
            "goal_s": 5.0,
        }

        smoke_envlock: list[float] = []
        smoke_docker: list[float] = []
        statuses = set()
        harness = ["/opt/venv/bin/python", "/opt/envlock/envlock_smoke.py"]
        harness += ["--expect", "/opt/envlock/expect.json", "--allow-cpu"]
        for _ in range(args.runs):
            t, out = timed([ENVLOCK, "smoke", TAG, "--gpus", "none", "--allow-cpu", "--json"])
            smoke_envlock.append(t)
            statuses.add(json.loads(out)["status"])
            t, out = timed(["docker", "run", "--rm", "--network", "none", TAG, *harness])
            smoke_docker.append(t)
            statuses.add(json.loads(out)["status"])
        doc["smoke"] = {
            "envlock": summary(smoke_envlock),
            "docker_run": summary(smoke_docker),
            "ratio": round(statistics.median(smoke_envlock) / statistics.median(smoke_docker), 2),
            "statuses": sorted(statuses),
        }
        if not args.keep:
            subprocess.run(["docker", "rmi", "-f", TAG], capture_output=True)
    text = json.dumps(doc, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
