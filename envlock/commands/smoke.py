"""envlock smoke: run the smoke harness inside an image or on this host."""

from __future__ import annotations

import argparse
from typing import Any

from envlock.output import finish


def register(sub: Any) -> None:
    p = sub.add_parser(
        "smoke",
        help="prove inside an image (or on this host) that the GPU is really used",
        description="Run the smoke harness: framework and CUDA/cuDNN build against the lock, "
        "GPU visible, compute capability, cuDNN, an op on GPU:0, memory growth, matmul "
        "TFLOP/s against the datasheet peak. Exit 0 PASSED/WARNED, 1 FAILED, 3 Docker failed.",
    )
    p.add_argument(
        "image",
        nargs="?",
        help="image to test (name, tag or id; REPO@sha256:<digest> names a pushed image, "
        "pulled by digest when not local, and is the subject of the signed report)",
    )
    p.add_argument(
        "--host", action="store_true", help="run in this interpreter instead of an image"
    )
    p.add_argument(
        "--framework",
        choices=("tensorflow", "torch", "jax"),
        help="test this framework alone; default: the lock's (expect.json or the image "
        "label), else every importable framework, each in a process of its own",
    )
    p.add_argument(
        "--venv",
        metavar="PATH",
        help="with --host: the environment to test, a venv folder or any interpreter (a "
        "system Python, a Jupyter kernel's sys.executable), as doctor's --venv; default: "
        "envlock's own interpreter",
    )
    p.add_argument("--python", dest="venv", help=argparse.SUPPRESS)  # the old name
    p.add_argument("--expect", metavar="DIR", help="with --host: a bundle folder with expect.json")
    p.add_argument("--gpus", default="all", help="all (default), none, or a number of GPUs")
    p.add_argument("--allow-cpu", action="store_true", help="no GPU is a warning, not a failure")
    p.add_argument("--size", type=int, help="matmul size N (default 8192 on GPU, 512 on CPU)")
    p.add_argument(
        "--no-training",
        dest="training",
        action="store_false",
        help="skip the training checks (a small conv net trained a few steps per variant: "
        "plain loop, mixed precision, compiled; the loss must fall, on the GPU)",
    )
    p.add_argument(
        "--training",
        dest="training",
        action="store_true",
        help="the training checks run by default; kept for old callers",
    )
    p.add_argument("--peaks", metavar="FILE", help="with --host: JSON list of GPU datasheet peaks")
    p.add_argument("--timeout", type=float, default=3600, help="seconds before the run is stopped")
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show the harness's own log (its check lines and the framework's messages) on "
        "stderr as it runs; without it the log goes to a file, named before the run",
    )
    p.add_argument("--json", action="store_true", help="print the result document")
    p.add_argument(
        "-o", "--output", metavar="FILE", help="write the result (or signed report) here"
    )
    p.add_argument("--sign", metavar="KEY", help="sign the result with this private key (needs -o)")
    p.add_argument("--lock", metavar="DIR", help="bundle folder whose lock the signed report names")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from envlock.venv.smoke import SmokeRequest, run_smoke

    request = SmokeRequest(
        image=args.image,
        host=args.host,
        framework=args.framework,
        venv=args.venv,
        expect=args.expect,
        gpus=args.gpus,
        allow_cpu=args.allow_cpu,
        size=args.size,
        training=args.training,
        peaks=args.peaks,
        timeout=args.timeout,
        verbose=args.verbose,
        output=args.output,
        sign=args.sign,
        lock=args.lock,
    )
    return finish(run_smoke(request), args.json)
