"""Benchmark: ``envlock lock`` against raw ``uv pip compile`` and ``pip-compile``.

    .venv/bin/python bench/lock.py [--runs 5] [--pip-compile-runs 3] [--out FILE]

All in one run, interleaved run by run so every tool sees the same machine
load, every run cold (no resolver cache: a fresh UV_CACHE_DIR for envlock,
``--no-cache`` for raw uv, a fresh ``--cache-dir`` for pip-compile), all
against the same index (``envlock.index.config.index_url()``), all for the same
target and closure:

- ``envlock lock tensorflow==2.15 --python 3.11 -o TMP`` (system CUDA source,
  42 packages) and ``--cuda-source pip`` (tensorflow[and-cuda], 54 packages):
  wall time of the console script, a fresh process each time, including
  resolve, lock, render and the atomic write of the bundle;
- raw ``uv pip compile --generate-hashes`` of what envlock asked its resolver
  for (the lock's ``top_requirements``, e.g. ``tensorflow[and-cuda]==2.15.1``)
  for the target envlock locked for (``--python-version`` and
  ``--python-platform`` from the lock's Python and OS, as envlock's uv engine
  passes them; wheels only): the same closure, the same target;
- ``pip-compile --generate-hashes`` (pip-tools, installed into a throw-away
  venv under /tmp, never into .venv) of the same pip-source requirements
  (pip-compile cannot target another platform; this machine is Linux x86_64
  with CPython 3.11, the same target). ``--pip-compile-runs 0`` leaves it out.

Goals: envlock at most 1.5x raw uv; at least 20x faster than pip-compile.
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
PIPTOOLS_VENV = Path(tempfile.gettempdir()) / "envlock-bench-piptools"
PYTHON = "3.11"


def _index() -> str:
    sys.path.insert(0, str(ROOT))
    from envlock.index.config import index_url

    return index_url(None)


def _uv_target(locked: dict[str, Any]) -> list[str]:
    """The flags envlock's uv engine targets the lock with, from ``envlock lock --json``."""
    from envlock.lockplatform import Target

    res = locked["resolution"]
    target = Target.for_lock(res["python"], res["os"])
    return ["--python-version", target.python, "--python-platform", target.uv_platform]


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env.update(extra)
    return env


def _timed(cmd: list[str], env: dict[str, str], cwd: str) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, check=False)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    return took, proc.stdout


def ensure_pip_tools() -> Path:
    exe = PIPTOOLS_VENV / "bin" / "pip-compile"
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "venv", str(PIPTOOLS_VENV)], check=True)
        subprocess.run(
            [str(PIPTOOLS_VENV / "bin" / "python"), "-m", "pip", "install", "-q", "pip-tools"],
            check=True,
        )
    return exe


def _version(cmd: list[str]) -> str:
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr) else "?"


def _count_packages(path: Path) -> int:
    return sum(
        1
        for line in path.read_text(encoding="utf-8").splitlines()
        if "==" in line and not line.startswith((" ", "#"))
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pip-compile-runs", type=int, default=3)
    parser.add_argument("--out")
    parser.add_argument(
        "--cases",
        nargs="+",
        choices=("system", "pip", "mix"),
        default=["system", "pip"],
        help="mix: tensorflow 2.21.0 with torch 2.15.0 (CUDA 12 framework, CUDA 13 wheels)",
    )
    args = parser.parse_args()
    if args.runs < 1 or args.pip_compile_runs < 0:
        parser.error("--runs must be at least 1 and --pip-compile-runs at least 0")

    from uv import find_uv_bin

    uv = str(find_uv_bin())
    index = _index()
    cert = "/etc/ssl/certs/ca-certificates.crt"
    pip_compile = ensure_pip_tools() if args.pip_compile_runs else None
    work = Path(tempfile.mkdtemp(prefix="envlock-bench-lock-"))

    times: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    targets: dict[str, dict[str, Any]] = {}

    def record(name: str, seconds: float) -> None:
        times.setdefault(name, []).append(seconds)
        print(f"{name}: {seconds:.2f} s", file=sys.stderr, flush=True)

    envlock = str(VENV_BIN / "envlock")
    try:
        for run in range(args.runs):
            for source in args.cases:
                cache = work / f"uv-cache-{source}-{run}"
                out = work / f"bundle-{source}-{run}"
                spec = ["tensorflow==2.15", "--python", PYTHON, "--cuda-source", source]
                if source == "mix":  # issue 40: the CUDA 13 wheels of torch read too
                    spec = ["tensorflow==2.21.0", "--with", "torch==2.15.0", "--python", "3.12"]
                cmd = [envlock, "lock", *spec, "-o", str(out), "--json"]
                env = dict(os.environ, UV_CACHE_DIR=str(cache))
                took, stdout = _timed(cmd, env, str(work))
                record(f"envlock lock ({source})", took)
                counts[f"envlock lock ({source})"] = _count_packages(out / "requirements.txt")
                shutil.rmtree(cache, ignore_errors=True)
                # raw uv gets what envlock asked its resolver for, for envlock's target
                locked = json.loads(stdout)
                wanted = {
                    "requirements": locked["top_requirements"],
                    "target": _uv_target(locked),
                }
                if targets.setdefault(source, wanted) != wanted:
                    raise SystemExit(f"envlock's closure or target changed between runs: {wanted}")
                req_in = work / f"{source}.in"
                req_in.write_text("".join(r + "\n" for r in wanted["requirements"]), "utf-8")

                raw_out = work / f"uv-{source}.txt"
                cmd = [
                    uv,
                    "pip",
                    "compile",
                    "--no-config",
                    "--system-certs",
                    "--no-cache",
                    "--quiet",
                    "--default-index",
                    index,
                    *wanted["target"],
                    "--only-binary",
                    ":all:",
                    "--generate-hashes",
                    "-o",
                    str(raw_out),
                    str(req_in),
                ]
                record(f"uv pip compile ({source})", _timed(cmd, _clean_env(), str(work))[0])
                counts[f"uv pip compile ({source})"] = _count_packages(raw_out)
        for run in range(args.pip_compile_runs):
            assert pip_compile is not None
            cache = work / f"pip-cache-{run}"
            out = work / "pip-compile.txt"
            cmd = [
                str(pip_compile),
                "--quiet",
                "--generate-hashes",
                "--no-strip-extras",
                "--index-url",
                index,
                "--cache-dir",
                str(cache),
                "-o",
                str(out),
                str(work / "pip.in"),
            ]
            env = _clean_env(PIP_CONFIG_FILE=os.devnull, PIP_CERT=cert)
            record("pip-compile (pip)", _timed(cmd, env, str(work))[0])
            counts["pip-compile (pip)"] = _count_packages(out)
            shutil.rmtree(cache, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    med = {k: statistics.median(v) for k, v in times.items()}
    ratios = {
        f"envlock/uv ({case})": med[f"envlock lock ({case})"] / med[f"uv pip compile ({case})"]
        for case in args.cases
    }
    if "pip-compile (pip)" in med:
        ratios["pip-compile/envlock (pip)"] = med["pip-compile (pip)"] / med["envlock lock (pip)"]
    versions = {"uv": _version([uv, "--version"])}
    if pip_compile is not None:
        versions["pip-compile"] = _version([str(pip_compile), "--version"])
    result: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "load_avg": os.getloadavg(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "versions": versions,
        "targets": targets,
        "runs": times,
        "median_s": med,
        "packages": counts,
        "ratios": ratios,
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
