"""envlock doctor: what drifted in a live venv, and what a training log means."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envlock.doctor.advice import DoctorReport, FindingDict


def register(sub: Any) -> None:
    p = sub.add_parser(
        "doctor",
        help="inspect a live venv against its lock; explain the messages of a training log",
        description="Run a small probe in the venv's interpreter and compare it with the lock: "
        "Python, every installed distribution, TensorFlow's version and build (torch's and "
        "JAX's CUDA build: torch/version.py, the jax-cudaNN-plugin), the driver "
        "against the lock's floor, the GPUs' compute capability, CUDA/cuDNN libraries, "
        "LD_LIBRARY_PATH and CUDA_VISIBLE_DEVICES. Without --lock, the venv is checked "
        "against itself (every Requires-Dist met). Exit 0 no failure, 1 a FAIL, "
        "2 bad input, 3 the probe could not run.",
    )
    p.add_argument("--lock", metavar="DIR", help="the bundle (pylock.toml) to compare against")
    p.add_argument(
        "--venv",
        metavar="PATH",
        help="the venv (or interpreter) to inspect; default: the one DIR was captured from "
        "(on that machine), else DIR/.venv made by bootstrap.sh, else $VIRTUAL_ENV, else "
        "envlock's own interpreter",
    )
    p.add_argument(
        "--log",
        metavar="FILE",
        help="a training log to explain ('-' reads stdin); with only --log, no venv is probed",
    )
    p.add_argument(
        "--freeze",
        metavar="FILE",
        help="judge this package list (pip freeze format, e.g. a platform's published one) "
        "as the environment, against --lock DIR, without a venv: versions, CUDA user "
        "space per framework, the driver floor against --driver, which restore brings "
        "the lock back",
    )
    p.add_argument(
        "--python",
        metavar="X.Y",
        help="with --freeze: the platform's Python (a package list names none)",
    )
    from envlock.commands.options import add_driver_argument, add_gpu_argument

    add_driver_argument(
        p,
        "answer as if the host had this NVIDIA driver (rehearse a driver change before the "
        "platform makes it), as envlock resolve --driver takes it; 'auto' (default) reads "
        "this machine",
    )
    add_gpu_argument(
        p,
        "answer as if the host had this GPU: a name (T4, A100, H100, ...) or a compute "
        "capability (8.0, sm_80), as envlock resolve --gpu takes it; repeatable; 'auto' "
        "adds this machine's GPUs",
    )
    p.add_argument("--allow-cpu", action="store_true", help="no GPU is a warning, not a failure")
    p.add_argument(
        "--deep", action="store_true", help="also hash every installed file against its RECORD"
    )
    p.add_argument("--json", action="store_true", help="print the result document")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from envlock.doctor.runner import DoctorRequest, diagnose

    def progress(line: str) -> None:
        sys.stderr.write(f"envlock doctor: {line}\n")

    from envlock.commands.options import gpus_from_values

    gpus, gpu_auto = gpus_from_values(args.gpu)
    req = DoctorRequest(
        lock=args.lock,
        venv=args.venv,
        log=args.log,
        allow_cpu=args.allow_cpu,
        deep=args.deep,
        driver=args.driver,
        gpus=gpus,
        gpu_auto=gpu_auto,
        freeze=args.freeze,
        python=args.python,
    )
    if req.freeze is not None or req.python is not None:  # a package list, no venv
        from envlock.doctor.platform import diagnose_freeze

        return _finish(args, diagnose_freeze(req))
    return _finish(args, diagnose(req, progress))


def _finish(args: argparse.Namespace, doc: DoctorReport) -> int:
    if args.json:
        from envlock.output import emit_json

        emit_json(doc)
    else:
        sys.stdout.write(describe(doc))
    return 1 if doc["status"] == "FAILED" else 0


FOLDED_SHOWN = 8  # folded findings printed under their root; --json carries all


def describe(doc: DoctorReport) -> str:
    from envlock.output import table

    lines = [
        f"{doc['status']}" + (f": against the lock in {doc['lock']}" if doc.get("lock") else "")
    ]
    interp = doc.get("interpreter")
    if interp:
        python = doc.get("python")
        py = python.get("version", "?") if python else "?"
        lines.append(f"interpreter: {interp['python']} (Python {py}; {interp['reason']})")
    host = doc.get("host")
    if host:
        gpus = ", ".join(f"{g['name']} ({g['compute_capability']})" for g in host["gpus"]) or "none"
        lines.append(f"driver: {host['driver']} ({host['source']}); GPUs: {gpus}")
    if doc.get("freeze"):
        python = doc.get("python")
        said = f"Python {python['version']}" if python else "no Python given"
        lines.append(f"package list: {doc['freeze']} ({said}; no venv probed)")
    if doc.get("log"):
        lines.append(f"log: {doc['log']}")
    lines.append("")
    rows = []
    for f in doc["findings"]:
        rows.append([f["status"], f["check"], f["cause"]])
        folded = f.get("folded", [])
        rows += [["", f"  {g['check']}", g["cause"]] for g in folded[:FOLDED_SHOWN]]
        if len(folded) > FOLDED_SHOWN:
            rows.append(["", f"  ... {len(folded) - FOLDED_SHOWN} more", "(all in --json)"])
    if rows:
        lines.append(table(["status", "check", "cause"], rows).rstrip())
    else:
        lines.append("no findings")
    fixes = _fixes(doc["findings"])
    if fixes:
        lines += ["", "to fix (each command as it stands; 'do:' lines are steps to take by hand):"]
        lines += fixes
    return "\n".join(lines) + "\n"


def _fixes(findings: list[FindingDict]) -> list[str]:
    """Each distinct fix once, under the checks it fixes, the failures first."""
    order = {"FAIL": 0, "WARN": 1, "INFO": 2, "PASS": 3}
    seen: dict[str, list[str]] = {}
    kinds: dict[str, str] = {}
    for f in sorted(findings, key=lambda f: order.get(f["status"], 9)):
        if f["status"] == "PASS" or not f.get("fix"):
            continue
        for i, fix in enumerate([f["fix"], *f.get("alternatives", [])]):
            seen.setdefault(fix, []).append(f["check"])
            kinds.setdefault(fix, "do" if i == 0 and f.get("manual") else "run")
    return [f"  {kinds[fix]}: {fix}    # {', '.join(checks)}" for fix, checks in seen.items()]
