"""Benchmark: ``envlock doctor --log FILE`` on two logs of what doctor reads in all.

    .venv/bin/python bench/doctor_log.py [--runs 5] [--out FILE]

The logs, written to a temporary folder: a million lines of ``Killed`` (what the
endless-stdin test feeds: one line repeated up to doctor's line bound), and 32 MiB
less a line of distinct training-progress lines (every line new: each is searched
with every pattern). Wall time of ``envlock doctor --log FILE --json`` (a fresh
process each time: ``python -m envlock`` in this checkout, so a copy of the script
in another checkout times that one's code), against the peer ``grep -cP`` of
every known-error pattern as one alternation over the same file, interleaved run
by run; medians and their ratio. Prints a JSON document (and writes it to --out).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def timed(argv: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, timeout=600, cwd=ROOT)
    return time.perf_counter() - start, done.returncode


def write_logs(folder: Path) -> dict[str, Path]:
    from envlock.doctor.knownerrors import MAX_LOG_BYTES, MAX_LOG_LINES

    repeated = folder / "killed.log"
    repeated.write_text("Killed\n" * MAX_LOG_LINES, encoding="utf-8")
    distinct = folder / "progress.log"
    rnd = random.Random(0)
    size = 0
    with distinct.open("w", encoding="utf-8") as f:
        for step in range(MAX_LOG_LINES):
            line = (
                f"Epoch {step // 1000 + 1}/100 {step % 1000}/1000 [====>....] - ETA: "
                f"{rnd.randrange(99)}s - loss: {rnd.random():.5f} - accuracy: {rnd.random():.4f}\n"
            )
            if size + len(line) > MAX_LOG_BYTES:
                break
            f.write(line)
            size += len(line)
    return {"repeated": repeated, "distinct": distinct}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", help="also write the JSON here")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from envlock.doctor import knownerrors

    alternation = "(?J)" + "|".join(f"(?:{e.pattern.pattern})" for e in knownerrors.load())
    result: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "python": platform.python_version(),
        "load_before": os.getloadavg(),
        "logs": {},
    }
    with tempfile.TemporaryDirectory(prefix="envlock-bench-log-") as tmp:
        patterns = Path(tmp) / "patterns.txt"
        patterns.write_text(alternation + "\n", encoding="utf-8")
        for kind, log in write_logs(Path(tmp)).items():
            doctor = [sys.executable, "-m", "envlock", "doctor", "--log", str(log), "--json"]
            peer = ["grep", "-cP", "-f", str(patterns), str(log)]
            timed(doctor)  # warm-up: bytecode, the page cache of the log
            runs: dict[str, list[float]] = {"doctor": [], "grep": []}
            codes: set[int] = set()
            for _ in range(args.runs):
                seconds, code = timed(doctor)
                runs["doctor"].append(round(seconds, 2))
                codes.add(code)
                runs["grep"].append(round(timed(peer)[0], 2))
            med = {name: statistics.median(values) for name, values in runs.items()}
            result["logs"][kind] = {
                "bytes": log.stat().st_size,
                "runs": runs,
                "doctor_exit_codes": sorted(codes),
                "median_doctor_s": med["doctor"],
                "median_grep_s": med["grep"],
                "ratio": round(med["doctor"] / med["grep"], 1),
            }
    result["load_after"] = os.getloadavg()
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
