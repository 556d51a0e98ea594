"""envlock doctor: what drifted in a live venv, and what a training log means."""

from __future__ import annotations

import argparse
from typing import Any

from envlock.commands.options import add_driver_argument, add_gpu_argument, gpus_from_values
from envlock.output import finish


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
    p.add_argument(
        "--allow-cpu",
        action="store_true",
        help="the CPU is meant: no GPU (no driver, no GPU listed, TensorFlow's silent CPU "
        "fallback in the environment or in a --log) is a warning, not a failure",
    )
    p.add_argument(
        "--notebook",
        action="store_true",
        help="print the fixes as notebook cell lines acting on the kernel whose interpreter "
        "is inspected (%%envlock restore ... --in-place, %%pip, !...), with the kernel's "
        "restart; %%envlock doctor adds it",
    )
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="list every finding a root cause folds (by default one row: the count and the "
        "first few)",
    )
    p.add_argument(
        "--deep", action="store_true", help="also hash every installed file against its RECORD"
    )
    p.add_argument("--json", action="store_true", help="print the result document")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from envlock.doctor.doctor_run import DoctorRequest, run_doctor

    gpus, gpu_auto = gpus_from_values(args.gpu)
    req = DoctorRequest(
        lock=args.lock,
        venv=args.venv,
        log=args.log,
        allow_cpu=args.allow_cpu,
        notebook=args.notebook,
        deep=args.deep,
        driver=args.driver,
        gpus=gpus,
        gpu_auto=gpu_auto,
        freeze=args.freeze,
        python=args.python,
    )
    return finish(run_doctor(req, verbose=args.verbose), args.json)
