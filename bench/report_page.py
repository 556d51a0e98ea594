"""Benchmark: 200 signed reports verified and rendered into one page.

    .venv/bin/python bench/report_page.py [--reports 200] [--runs 7] [--out FILE]

Signs ``--reports`` smoke results (a matrix of releases x Pythons x GPUs,
each with its benchmark) with a fresh key into a temporary folder, then,
interleaved run by run:

- ``page_inproc``: ``envlock report page REPORT... --key PUB -o DIR`` through
  ``envlock.cli.main`` in this process (verify every report, render, write
  index.html and summary.json atomically);
- ``page_process``: the same command as a fresh process (imports included);
- peer ``verify_each``: ``envlock verify REPORT --key PUB`` of the same reports
  one by one, in this process (``main`` per report, its table to a buffer).

Prints medians, the ratio page / verify_each, /proc/loadavg before and after,
and the machine, as JSON (also written to --out). The goal: under 2 s.
"""

from __future__ import annotations

import argparse
import contextlib
import io
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GPUS = [("NVIDIA H200", "9.0", 48.0, 670.0), ("NVIDIA A100-SXM4-80GB", "8.0", 18.0, 250.0)]
RELEASES = ["2.9.3", "2.10.1", "2.11.1", "2.12.1", "2.13.1", "2.14.1", "2.15.1", "2.16.2"]
PYTHONS = ["3.9.19", "3.10.14", "3.11.9", "3.12.4"]


def result(i: int) -> dict[str, Any]:
    gpu, cc, fp32, bf16 = GPUS[i % len(GPUS)]
    version = RELEASES[(i // 2) % len(RELEASES)]
    python = PYTHONS[(i // 16) % len(PYTHONS)]
    checks = [
        ("import", "PASS", "imported tensorflow"),
        ("framework_version", "PASS", f"TensorFlow {version} as locked"),
        ("build_cuda", "PASS", "built with CUDA 12.2, as locked"),
        ("build_cudnn", "PASS", "built with cuDNN 8, as locked"),
        ("gpu_visible", "PASS", f"1 GPU(s) visible: {gpu} ({cc})"),
        ("compute_capability", "PASS", f"compute capability {cc} has machine code"),
        ("cudnn_runtime", "PASS", "cuDNN 8.9.7 loaded, major 8 as expected"),
        ("op_on_gpu", "PASS", "MatMul ran on /GPU:0"),
        ("memory_held", "PASS", "memory growth on"),
        ("matmul_speed", "WARN" if i % 7 == 0 else "PASS", "bf16 matmul vs the peak"),
    ]
    return {
        "schema": "envlock.smoke/v1",
        "status": "WARNED" if i % 7 == 0 else "PASSED",
        "framework": "tensorflow",
        "version": version,
        "expected": {"framework": "tensorflow", "version": version, "cuda": "12.2"},
        "build_info": {"cuda_version": "12.2", "cudnn_version": "8"},
        "gpus": [{"name": gpu, "compute_capability": cc, "driver": "580.159.04"}],
        "checks": [{"name": n, "status": s, "reason": r} for n, s, r in checks],
        "benchmark": {
            "device": "gpu:0",
            "gpu": gpu,
            "results": [
                {"op": "matmul", "dtype": "fp32", "math": "fp32", "tflops": fp32 + i % 5},
                {"op": "matmul", "dtype": "bf16", "math": "bf16", "tflops": bf16 - i % 11},
            ],
        },
        "settings": {},
        "host": {"hostname": f"gpu-{i}", "python": python, "driver": "580.159.04"},
        "environment": {"distributions": [f"tensorflow=={version}", f"cell-{i}==1.0"]},
        "duration_s": 30.0,
    }


def make_reports(folder: Path, n: int) -> tuple[list[str], Path]:
    from envlock.report import envelope_bytes, keys, sign_result

    pair = keys.write_keypair(folder / "bench")
    paths = []
    for i in range(n):
        env = sign_result(result(i), pair.private_path, lock_dir=None, image_id=None)
        path = folder / f"r{i:03d}.intoto.json"
        path.write_bytes(envelope_bytes(env))
        paths.append(str(path))
    return paths, pair.public_path


def quiet_main(argv: list[str]) -> int:
    from envlock.cli import main

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return main(argv)


def loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().strip()
    except OSError:
        return "?"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reports", type=int, default=200)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    load_before = loadavg()
    with tempfile.TemporaryDirectory(prefix="envlock-bench-page-") as tmp:
        folder = Path(tmp)
        reports, pub = make_reports(folder, args.reports)
        argv = ["report", "page", *reports, "--key", str(pub), "-o", str(folder / "page")]
        envlock = str(Path(sys.executable).parent / "envlock")
        quiet_main(argv)  # warm: imports, the template compiled once
        inproc, process, verify_each = [], [], []
        for _ in range(args.runs):
            t = time.perf_counter()
            code = quiet_main(argv)
            inproc.append(time.perf_counter() - t)
            assert code == 0, f"report page exit {code}"
            t = time.perf_counter()
            subprocess.run([envlock, *argv], check=True, capture_output=True)
            process.append(time.perf_counter() - t)
            t = time.perf_counter()
            for r in reports:
                assert quiet_main(["verify", r, "--key", str(pub)]) == 0
            verify_each.append(time.perf_counter() - t)
        size = (folder / "page" / "index.html").stat().st_size
    med = {
        k: statistics.median(v)
        for k, v in (
            ("page_inproc", inproc),
            ("page_process", process),
            ("verify_each", verify_each),
        )
    }
    doc = {
        "bench": "report_page",
        "reports": args.reports,
        "runs": args.runs,
        "index_html_bytes": size,
        "median_s": {k: round(v, 4) for k, v in med.items()},
        "samples_s": {
            "page_inproc": [round(x, 4) for x in inproc],
            "page_process": [round(x, 4) for x in process],
            "verify_each": [round(x, 4) for x in verify_each],
        },
        "ratio_page_inproc_to_verify_each": round(med["page_inproc"] / med["verify_each"], 3),
        "goal_s": 2.0,
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        },
        "loadavg_before": load_before,
        "loadavg_after": loadavg(),
    }
    text = json.dumps(doc, indent=2) + "\n"
    sys.stdout.write(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
