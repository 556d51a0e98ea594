"""envlock smoke: run the smoke harness inside an image or on this host."""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envlock.errors import UsageError

if TYPE_CHECKING:
    from envlock.resolve.paths import GpuPathsDict
    from envlock.smoke.result import SmokeRun


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


def host_python(given: str) -> str:
    """The interpreter --venv names, chosen as doctor chooses it (envlock.venv.interpreter):
    an interpreter file, or a venv folder's bin/python; a dangling venv interpreter
    is named as such."""
    from envlock.venv.interpreter import choose

    path = Path(given)
    if not path.is_dir() and not path.is_file():
        raise UsageError(
            f"--venv {given}: no venv folder or Python interpreter there",
            hint="give the venv folder or an interpreter, e.g. --venv .venv or "
            "--venv /usr/bin/python3",
        )
    return choose(given, None, {}).python


def run(args: argparse.Namespace) -> int:
    from envlock.smoke import runner

    if args.size is not None and args.size <= 0:
        raise UsageError(f"--size {args.size}: must be a positive matrix size", hint="--size 4096")
    if args.sign and not args.output:
        raise UsageError("--sign needs -o FILE for the signed report", hint="-o report.intoto.json")
    if args.output:
        _refuse_clobber(args)
    extra = [] if args.training else ["--no-training"]
    _check(args)
    with _harness_log(args) as log:
        result = _run(args, runner, extra, log)
    paths = _paths(result)
    if paths:
        result["paths"] = paths
    image_id = result.get("image", {}).get("id")
    image_ref = result.get("image", {}).get("pinned")

    if args.output:
        from envlock.fsutil import atomic_write
        from envlock.output import wrote

        out: Mapping[str, object] = result
        if args.sign:
            lock_dir = args.lock or args.expect  # the bundle the report names, if any
            out = _sign(
                result,
                Path(args.sign),
                Path(lock_dir) if lock_dir else None,
                image_id,
                image_ref,
            )
        atomic_write(Path(args.output), json.dumps(out, indent=2) + "\n")
        wrote(args.output, "the signed report" if args.sign else "the result")
    if args.json:
        from envlock.output import emit_json

        emit_json(result)
    else:
        sys.stdout.write(describe(result))
    return runner.exit_code_for(result)


def _paths(result: SmokeRun) -> list[GpuPathsDict]:
    """The verdict per execution path for what the harness saw (its facts: the
    build's CUDA and sm targets, each GPU and driver, the cuDNN that loaded, the
    ptxas XLA found), judged by the function resolve and doctor use."""
    try:
        from envlock.matrix import libraries, load_cuda
        from envlock.matrix import paths as paths_mod
        from envlock.resolve.paths import for_smoke
    except ImportError as e:  # a GPU host with the standard library and little else
        sys.stderr.write(
            f"envlock: no verdicts per execution path ({e}); the smoke result is whole "
            "without them\n"
        )
        return []

    found = for_smoke(result, load_cuda(), paths_mod.load(), libraries.load())
    return [p.to_dict() for p in found]


@contextlib.contextmanager
def _harness_log(args: argparse.Namespace) -> Iterator[Any]:
    """Where the harness's log goes: stderr with --verbose, else a log file named first."""
    if args.verbose:
        yield None
        return
    import os
    import time

    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    folder = Path(base) / "envlock" / "logs"
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = folder / f"smoke-{stamp}-{os.getpid()}.log"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle = open(path, "w", encoding="utf-8", errors="replace")  # noqa: SIM115
    except OSError as e:  # no writable state folder: the log goes to stderr as before
        sys.stderr.write(f"envlock: cannot write the harness log to {path} ({e.strerror})\n")
        yield None
        return
    where = "on this host" if args.host else f"in {args.image}"
    sys.stderr.write(
        f"envlock: running the smoke harness {where}; its log: {path} (--verbose shows it here)\n"
    )
    with handle:
        yield handle


def _check(args: argparse.Namespace) -> None:
    """The command line's mistakes (exit 2), before any log is opened or anything runs."""
    from envlock.readers import read_json

    if args.host:
        if args.image:
            raise UsageError(
                f"give an image or --host, not both ({args.image!r})",
                hint="envlock smoke IMAGE, or envlock smoke --host",
            )
        if args.peaks:  # strict JSON (envlock.readers): a bad file is exit 2, not a FAILED run
            read_json(args.peaks, "--peaks", hint="pass a JSON list of GPU peaks")
        if args.venv:
            host_python(args.venv)
        return
    if not args.image:
        raise UsageError("no image given", hint="envlock smoke IMAGE, or envlock smoke --host")
    if args.venv:
        raise UsageError(
            "--venv is for --host runs (an image carries its own interpreter)",
            hint=f"envlock smoke --host --venv {shlex.quote(args.venv)}",
        )
    if args.expect or args.peaks:
        raise UsageError(
            "--expect and --peaks are for --host runs",
            hint="an image carries its own /opt/envlock/expect.json",
        )


def _run(args: argparse.Namespace, runner: Any, extra: list[str], log: Any) -> SmokeRun:
    if args.host:
        result: SmokeRun = runner.run_on_host(
            args.framework,
            Path(args.expect) if args.expect else None,
            args.allow_cpu,
            size=args.size,
            peaks_file=Path(args.peaks) if args.peaks else None,
            python=host_python(args.venv) if args.venv else None,
            extra=extra,
            timeout=args.timeout,
            log=log,
        )
        return result
    from envlock.smoke.container import run_in_image

    result = run_in_image(
        args.image,
        gpus=args.gpus,
        allow_cpu=args.allow_cpu,
        framework=args.framework,
        size=args.size,
        extra=extra,
        timeout=args.timeout,
        log=log,
    )
    return result


def _refuse_clobber(args: argparse.Namespace) -> None:
    """-o never overwrites the signing key, nor a file this run reads."""
    from envlock.report.outputs import refuse_clobber

    inputs: list[tuple[str, Path]] = []
    if args.sign:
        from envlock.commands.report import sign_inputs

        lock_dir = args.lock or args.expect
        inputs += sign_inputs(Path(args.sign), None, Path(lock_dir) if lock_dir else None)
    elif args.expect:
        inputs += [("the expectation", Path(args.expect) / "expect.json")]
    if args.peaks:
        inputs.append(("the peaks file --peaks", Path(args.peaks)))
    refuse_clobber(
        Path(args.output), inputs, hint="write the result to a new file, e.g. -o result.json"
    )


def _sign(
    result: SmokeRun,
    key: Path,
    lock_dir: Path | None,
    image_id: str | None,
    image_ref: str | None = None,
) -> Any:
    try:
        from envlock.report import sign_result
    except ImportError as e:
        raise UsageError(
            f"signing is not available in this installation ({e})",
            hint="install envlock with its dependencies (cryptography)",
        ) from e
    if lock_dir is not None and not (lock_dir / "pylock.toml").is_file():
        lock_dir = None
    return sign_result(result, key, lock_dir=lock_dir, image_id=image_id, image_ref=image_ref)


def describe(result: SmokeRun) -> str:
    """The readable report: a header, the checks table (short reasons: the whole
    text is in --json and -o), the benchmark table; for a run of several
    frameworks, these tables for each framework under its own verdict line."""
    from envlock.output import short, table

    runs = [r for r in result.get("frameworks") or [] if isinstance(r, Mapping)]
    lines = []
    if len(runs) > 1:
        head = f"{result.get('status')}: " + ", ".join(_named(r) for r in runs)
    else:
        head = f"{result.get('status')}: {_named(result)}"
    image = result.get("image")
    if image:
        head += f" in {image.get('ref')}"
    lines.append(head.rstrip())
    for gpu in result.get("gpus") or []:
        lines.append(
            f"GPU: {gpu.get('name')} (compute capability {gpu.get('compute_capability')}, "
            f"{gpu.get('memory_total_mb')} MB, driver {gpu.get('driver')})"
        )
    if len(runs) > 1:
        names = {f"framework_{r.get('framework')}" for r in runs}
        own = {c.get("name") for r in runs for c in r.get("checks") or []}
        # the run's own checks (a container's, a harness crash), not a framework's
        rest = [
            c
            for c in result.get("checks", [])
            if c.get("name") not in names and c.get("name") not in own
        ]
        if rest:
            lines += ["", *_checks_table(rest)]
        for run in runs:
            lines += ["", f"{_named(run)}: {run.get('status')}"]
            lines += _framework_lines(run)
    else:
        lines += ["", *_framework_lines(result)]
    for gpu_paths in result.get("paths") or []:
        lines.append("")
        lines.append(
            f"paths on {gpu_paths.get('gpu')} (compute capability "
            f"{gpu_paths.get('compute_capability')}):"
        )
        prow = [
            [p.get("path", ""), p.get("status", ""), short(p.get("why", ""))]
            + ([short(p["fix"])] if p.get("fix") else [""])
            for p in gpu_paths.get("paths") or []
        ]
        lines.append(table(["path", "verdict", "why", "fix"], prow).rstrip())
    if result.get("duration_s") is not None:
        lines.append(f"\n({result['duration_s']} s)")
    return "\n".join(lines) + "\n"


def _named(run: Mapping[str, Any]) -> str:
    """'torch 2.5.1+cu124' (or '?' before a framework was chosen)."""
    return f"{run.get('framework') or '?'} {run.get('version') or ''}".rstrip()


def _checks_table(checks: list[Any]) -> list[str]:
    from envlock.output import short, table

    rows = [[c.get("status", ""), c.get("name", ""), short(c.get("reason", ""))] for c in checks]
    return [table(["status", "check", "reason"], rows).rstrip()]


def _framework_lines(result: Mapping[str, Any]) -> list[str]:
    """One framework's checks, matmul benchmark and training tables."""
    from envlock.output import table

    lines = _checks_table(result.get("checks") or [])
    bench = (result.get("benchmark") or {}).get("results") or []
    if bench:
        lines.append("")
        brows = []
        for r in bench:
            frac = r.get("fraction_of_peak")
            brows.append(
                [
                    f"matmul {r['n']}^3",
                    r.get("math", r.get("dtype", "")),
                    r.get("device", ""),
                    f"{r['seconds_per_op']['median'] * 1e3:.3f}",
                    f"{r['tflops']:.2f}",
                    str(r.get("peak_tflops", "-")),
                    f"{frac * 100:.0f}%" if frac is not None else "-",
                ]
            )
        lines.append(
            table(
                ["op", "math", "device", "ms (median)", "TFLOP/s", "peak", "of peak"], brows
            ).rstrip()
        )
    training = (result.get("benchmark") or {}).get("training")
    if training and training.get("runs"):
        lines.append("")
        lines.append(
            f"training: {training.get('model')}, batch {training.get('batch')} of "
            f"{training.get('input')} on {training.get('device')}"
        )
        trows = [
            [
                r.get("variant", ""),
                f"{r['seconds_per_step'] * 1e3:.2f}",
                f"{r['first_step_s']:.2f}",
                f"{r['loss_first']:.3g} -> {r['loss_last']:.3g}",
                "plain loop" if r.get("plain") else f"{r.get('speedup_vs_plain', 0):.2f}x",
            ]
            for r in training["runs"]
        ]
        lines.append(
            table(["train", "ms per step", "first step s", "loss", "vs plain"], trows).rstrip()
        )
    return lines
