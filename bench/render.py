"""Benchmark: rendering a bundle, and re-running bootstrap.sh on a ready venv.

    .venv/bin/python bench/render.py [--runs 9] [--bundle DIR] [--out FILE]

1. ``envlock render DIR --json`` on the TF 2.15 golden lock (tests/golden/render/
   tf2.15-system), a fresh process each time, against ``python -c pass`` from
   the same interpreter, interleaved run by run; medians and their ratio. Also
   ``render_bundle`` alone, in one warm process (median of many calls).
2. ``bootstrap.sh --no-smoke`` on a venv it already made (the requirements'
   sha256 matches, so it installs nothing) against what a script without that
   stamp does on the same venv: ``pip install --require-hashes --no-deps -r
   requirements.txt``, which answers "already satisfied" package by package.
   Needs a bootstrapped bundle: --bundle DIR, else one is rendered into a
   temporary folder and bootstrapped once first (not timed; downloads TF 2.15).

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
CASE = ROOT / "tests" / "golden" / "render" / "tf2.15-system"


def timed(argv: list[str], **kwargs: Any) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kwargs)
    return time.perf_counter() - start


def summary(values: list[float]) -> dict[str, Any]:
    return {
        "median_s": round(statistics.median(values), 4),
        "min_s": round(min(values), 4),
        "max_s": round(max(values), 4),
        "runs": len(values),
    }


def bench_render(runs: int) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory() as tmp:
        bundle = Path(tmp)
        for name in ("pylock.toml", "requirements.txt"):
            shutil.copy(CASE / name, bundle / name)
        render_cmd = [str(VENV_BIN / "envlock"), "render", str(bundle), "--json"]
        peer_cmd = [sys.executable, "-c", "pass"]
        timed(render_cmd, env=env)  # warm-up: bytecode, matrix cache
        timed(peer_cmd, env=env)
        ours, peer = [], []
        for _ in range(runs):
            ours.append(timed(render_cmd, env=env))
            peer.append(timed(peer_cmd, env=env))
        code = (
            "import statistics, time\n"
            "from pathlib import Path\n"
            "from envlock.lock import read_lock\n"
            "from envlock.render import RenderOptions, render_bundle\n"
            f"d = Path({str(bundle)!r})\n"
            "lock = read_lock(d)\n"
            "files = {n: (d / n).read_bytes() for n in ('pylock.toml', 'requirements.txt')}\n"
            "render_bundle(lock, RenderOptions(), files)\n"
            "t = []\n"
            "for _ in range(50):\n"
            "    s = time.perf_counter(); render_bundle(lock, RenderOptions(), files)\n"
            "    t.append(time.perf_counter() - s)\n"
            "print(statistics.median(t))\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], check=True, capture_output=True, text=True
        )
        in_process = float(out.stdout.strip())
    return {
        "command": " ".join(["envlock", "render", "DIR", "--json"]),
        "envlock_render": summary(ours),
        "peer_python_c_pass": summary(peer),
        "ratio": round(statistics.median(ours) / statistics.median(peer), 2),
        "render_bundle_in_process_median_s": round(in_process, 4),
    }


def ensure_bundle(bundle: Path | None, keep: list[Path]) -> Path:
    if bundle is not None:
        return bundle
    folder = Path(tempfile.mkdtemp(prefix="envlock-bench-"))
    keep.append(folder)
    for name in ("pylock.toml", "requirements.txt"):
        shutil.copy(CASE / name, folder / name)
    subprocess.run([str(VENV_BIN / "envlock"), "render", str(folder)], check=True)
    subprocess.run(["bash", str(folder / "bootstrap.sh"), "--no-smoke"], check=True)
    return folder


def bench_bootstrap(bundle: Path, runs: int) -> dict[str, Any]:
    venv = bundle / ".venv"
    if not (venv / ".envlock-requirements.sha256").is_file():
        raise SystemExit(f"{bundle}: no bootstrapped .venv (run bootstrap.sh there first)")
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    ours_cmd = ["bash", str(bundle / "bootstrap.sh"), "--no-smoke"]
    peer_cmd = [
        str(venv / "bin" / "python"),
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "--require-hashes",
        "--no-deps",
        "-r",
        str(bundle / "requirements.txt"),
    ]
    timed(ours_cmd, env=env)
    timed(peer_cmd, env=env)
    ours, peer = [], []
    for _ in range(runs):
        ours.append(timed(ours_cmd, env=env))
        peer.append(timed(peer_cmd, env=env))
    return {
        "command": "bootstrap.sh --no-smoke (venv ready, requirements unchanged)",
        "bootstrap_rerun": summary(ours),
        "peer_pip_install_already_satisfied": summary(peer),
        "ratio": round(statistics.median(ours) / statistics.median(peer), 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--bundle", type=Path, help="a bundle whose .venv bootstrap.sh made")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    keep: list[Path] = []
    try:
        result = {
            "machine": {
                "cpus": os.cpu_count(),
                "load_avg": os.getloadavg(),
                "python": platform.python_version(),
                "platform": platform.platform(),
            },
            "render": bench_render(args.runs),
            "bootstrap": bench_bootstrap(ensure_bundle(args.bundle, keep), args.runs),
        }
    finally:
        for folder in keep:
            shutil.rmtree(folder, ignore_errors=True)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
