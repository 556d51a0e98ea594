"""The flags several commands share, declared once (as pip's ``cli/cmdoptions.py``).

Each ``add_*`` declares a group of flags on a parser; ``constraints_from_args``
and ``render_options`` turn the parsed flags into the objects the stages take
(``Constraints``, ``RenderOptions``), so no stage sees argparse and no command
module imports another's flags. ``envlock.parser`` skips this module
(``envlock.commands.NOT_COMMANDS``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from envlock.model import CUDA_SOURCES
from envlock.render import PYTHON_SOURCES, RenderOptions
from envlock.resolve import Constraints, Gpu
from envlock.resolve.constraints import capability_of

if TYPE_CHECKING:
    from envlock.ci.cells import Expansion
    from envlock.driver import HostInfo  # imports subprocess: only for --driver auto

SPEC_HELP = (
    "a requirement on tensorflow: 'tensorflow==2.15' (the 2.15 series), "
    "'tensorflow~=2.13.0', 'tensorflow>=2.14,<2.17', 'tensorflow'; or on torch "
    "('torch==2.11') or JAX with its CUDA extra ('jax[cuda12]', 'jax[cuda13]', 'jax[cuda]')"
)


# ---------------------------------------------------------------- resolve (resolve, lock)


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
    add_driver_argument(
        parser,
        "host NVIDIA driver; releases needing a newer one are skipped "
        "('auto' reads this machine: NVML, else nvidia-smi)",
    )
    parser.add_argument("--os", metavar="ubuntuXX.YY", help="Ubuntu release of the base image")
    parser.add_argument(
        "--cuda-source",
        choices=CUDA_SOURCES,
        help="system: CUDA/cuDNN from the nvidia/cuda cudnn image; pip: nvidia-* wheels "
        "(tensorflow[and-cuda]) on the -base image (default: system, pip when no image fits)",
    )
    add_gpu_argument(
        parser,
        "a GPU to check the compiled kernels and driver floors against: a name "
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


def add_driver_argument(parser: argparse.ArgumentParser, help: str) -> None:
    """--driver VERSION|auto, as resolve, lock and doctor take it."""
    parser.add_argument("--driver", metavar="VERSION|auto", help=help)


def add_gpu_argument(parser: argparse.ArgumentParser, help: str) -> None:
    """--gpu NAME|X.Y|auto (repeatable), as resolve, lock and doctor take it."""
    parser.add_argument("--gpu", metavar="NAME|X.Y|auto", action="append", default=[], help=help)


def gpus_from_values(values: list[str]) -> tuple[tuple[Gpu, ...], bool]:
    """The GPUs --gpu names (a name, or a compute capability: "8.0", "sm_80"), and
    whether 'auto' was among them (this machine's GPUs)."""
    gpus: list[Gpu] = []
    auto = False
    for value in values:
        value = value.strip()
        capability = capability_of(value)
        if value.lower() == "auto":
            auto = True
        elif capability is not None:
            gpus.append(Gpu(name="", compute_capability=capability))
        else:
            gpus.append(Gpu(name=value))
    return tuple(gpus), auto


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

    named, gpu_auto = gpus_from_values(args.gpu)
    gpus.extend(named)
    driver_auto = driver is not None and driver.strip().lower() == "auto"
    if gpu_auto and not driver_auto:
        from envlock.errors import EnvironmentFailure, UsageError

        try:
            found = host_gpus()
        except UsageError as e:  # no driver here: exit 2, as --driver auto says it (#42)
            raise UsageError(
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
        only_binary=bool(getattr(args, "only_binary", False)),
    )


def _exclude_newer(args: argparse.Namespace) -> str | None:
    """--exclude-newer as a UTC instant (envlock.instant), or None."""
    value: str | None = getattr(args, "exclude_newer", None)
    if value is None:
        return None
    from envlock.instant import exclude_newer

    return exclude_newer(value)


# ---------------------------------------------------------------- pins (lock, ci lock)


def add_pin_arguments(parser: argparse.ArgumentParser, where: str = "") -> None:
    """--with REQ and -r FILE: requirements pinned beside the framework (``where``:
    " in every cell" for ci lock)."""
    parser.add_argument(
        "--with",
        dest="with_requirements",
        action="append",
        default=[],
        metavar="REQ",
        help=f"also pin this requirement{where} (repeatable), e.g. --with numpy==1.26.4",
    )
    parser.add_argument(
        "-r",
        "--requirement",
        dest="requirement_files",
        action="append",
        default=[],
        metavar="FILE",
        help=f"also pin the requirements listed in FILE{where} (one per line)",
    )


def add_index_arguments(parser: argparse.ArgumentParser) -> None:
    """--index NAME=URL and --route (``envlock.index.routing``), as lock and capture take them."""
    from envlock.index import routing

    routing.add_arguments(parser)


# ---------------------------------------------------------------- render (render, lock, ci lock)


def add_render_arguments(parser: argparse.ArgumentParser) -> None:
    """Options shared by `envlock lock` and `envlock render` (not --os: resolve owns it)."""
    parser.add_argument(
        "--base-image",
        metavar="REF",
        help="FROM this image instead of the resolved nvidia/cuda tag (mirror, internal "
        "registry, local image)",
    )
    parser.add_argument(
        "--base-digest", metavar="sha256:HEX", help="pin the base image to this digest"
    )
    parser.add_argument(
        "--ca-cert",
        metavar="FILE",
        help="PEM bundle the build stage trusts (networks that intercept TLS); never "
        "copied into the runtime image",
    )
    parser.add_argument(
        "--python-from",
        choices=PYTHON_SOURCES,
        help="where the image gets the lock's Python: the base image itself, the OS's "
        "apt archive, or uv's standalone builds (default: apt when the OS's python3 is "
        "the lock's minor, else uv)",
    )


def add_force_argument(parser: argparse.ArgumentParser) -> None:
    """--force for `envlock lock` and `envlock render`."""
    parser.add_argument(
        "--force",
        action="store_true",
        help="overwrite files in DIR that envlock did not write (not in DIR's "
        "envlock-manifest.json), e.g. a project's own Dockerfile",
    )


def render_options(args: argparse.Namespace, os: str | None = None) -> RenderOptions:
    """The render options given on the command line (None where not given)."""
    return RenderOptions(
        base_image=args.base_image,
        base_digest=args.base_digest,
        os=os,
        ca_cert=args.ca_cert,
        python_from=args.python_from,
    )


# ---------------------------------------------------------------- check (check, lock --check)


def add_check_arguments(parser: argparse.ArgumentParser) -> None:
    """The options the check takes (beside its DIR): how to reach the index, how to
    print, and render options given again (a --ca-cert file at another path)."""
    parser.add_argument(
        "--resolver",
        choices=("uv", "pip"),
        default=None,
        help="resolver engine (default: the one DIR's lock records)",
    )
    parser.add_argument(
        "--index-url",
        metavar="URL",
        help="simple-API index (default: the pip/uv configuration of this machine)",
    )
    parser.add_argument(
        "--offline",
        action="store_true",
        help="use only uv's cached index metadata (no network)",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    add_render_arguments(parser)


# ---------------------------------------------------------------- ci cells (ci matrix, ci lock)

CELL_SPEC_HELP = (
    "a requirement on tensorflow, torch or jax: 'tensorflow>=2.14,<2.17', "
    "'torch>=2.9,<2.12', 'jax[cuda]>=0.11', ..."
)


def add_cell_arguments(p: argparse.ArgumentParser, spec_help: str = CELL_SPEC_HELP) -> None:
    p.add_argument("spec", metavar="SPEC", nargs="?", help=spec_help)
    p.add_argument(
        "--python",
        metavar="X.Y,...|all",
        help="CPython minors per release, comma-separated, or 'all' (every minor the "
        "release has wheels for); default: what `envlock resolve` picks for the release",
    )
    p.add_argument(
        "--cuda-source",
        metavar="system,pip",
        help="CUDA sources per release, comma-separated; default: what `envlock resolve` "
        "picks for the release",
    )
    p.add_argument(
        "--pre",
        action="store_true",
        help="consider pre-releases (release candidates) too, as `envlock resolve --pre`; "
        "a SPEC naming one admits them without it",
    )
    p.add_argument(
        "--repo",
        metavar="REPO",
        help="image repository of the cells' tags (REPO:<cell-id>), with its registry host, "
        "e.g. ghcr.io/OWNER/tf; default envlock-ci, a local name (the bake file then loads "
        "images into the local engine instead of pushing)",
    )


def cells_from_args(args: argparse.Namespace, exclude_newer: str | None = None) -> Expansion:
    from envlock.ci.cells import DEFAULT_REPO, expand, parse_pythons, parse_sources
    from envlock.errors import UsageError

    if not args.spec:
        raise UsageError("give SPEC", hint="e.g. envlock ci matrix 'tensorflow>=2.14,<2.17'")
    expansion = expand(
        args.spec,
        parse_pythons(args.python),
        parse_sources(args.cuda_source),
        args.repo or DEFAULT_REPO,
        prereleases=args.pre,
        exclude_newer=exclude_newer,
    )
    for note in expansion.notes:
        sys.stderr.write(f"envlock: note: {note}\n")
    return expansion
