"""Benchmark: reading a wheel's facts by range requests, and the full matrix refresh.

    .venv/bin/python bench/refresh.py [--runs 5] [--refresh-runs 3] [--download-runs 1]
                                       [--release 2.15.1] [--index-url URL] [--out FILE]

1. Range read: the build_info.py and METADATA of one release's wheel read
   by the standard zipfile through HTTP range requests (tail, central
   directory, two members), median of --runs, with the requests and bytes it took.
2. Peer: downloading the same wheel whole (what pip would fetch to learn the
   same facts), median of --download-runs (0 skips it; it is ~500 MB each).
3. Full refresh: ``envlock matrix refresh -o TMP --json`` as a user runs it,
   wall time including interpreter start, and its CPU time (user + system),
   median of --refresh-runs; its output must be byte-identical across runs.

The load average before and after is recorded, and whether the refresh
output equals the committed matrices/tensorflow.toml byte for byte.

Prints a JSON document (and writes it to --out when given).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _wheel_for(release: str, index: str) -> Any:
    from packaging.version import Version

    from envlock.index import http
    from envlock.matrix.refresh import candidates, project_files

    sess = http.session()
    try:
        for c in candidates(project_files(sess, index)):
            if c.version == Version(release):
                return c.chosen
    finally:
        sess.close()
    raise SystemExit(f"no Linux x86_64 wheel for tensorflow {release}")


def range_read(chosen: Any, index: str) -> dict[str, Any]:
    from envlock.index import http
    from envlock.matrix.refresh import read_wheel

    sess = http.session()
    try:
        start = time.perf_counter()
        facts = read_wheel(sess, index, chosen)
        seconds = time.perf_counter() - start
    finally:
        sess.close()
    if not facts.build_info.get("cuda_version"):
        raise SystemExit("the range read found no cuda_version")
    return {"seconds": seconds, "requests": facts.requests, "bytes": facts.bytes_read}


def download(chosen: Any, index: str) -> dict[str, Any]:
    from envlock.index import http

    sess = http.session()
    h = hashlib.sha256()
    size = 0
    try:
        start = time.perf_counter()
        resp = http.get(sess, chosen.url, index=index, stream=True)
        for chunk in resp.iter_content(1 << 20):
            h.update(chunk)
            size += len(chunk)
        seconds = time.perf_counter() - start
    finally:
        sess.close()
    if h.hexdigest() != chosen.sha256:
        raise SystemExit("downloaded wheel does not match the index's sha256")
    return {"seconds": seconds, "bytes": size}


def full_refresh(index_arg: list[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "tensorflow.toml"
        cmd = [
            str(ROOT / ".venv" / "bin" / "envlock"),
            "matrix",
            "refresh",
            "-o",
            str(out),
            "--json",
            *index_arg,
        ]
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - usage.ru_utime) + (after.ru_stime - usage.ru_stime)
        if proc.returncode != 0:
            raise SystemExit(f"refresh failed ({proc.returncode}): {proc.stderr}")
        summary = json.loads(proc.stdout)
        digest = hashlib.sha256(out.read_bytes()).hexdigest()
    return {
        "seconds": seconds,
        "cpu": cpu,
        "digest": digest,
        **{k: summary[k] for k in ("releases", "requests", "bytes_read")},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--refresh-runs", type=int, default=3)
    ap.add_argument("--download-runs", type=int, default=1)
    ap.add_argument("--release", default="2.15.1")
    ap.add_argument("--index-url")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    load_before = os.getloadavg()

    from envlock.index.config import index_url

    index = index_url(args.index_url)
    index_arg = ["--index-url", args.index_url] if args.index_url else []
    chosen = _wheel_for(args.release, index)

    reads = [range_read(chosen, index) for _ in range(args.runs)]
    downloads = [download(chosen, index) for _ in range(args.download_runs)]
    refreshes = [full_refresh(index_arg) for _ in range(args.refresh_runs)]
    if len({r["digest"] for r in refreshes}) > 1:
        raise SystemExit("full refresh output differed between runs")

    read_median = statistics.median(r["seconds"] for r in reads)
    result: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "load_average": {
            "before": [round(x, 2) for x in load_before],
            "after": [round(x, 2) for x in os.getloadavg()],
        },
        "release": args.release,
        "wheel": chosen.filename,
        "wheel_size": chosen.size,
        "range_read": {
            "runs": [round(r["seconds"], 3) for r in reads],
            "median_s": round(read_median, 3),
            "requests": reads[0]["requests"],
            "bytes": reads[0]["bytes"],
        },
    }
    if downloads:
        dl_median = statistics.median(d["seconds"] for d in downloads)
        result["download"] = {
            "runs": [round(d["seconds"], 2) for d in downloads],
            "median_s": round(dl_median, 2),
            "bytes": downloads[0]["bytes"],
            "ratio_to_range_read": round(dl_median / read_median, 1),
        }
    if refreshes:
        committed = hashlib.sha256(
            (ROOT / "envlock" / "data" / "matrices" / "tensorflow.toml").read_bytes()
        ).hexdigest()
        result["full_refresh"] = {
            "runs": [round(r["seconds"], 2) for r in refreshes],
            "median_s": round(statistics.median(r["seconds"] for r in refreshes), 2),
            "cpu_median_s": round(statistics.median(r["cpu"] for r in refreshes), 2),
            "releases": refreshes[0]["releases"],
            "requests": refreshes[0]["requests"],
            "bytes_read": refreshes[0]["bytes_read"],
            "identical_output": True,
            "sha256": refreshes[0]["digest"],
            "equals_committed": refreshes[0]["digest"] == committed,
        }
    text = json.dumps(result, indent=2) + "\n"
    sys.stdout.write(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
