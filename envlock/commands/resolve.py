"""``envlock resolve SPEC``: what goes with a TensorFlow requirement, and why.

The resolve flags live here (``envlock lock`` takes the same ones through
``add_resolve_arguments``); ``constraints_from_args`` turns the parsed flags
into plain ``Constraints`` once, reading the host for ``--driver auto``, so
the resolve package never sees argparse.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from envlock.model import CUDA_SOURCES, Resolution
from envlock.output import bullets, emit_json, table
from envlock.resolve import Constraints, Gpu, resolve
from envlock.resolve.constraints import capability_of

if TYPE_CHECKING:
    from envlock.driver import HostInfo  # imports subprocess: only for --driver auto

DESCRIPTION = (
    "Resolve a TensorFlow requirement against envlock's matrices: the newest "
    "release satisfying every constraint, its Python, CUDA, cuDNN, minimum driver and "
    "nvidia/cuda base image, with the reasons. Offline and fast."
)
SPEC_HELP = (
    "a requirement on tensorflow: 'tensorflow==2.15' (the 2.15 series), "
    "'tensorflow~=2.13.0', 'tensorflow>=2.14,<2.17', 'tensorflow'"
)


def add_resolve_arguments(parser: argparse.ArgumentParser, *, spec_optional: bool = False) -> None:
    """The resolve flags, shared by ``envlock resolve`` and ``envlock lock``
    (``spec_optional``: SPEC may be left out, as lock --check DIR does)."""
    if spec_optional:
        parser.add_argument("spec", metavar="SPEC", nargs="?", default=None, help=SPEC_HELP)
    else:
        parser.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
    parser.add_argument("--python", metavar="X.Y", help="CPython minor (default: newest supported)")
    parser.add_argument("--cuda", metavar="X.Y", help="CUDA the release was built with")
    parser.add_argument("--cudnn", metavar="X.Y", help="cuDNN the release was built with")
    parser.add_argument(
        "--driver",
        metavar="VERSION|auto",
        help="host NVIDIA driver; releases needing a newer one are skipped "
        "('auto' reads this machine: NVML, else nvidia-smi)",
    )
    parser.add_argument("--os", metavar="ubuntuXX.YY", help="Ubuntu release of the base image")
    parser.add_argument(
        "--cuda-source",
        choices=CUDA_SOURCES,
        help="system: CUDA/cuDNN from the nvidia/cuda cudnn image; pip: nvidia-* wheels "
        "(tensorflow[and-cuda]) on the -base image (default: system, pip when no image fits)",
    )
    parser.add_argument(
        "--gpu",
        metavar="NAME|X.Y|auto",
        action="append",
        default=[],
        help="a GPU to check the compiled kernels and driver floors against: a name "
        "(T4, A10G, A100, H100, 'RTX 4090', ...), a compute capability (8.0, sm_80) or "
        "'auto' (this machine's GPUs, through NVML); repeatable; --driver auto adds the "
        "host's GPUs too",
    )
    parser.add_argument(
        "--exclude-newer",
        metavar="DATE",
        help="ignore releases and files uploaded at or after DATE (YYYY-MM-DD: the start "
        "of that day in UTC, or an RFC 3339 timestamp), as uv's --exclude-newer",
    )
    parser.add_argument(
        "--pre",
        action="store_true",
        help="consider pre-releases (release candidates) too, as pip's and uv's --pre; "
        "a SPEC naming one ('tensorflow==2.22.0rc0', 'tensorflow>=2.22.0rc0') admits "
        "them without it",
    )


def constraints_from_args(
    args: argparse.Namespace, detect: Callable[[], HostInfo] | None = None
) -> Constraints:
    """Constraints from parsed arguments. ``--driver auto`` asks ``detect``
    (default: ``envlock.driver.detect``) for the host's driver and GPUs."""
    driver: str | None = args.driver
    driver_from = ""
    driver_cuda: str | None = None
    gpus: list[Gpu] = []
    host: HostInfo | None = None

    def read_host() -> HostInfo:
        nonlocal host, detect
        if host is None:
            if detect is None:
                from envlock.driver import detect as detect_host

                detect = detect_host
            host = detect()
        return host

    def host_gpus() -> list[Gpu]:
        from envlock.resolve.floors import host_gpus as gpus_of

        return list(gpus_of(read_host()))

    gpu_auto = False
    for value in args.gpu:
        value = value.strip()
        capability = capability_of(value)
        if value.lower() == "auto":
            gpu_auto = True
        elif capability is not None:
            gpus.append(Gpu(name="", compute_capability=capability))
        else:
            gpus.append(Gpu(name=value))
    driver_auto = driver is not None and driver.strip().lower() == "auto"
    if gpu_auto and not driver_auto:
        from envlock.errors import EnvironmentFailure, UsageError

        try:
            found = host_gpus()
        except UsageError as e:  # no driver here: the machine, not the flag, is the problem
            raise EnvironmentFailure(
                f"--gpu auto: {e.message.removeprefix('--driver auto: ')}",
                hint="name the GPU instead, e.g. --gpu A100 or --gpu 8.0",
            ) from None
        if not found:
            raise EnvironmentFailure(
                "--gpu auto: the NVIDIA driver lists no GPU on this machine",
                hint="name the GPU instead, e.g. --gpu A100 or --gpu 8.0",
            )
        gpus.extend(found)
    if driver_auto:
        info = read_host()
        driver = info.driver
        driver_from = info.source
        driver_cuda = info.cuda_driver
        gpus.extend(host_gpus())
    return Constraints(
        spec=args.spec,
        python=args.python,
        cuda=args.cuda,
        cudnn=args.cudnn,
        driver=driver,
        driver_from=driver_from,
        driver_cuda=driver_cuda,
        os=args.os,
        cuda_source=args.cuda_source,
        gpus=tuple(gpus),
        exclude_newer=_exclude_newer(args),
        prereleases=bool(getattr(args, "pre", False)),
    )


def _exclude_newer(args: argparse.Namespace) -> str | None:
    """--exclude-newer as a UTC instant (envlock.instant), or None."""
    value: str | None = getattr(args, "exclude_newer", None)
    if value is None:
        return None
    from envlock.instant import exclude_newer

    return exclude_newer(value)


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser(
        "resolve",
        help="which TensorFlow, Python, CUDA, cuDNN, driver and base image go together",
        description=DESCRIPTION,
    )
    add_resolve_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def summary(res: Resolution) -> str:
    """The readable form: one fact per line, then why, then warnings."""
    rows = [
        ("release", f"{res.framework} {res.version}"),
        ("python", f"{res.python}  (wheels for {', '.join(res.python_supported)})"),
        ("cuda", f"{res.cuda}  (cuDNN {res.cudnn})"),
        ("driver", f">= {res.driver_min}"),
        ("cuda source", res.cuda_source),
        (
            "base image",
            res.base_image + (f"@{res.base_image_digest}" if res.base_image_digest else ""),
        ),
        (
            "image cuda",
            res.cuda_image_version + (f"  (cuDNN {res.image_cudnn})" if res.image_cudnn else ""),
        ),
        ("os", res.os + (f"  (python3 {res.os_python})" if res.os_python else "")),
        ("matrix", f"{res.matrix_version}  (sha256 {res.matrix_digest[:12]})"),
    ]
    lines = [table(None, rows).rstrip()]
    if res.reasons:
        lines += ["", "why:", bullets("  - ", res.reasons).rstrip()]
    if res.warnings:
        lines += ["", "warnings:", bullets("  ! ", res.warnings).rstrip()]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    res = resolve(constraints_from_args(args))
    if args.json:
        emit_json(res.to_dict())
    else:
        sys.stdout.write(summary(res))
    return 0
