"""Constraints + matrix -> Resolution: what goes with a TensorFlow requirement.

``resolve`` is pure: it reads only the matrices it is given (or the packaged
ones) and the constraints; host detection (``--driver auto``) happens in
``constraints_from_args``, before it. The newest release that satisfies every
constraint wins; when none does, ``NoResolution`` says which constraint
removed which releases and what would work instead.

Choices made here, with the reasons given in every Resolution:

- ``==X.Y`` means the X.Y series (``==X.Y.*``), as people mean it; every other
  specifier keeps PEP 440 meaning. The matrix holds final and post releases
  only (``envlock matrix refresh`` skips pre- and dev-releases); yanked
  releases are used only when pinned exactly (PEP 592).
- Python: the newest minor the release has Linux x86_64 wheels for; with the
  ``pip`` CUDA source, the newest of those for which every ``and-cuda``
  requirement has a wheel too (``and_cuda_python``: TensorFlow 2.14's
  tensorrt==8.5.3.1 has no cp311 wheel, so 2.14 with pip CUDA gets 3.10).
- CUDA source ``system`` (CUDA and cuDNN from a ``-cudnn-runtime`` image) by
  default; the image's cuDNN must have the compiled major and at least the
  compiled minor. The image's CUDA is the compiled minor when such an image
  has a new enough cuDNN, else the nearest newer minor of the same major
  (minor-version compatibility, CUDA 11+). When no image fits (TensorFlow
  2.16/2.17: cuDNN 8.9 with CUDA 12.3, for which no cudnn8 image exists) and
  the release has the ``and-cuda`` extra, the default falls back to the
  ``pip`` source (the nvidia-* wheels on the ``-base`` image) with a warning,
  because that is the configuration that works; an explicit
  ``--cuda-source system`` fails instead, naming the alternatives.
- OS: the Ubuntu release whose own python3 is the chosen Python when the
  image exists for it (no second interpreter in the image), else the newest
  Ubuntu the image exists for (longest support).
"""

from __future__ import annotations

import os
import sys

from envlock.errors import NoResolution, UsageError
from envlock.model import CUDA_SOURCES, Resolution
from envlock.record import field, record, replace
from envlock.versions import Ver, admits, release_key, simple_clauses

# Neither typing nor argparse is imported at run time: `envlock resolve` must
# start fast (envlock.record says why; cli.py imports argparse when it parses).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any

    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    from envlock.driver import HostInfo
    from envlock.matrix import Matrix, TFRelease
    from envlock.matrix.cuda import CudaMatrix, ImageRelease, UbuntuRelease
    from envlock.matrix.gpus import GpuMatrix

FRAMEWORK = "tensorflow"

_PYTHON = r"^3\.[0-9]{1,2}$"
_MAJOR_MINOR = r"^[0-9]{1,2}(\.[0-9]{1,2})?$"
_DRIVER = r"^[0-9]{3}(\.[0-9]{1,3}){0,2}$"
_OS = r"^ubuntu[0-9]{2}\.[0-9]{2}$"
_CAPABILITY = r"^[0-9]{1,2}\.[0-9]$"


def _fullmatch(regex: str, text: str) -> bool:
    """``re.fullmatch``, with ``re`` imported on first use: a plain resolve
    needs no pattern (and ``python -m envlock`` then never imports ``re``)."""
    import re

    return re.fullmatch(regex, text) is not None


@record
class Gpu:
    """A GPU the result should serve: from the host, or named with --gpu."""

    name: str
    compute_capability: str | None = None  # "9.0"; None: look the name up in gpus.toml


@record
class Constraints:
    """What the user asked for. Validated by ``resolve``."""

    spec: str = FRAMEWORK
    python: str | None = None  # "3.11"
    cuda: str | None = None  # "12.2" or "12": the CUDA TensorFlow was built with
    cudnn: str | None = None  # "8.9" or "8": the cuDNN TensorFlow was built with
    driver: str | None = None  # the host driver, "535.104.05" (never "auto" here)
    driver_from: str = ""  # where the driver came from: "", "NVML", "nvidia-smi"
    driver_cuda: str | None = None  # newest CUDA the detected driver supports, "13.0"
    os: str | None = None  # "ubuntu22.04"
    cuda_source: str | None = None  # None: system, falling back to pip; or as given
    gpus: tuple[Gpu, ...] = field(default=())


# ---------------------------------------------------------------- arguments


# The resolve flags, shared by ``envlock resolve`` and ``envlock lock``:
# (flag, metavar, help, choices, appends). ``add_resolve_arguments`` gives them
# to argparse; ``quick_flags`` to ``envlock.cli.quick_parse``, which reads the
# plain command lines of ``envlock resolve`` without argparse.
RESOLVE_FLAGS: tuple[tuple[str, str | None, str, tuple[str, ...] | None, bool], ...] = (
    ("--python", "X.Y", "CPython minor (default: newest supported)", None, False),
    ("--cuda", "X.Y", "CUDA the release was built with", None, False),
    ("--cudnn", "X.Y", "cuDNN the release was built with", None, False),
    (
        "--driver",
        "VERSION|auto",
        "host NVIDIA driver; releases needing a newer one are skipped "
        "('auto' reads this machine: NVML, else nvidia-smi)",
        None,
        False,
    ),
    ("--os", "ubuntuXX.YY", "Ubuntu release of the base image", None, False),
    (
        "--cuda-source",
        None,
        "system: CUDA/cuDNN from the nvidia/cuda cudnn image; pip: nvidia-* wheels "
        "(tensorflow[and-cuda]) on the -base image (default: system, pip when no image fits)",
        CUDA_SOURCES,
        False,
    ),
    (
        "--gpu",
        "NAME|X.Y",
        "a GPU to check the compiled kernels against: a name from matrices/gpus.toml "
        "or a compute capability (repeatable; --driver auto adds the host's GPUs)",
        None,
        True,
    ),
)
SPEC_HELP = (
    "a requirement on tensorflow: 'tensorflow==2.15' (the 2.15 series), "
    "'tensorflow~=2.13.0', 'tensorflow>=2.14,<2.17', 'tensorflow'"
)


def add_resolve_arguments(parser: argparse.ArgumentParser) -> None:
    """The resolve flags, shared by ``envlock resolve`` and ``envlock lock``."""
    parser.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
    for flag, metavar, help_text, choices, appends in RESOLVE_FLAGS:
        if appends:
            parser.add_argument(flag, metavar=metavar, action="append", default=[], help=help_text)
        else:
            parser.add_argument(flag, metavar=metavar, choices=choices, help=help_text)


def quick_flags() -> dict[str, tuple[str, tuple[str, ...] | None, bool]]:
    """``RESOLVE_FLAGS`` as ``envlock.cli.quick_parse`` takes them."""
    return {
        flag: (flag[2:].replace("-", "_"), choices, appends)
        for flag, _metavar, _help, choices, appends in RESOLVE_FLAGS
    }


def constraints_from_args(
    args: argparse.Namespace, detect: Callable[[], HostInfo] | None = None
) -> Constraints:
    """Constraints from parsed arguments. ``--driver auto`` asks ``detect``
    (default: ``envlock.driver.detect``) for the host's driver and GPUs."""
    driver: str | None = getattr(args, "driver", None)
    driver_from = ""
    driver_cuda: str | None = None
    gpus: list[Gpu] = []
    for value in getattr(args, "gpu", None) or []:
        value = value.strip()
        if _fullmatch(_CAPABILITY, value):
            gpus.append(Gpu(name="", compute_capability=value))
        else:
            gpus.append(Gpu(name=value))
    if driver is not None and driver.strip().lower() == "auto":
        if detect is None:
            from envlock.driver import detect as detect_host

            detect = detect_host
        host = detect()
        driver = host.driver
        driver_from = host.source
        driver_cuda = host.cuda_driver
        gpus.extend(Gpu(name=g.name, compute_capability=g.compute_capability) for g in host.gpus)
    return Constraints(
        spec=args.spec,
        python=getattr(args, "python", None),
        cuda=getattr(args, "cuda", None),
        cudnn=getattr(args, "cudnn", None),
        driver=driver,
        driver_from=driver_from,
        driver_cuda=driver_cuda,
        os=getattr(args, "os", None),
        cuda_source=getattr(args, "cuda_source", None),
        gpus=tuple(gpus),
    )


# ---------------------------------------------------------------- validation


@record
class _Spec:
    """The SPEC, read: a plain one as ``envlock.versions`` clauses, any other
    through packaging's ``SpecifierSet`` (the two agree; tests/test_versions.py)."""

    text: str  # as given
    shown: str  # the specifier as applied, with ==X.Y widened to ==X.Y.*: "==2.15.*"
    widened: bool  # some ==X.Y was widened
    prereleases: bool  # the SPEC names a pre-release (the matrix holds none)
    exact: tuple[tuple[int, ...], int] | None  # Ver.key pinned exactly (==X.Y.Z, ===)
    and_cuda: bool  # the [and-cuda] extra was asked for
    clauses: tuple[tuple[str, str], ...] | None  # plain: the widened clauses
    specifier: SpecifierSet | None = None  # otherwise: the widened SpecifierSet

    def admits(self, version: Ver) -> bool:
        """Whether the (widened) specifier admits ``version``, pre-releases included."""
        if self.clauses is not None:
            return admits(self.clauses, version)
        assert self.specifier is not None
        return self.specifier.contains(str(version), prereleases=True)


_SPEC_HINT = (
    "write a requirement on tensorflow, e.g. 'tensorflow==2.15' or 'tensorflow>=2.14,<2.17'"
)


def _read_requirement(text: str, stripped: str) -> tuple[SpecifierSet, set[str]]:
    """(specifier as written, canonical extras) of the SPEC; UsageError when it
    is not a requirement on tensorflow without URL or marker."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    hint = _SPEC_HINT
    try:
        req = Requirement(stripped)
    except InvalidRequirement as e:
        first = str(e).splitlines()[0] if str(e) else "cannot parse it"
        import re

        single = re.fullmatch(r"^([A-Za-z0-9._-]+)\s*=\s*([0-9][^=<>!~,;]*)$", stripped)
        if single:
            hint = f"did you mean '{single.group(1)}=={single.group(2).strip()}'?"
        raise UsageError(f"SPEC {text!r} is not a valid requirement: {first}", hint=hint) from None
    name = canonicalize_name(req.name)
    if name != FRAMEWORK:
        other = hint
        if name.startswith(("tensorflow-", "tf-")):
            other = (
                "the GPU build is the 'tensorflow' package itself since 2.1; "
                "write e.g. 'tensorflow==2.15'"
            )
        raise UsageError(
            f"SPEC {text!r} is a requirement on {req.name!r}; envlock resolves tensorflow",
            hint=other,
        )
    if req.url:
        raise UsageError(
            f"SPEC {text!r} names a URL; envlock resolves releases on the index", hint=hint
        )
    if req.marker is not None:
        raise UsageError(
            f"SPEC {text!r} has an environment marker; the target is fixed (Linux x86_64)",
            hint="drop the '; ...' part and use --python for the interpreter",
        )
    return req.specifier, {canonicalize_name(e) for e in req.extras}


def _simple_spec(stripped: str) -> _Spec | None:
    """The most common SPECs (``tensorflow``, ``tensorflow==2.15``,
    ``TensorFlow >=2.14, <2.17``: the name, then clauses ``envlock.versions``
    reads), read without packaging; None for anything else."""
    name, rest = stripped[:10], stripped[10:]
    if name.lower() != FRAMEWORK or rest[:1] not in ("", " ", "\t", "<", ">", "=", "!", "~"):
        return None
    given = simple_clauses(rest)
    if given is None:
        return None
    widened: list[tuple[str, str]] = []
    exact: tuple[tuple[int, ...], int] | None = None
    for op, version in given:
        parts = version.split(".")
        if op == "==" and len(parts) == 2 and parts[1] != "*":
            widened.append(("==", f"{int(parts[0])}.{int(parts[1])}.*"))
            continue
        if op == "==" and len(given) == 1 and not version.endswith(".*"):
            exact = (release_key(version), -1)
        widened.append((op, version))
    distinct = {(op, release_key(v.removesuffix(".*")), v.endswith(".*")) for op, v in widened}
    if len(distinct) != len(widened):
        return None  # packaging's SpecifierSet keeps one of equal clauses: let it decide
    shown = ",".join(sorted(op + v for op, v in widened))
    return _Spec(
        text=stripped,
        shown=shown,
        widened=widened != list(given),
        prereleases=False,
        exact=exact,
        and_cuda=False,
        clauses=tuple(widened),
    )


def _exact_key(version: Version) -> tuple[tuple[int, ...], int] | None:
    """``Ver.key`` of a packaging Version, None when no matrix row can equal it."""
    if version.pre is not None or version.dev is not None or version.local or version.epoch:
        return None
    post = -1 if version.post is None else version.post
    return (release_key(".".join(map(str, version.release))), post)


def _parse_spec(text: str) -> _Spec:
    stripped = text.strip()
    if not stripped:
        raise UsageError("SPEC is empty", hint=_SPEC_HINT)
    simple = _simple_spec(stripped)
    if simple is not None:
        return simple
    return _packaging_spec(text, stripped)


def _packaging_spec(text: str, stripped: str) -> _Spec:
    """The SPEC read by packaging (any SPEC; ``_simple_spec`` is the short way
    for plain ones, and gives the same ``_Spec``)."""
    from packaging.specifiers import Specifier, SpecifierSet
    from packaging.version import Version

    given, extras = _read_requirement(text, stripped)
    unknown = sorted(extras - {"and-cuda"})
    if unknown:
        raise UsageError(
            f"SPEC {text!r} asks for the extra {unknown[0]!r}; only [and-cuda] is understood",
            hint="use 'tensorflow[and-cuda]==X.Y' or --cuda-source pip for the CUDA wheels",
        )
    widened: list[str] = []
    exact: Version | None = None
    prereleases = False
    for spec in given:
        version_text = spec.version
        if spec.operator == "===":
            if _is_version(version_text):
                exact = Version(version_text)
            widened.append(str(spec))
            continue
        if version_text.endswith(".*"):
            widened.append(str(spec))
            continue
        version = Version(version_text)
        if version.is_prerelease:
            prereleases = True
        if (
            spec.operator == "=="
            and len(version.release) == 2
            and version.pre is None
            and version.post is None
            and version.dev is None
            and version.local is None
        ):
            widened.append(f"=={version.major}.{version.minor}.*")
            continue
        if spec.operator == "==" and len(given) == 1:
            exact = version
        widened.append(str(Specifier(f"{spec.operator}{version_text}")))
    specifier = SpecifierSet(",".join(widened))
    return _Spec(
        text=stripped,
        shown=str(specifier),
        widened=specifier != given,
        prereleases=prereleases,
        exact=_exact_key(exact) if exact is not None else None,
        and_cuda="and-cuda" in extras,
        clauses=None,
        specifier=specifier,
    )


def _is_version(text: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        Version(text)
    except InvalidVersion:
        return False
    return True


def _check_value(value: str | None, regex: str, flag: str, shape: str, example: str) -> str | None:
    if value is None:
        return None
    value = value.strip()
    if not _fullmatch(regex, value):
        raise UsageError(f"{flag} {value!r} is not {shape}", hint=f"e.g. {flag} {example}")
    return value


# ---------------------------------------------------------------- image placement


@record
class _Placement:
    """Where a release runs: CUDA source, base image, OS, and why."""

    source: str
    image: ImageRelease
    os: UbuntuRelease
    tag: str
    reasons: tuple[str, ...]
    warnings: tuple[str, ...]
    python: str  # the CPython minor it runs with


@record
class _NoPlacement:
    """Why a release has no base image under the constraints."""

    reason: str


def _split_minor(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


def _pick_os(
    cm: CudaMatrix, image: ImageRelease, want_os: str | None, python: str
) -> tuple[UbuntuRelease, str] | None:
    """Choose the Ubuntu release of an image; None when ``want_os`` is not there."""
    releases = [u for u in (cm.ubuntu_release(o) for o in image.os) if u is not None]
    if want_os is not None:
        for u in releases:
            if u.name == want_os:
                return u, f"{u.name} as asked (--os)"
        return None
    newest = max(releases, key=lambda u: release_key(u.release))
    for u in sorted(releases, key=lambda u: release_key(u.release), reverse=True):
        if u.python == python:
            return u, f"{u.name}: its own python3 is {python}, the chosen Python"
    return newest, (
        f"{newest.name}: the newest Ubuntu with this image; no Ubuntu it exists for has "
        f"python3 {python} (Python comes from a standalone build)"
    )


def _host_supports(c: Constraints, cuda: str) -> bool:
    """Whether the detected host driver supports CUDA ``cuda`` (major.minor)."""
    if not c.driver_cuda:
        return False
    return release_key(c.driver_cuda) >= release_key(cuda)


def _os_list(image: ImageRelease) -> str:
    return ", ".join(f"ubuntu{o}" for o in image.os)


def _place_system(
    rel: TFRelease, cm: CudaMatrix, c: Constraints, python: str
) -> _Placement | _NoPlacement:
    cuda_major, cuda_minor = _split_minor(rel.cuda)
    cudnn_need = release_key(rel.cudnn)
    cudnn_major = int(rel.cudnn.split(".")[0])
    notes: list[str] = []
    ranked: list[tuple[tuple[int, int, int], ImageRelease, bool]] = []
    for image in cm.images:
        major, minor = _split_minor(image.cuda)
        if major != cuda_major or minor < cuda_minor:
            continue
        if minor > cuda_minor and major < 11:
            continue  # no minor-version compatibility before CUDA 11
        if image.cudnn_major != cudnn_major:
            continue
        found = image.cudnn_key
        if found is not None and found < cudnn_need:
            notes.append(
                f"nvidia/cuda:{image.version}-{image.cudnn_flavour} carries cuDNN {image.cudnn}, "
                f"older than the {rel.cudnn} TensorFlow {_series(rel)} was built with"
            )
            continue
        known = found is not None
        same = minor == cuda_minor
        # rank: same CUDA minor first (known cuDNN before unknown), then the nearest
        # newer minor with a known cuDNN, then unknown ones; newest patch first.
        rank = (0 if same else 1, 0 if (known or same) else 1, minor - cuda_minor)
        if same and not known:
            rank = (0, 1, 0)
        ranked.append((rank, image, known))
    if not ranked:
        what = f"cuDNN {cudnn_major}.x >= {rel.cudnn} with CUDA {rel.cuda}"
        if cuda_major >= 11:
            what += f" or a newer CUDA {cuda_major}.x"
        reason = f"no nvidia/cuda cudnn image carries {what}"
        if notes:
            reason += " (" + "; ".join(notes) + ")"
        return _NoPlacement(reason)
    ranked.sort(key=lambda t: (t[0], [-p for p in t[1].release]))
    os_misses: list[str] = []
    for _rank, image, known in ranked:
        picked = _pick_os(cm, image, c.os, python)
        if picked is None:
            os_misses.append(f"{image.version} ({_os_list(image)})")
            continue
        ubuntu, os_reason = picked
        tag = image.tag("runtime", ubuntu.release, cudnn=True)
        reasons: list[str] = []
        warnings: list[str] = []
        minor = _split_minor(image.cuda)[1]
        cudnn_text = f"cuDNN {image.cudnn}" if known else f"cuDNN {image.cudnn_major}.x"
        if minor == cuda_minor:
            reasons.append(
                f"base image nvidia/cuda:{tag}: CUDA {image.version} with {cudnn_text}, "
                f"for a build with CUDA {rel.cuda} and cuDNN {rel.cudnn}"
            )
        else:
            reasons.append(
                f"base image nvidia/cuda:{tag}: no CUDA {rel.cuda} image has a cuDNN "
                f"{cudnn_major}.x >= {rel.cudnn}; CUDA {image.version} runs a CUDA "
                f"{rel.cuda} build by minor-version compatibility and has {cudnn_text}"
            )
            if _host_supports(c, image.cuda):
                reasons.append(
                    f"the host driver supports CUDA {c.driver_cuda}, so the image's "
                    f"NVIDIA_REQUIRE_CUDA (CUDA {image.cuda}) is met"
                )
            else:
                warnings.append(
                    f"the image's CUDA {image.cuda} is newer than the {rel.cuda} TensorFlow "
                    f"was built with: the container runtime asks for a driver that supports "
                    f"CUDA {image.cuda} unless NVIDIA_DISABLE_REQUIRE=1 is set"
                )
        reasons.extend(notes)
        if not known:
            warnings.append(
                f"the exact cuDNN inside nvidia/cuda:{tag} is not recorded (the tag promises "
                f"cuDNN {image.cudnn_major}.x; tensorflow {rel.version} needs >= {rel.cudnn}): "
                f"check NV_CUDNN_VERSION in the image"
            )
        reasons.append(f"OS {os_reason}")
        return _Placement(
            "system", image, ubuntu, tag, tuple(reasons), tuple(warnings), python
        )
    return _NoPlacement(
        f"no fitting nvidia/cuda cudnn image exists for {c.os}: " + ", ".join(os_misses)
    )


def _and_cuda_gap(rel: TFRelease, python: str) -> str:
    """The parts of the release's and_cuda_python_note that concern ``python``:
    "tensorrt==8.5.3.1: no cp311 wheel" (a part naming no cp tag removed every minor)."""
    import re

    tag = "cp" + python.replace(".", "")
    parts = [
        p
        for p in rel.and_cuda_python_note.split("; ")
        if p and (re.search(rf"\b{tag}\b", p) or not re.search(r"\bcp3[0-9]+\b", p))
    ]
    return "; ".join(parts) or f"no wheels for {tag}"


def _place_pip(
    rel: TFRelease, cm: CudaMatrix, c: Constraints, python: str | None
) -> _Placement | _NoPlacement:
    """The pip source on the -base image; ``python`` None: the newest minor every
    and-cuda requirement has wheels for (``and_cuda_python``)."""
    if not rel.and_cuda:
        return _NoPlacement(
            "no and-cuda extra to take CUDA from (the nvidia-* CUDA wheels start with "
            "tensorflow 2.14)"
        )
    if python is None:
        if not rel.and_cuda_python:
            return _NoPlacement(
                f"the and-cuda extra cannot be installed on any Python "
                f"({rel.and_cuda_python_note or 'no wheels for its requirements'})"
            )
        python = rel.and_cuda_python[-1]
    elif python not in rel.and_cuda_python:
        return _NoPlacement(
            f"the and-cuda extra cannot be installed on Python {python} "
            f"({_and_cuda_gap(rel, python)})"
        )
    cuda_major, cuda_minor = _split_minor(rel.cuda)
    ranked: list[tuple[int, ImageRelease]] = []
    for image in cm.images:
        major, minor = _split_minor(image.cuda)
        if major == cuda_major and minor >= cuda_minor:
            ranked.append((minor - cuda_minor, image))
    ranked.sort(key=lambda t: (t[0], [-p for p in t[1].release]))
    misses: list[str] = []
    for _distance, image in ranked:
        picked = _pick_os(cm, image, c.os, python)
        if picked is None:
            misses.append(f"{image.version} ({_os_list(image)})")
            continue
        ubuntu, os_reason = picked
        tag = image.tag("base", ubuntu.release, cudnn=False)
        cudnn_req = next((r for r in rel.and_cuda if r.lower().startswith("nvidia-cudnn")), "")
        reasons = [
            f"base image nvidia/cuda:{tag}: only the CUDA runtime; CUDA and cuDNN come "
            f"from tensorflow[and-cuda]'s nvidia-* wheels"
            + (f" ({cudnn_req})" if cudnn_req else ""),
            f"OS {os_reason}",
        ]
        warnings: tuple[str, ...] = ()
        if _split_minor(image.cuda)[1] != cuda_minor and not _host_supports(c, image.cuda):
            warnings = (
                f"the image's CUDA {image.cuda} is newer than the {rel.cuda} TensorFlow was "
                f"built with (no CUDA {rel.cuda} image for {ubuntu.name}): the container runtime "
                f"asks for a driver that supports CUDA {image.cuda} unless "
                f"NVIDIA_DISABLE_REQUIRE=1 is set",
            )
        return _Placement("pip", image, ubuntu, tag, tuple(reasons), warnings, python)
    if misses:
        return _NoPlacement(
            f"no nvidia/cuda CUDA {cuda_major}.x base image exists for {c.os}: " + ", ".join(misses)
        )
    return _NoPlacement(f"no nvidia/cuda image for CUDA {rel.cuda} is recorded in cuda.toml")


# ---------------------------------------------------------------- helpers for messages


def _python_ranges(versions: Iterable[str]) -> str:
    """["3.9", "3.10", "3.11", "3.13"] -> "3.9-3.11, 3.13"."""
    minors = sorted({int(v.split(".")[1]) for v in versions})
    parts: list[str] = []
    start = prev = None
    for m in minors:
        if start is None:
            start = prev = m
        elif prev is not None and m == prev + 1:
            prev = m
        else:
            parts.append(f"3.{start}" if start == prev else f"3.{start}-3.{prev}")
            start = prev = m
    if start is not None:
        parts.append(f"3.{start}" if start == prev else f"3.{start}-3.{prev}")
    return ", ".join(parts)


def _series(rel: TFRelease) -> str:
    return f"{rel.version.major}.{rel.version.minor}"


def _describe(releases: Sequence[TFRelease]) -> str:
    """A set of releases in words: "tensorflow 2.15.x" or "tensorflow 2.14.0-2.16.2"."""
    series = sorted({(r.version.major, r.version.minor) for r in releases})
    if len(series) == 1:
        return f"tensorflow {series[0][0]}.{series[0][1]}.x"
    versions = sorted(r.version for r in releases)
    return f"tensorflow {versions[0]}-{versions[-1]}"


def _distinct(values: Iterable[str]) -> str:
    out: list[str] = []
    for v in values:
        if v not in out:
            out.append(v)
    return ", ".join(sorted(out, key=release_key))


# ---------------------------------------------------------------- resolve


@record
class _Checked:
    """Validated constraint values."""

    spec: _Spec
    python: str | None
    cuda: str | None
    cudnn: str | None
    driver: tuple[int, ...] | None  # release_key of the host driver
    os: str | None
    source: str | None  # explicit source (flag or [and-cuda])
    gpus: tuple[Gpu, ...]


def _validate(c: Constraints, cm: CudaMatrix) -> _Checked:
    spec = _parse_spec(c.spec)
    python = _check_value(c.python, _PYTHON, "--python", "a CPython minor (3.X)", "3.11")
    cuda = _check_value(c.cuda, _MAJOR_MINOR, "--cuda", "a CUDA version (X.Y or X)", "12.2")
    cudnn = _check_value(c.cudnn, _MAJOR_MINOR, "--cudnn", "a cuDNN version (X.Y or X)", "8.9")
    driver_text = _check_value(
        c.driver, _DRIVER, "--driver", "a driver version (NNN[.NN[.NN]]) or auto", "535.104.05"
    )
    if c.driver_cuda is not None and not _fullmatch(_MAJOR_MINOR, c.driver_cuda):
        raise UsageError(
            f"the driver's CUDA version {c.driver_cuda!r} is not X.Y",
            hint="pass --driver VERSION instead of auto",
        )
    os = c.os.strip() if c.os is not None else None
    known_os = [u.name for u in cm.ubuntu]
    if os is not None and (not _fullmatch(_OS, os) or os not in known_os):
        raise UsageError(
            f"--os {os!r} is not a known Ubuntu release of the nvidia/cuda images",
            hint="one of: " + ", ".join(known_os),
        )
    if c.cuda_source is not None and c.cuda_source not in CUDA_SOURCES:
        raise UsageError(
            f"--cuda-source {c.cuda_source!r} is not one of {', '.join(CUDA_SOURCES)}",
            hint="system: from the nvidia/cuda cudnn image; pip: tensorflow[and-cuda] wheels",
        )
    source = c.cuda_source
    if spec.and_cuda:
        if source == "system":
            raise UsageError(
                f"SPEC {c.spec!r} asks for [and-cuda] but --cuda-source is system",
                hint="drop [and-cuda] (system CUDA) or --cuda-source system (pip CUDA)",
            )
        source = "pip"
    gpus: list[Gpu] = []
    for gpu in c.gpus:
        if gpu.compute_capability is not None and not _fullmatch(
            _CAPABILITY, gpu.compute_capability
        ):
            raise UsageError(
                f"GPU {gpu.name or '(--gpu)'}: compute capability "
                f"{gpu.compute_capability!r} is not X.Y",
                hint="e.g. --gpu 9.0 or --gpu 'NVIDIA H100 PCIe'",
            )
        gpus.append(gpu)
    return _Checked(
        spec=spec,
        python=python,
        cuda=cuda,
        cudnn=cudnn,
        driver=release_key(driver_text) if driver_text else None,
        os=os,
        source=source,
        gpus=tuple(gpus),
    )


def _matches(value: str, wanted: str) -> bool:
    """Whether "12.2" satisfies --cuda 12.2 or --cuda 12 (a major alone)."""
    if "." in wanted:
        return value == wanted
    return value.split(".")[0] == wanted


@record
class _Stage:
    """One constraint: its flag text, and a test returning None or why not."""

    name: str
    test: Callable[[TFRelease], str | None]


MATRIX_FILES = ("tensorflow.toml", "cuda.toml", "gpus.toml")
PARSER_FILES = ("__init__.py", "tensorflow.py", "cuda.py", "gpus.py")
# what the cached layout depends on besides the parsers: the record and version types
LAYOUT_FILES = ("record.py", "versions.py")


def cache_dir() -> str:
    """Where envlock keeps its per-user cache: $ENVLOCK_CACHE_DIR, else
    $XDG_CACHE_HOME/envlock, else ~/.cache/envlock."""
    explicit = os.environ.get("ENVLOCK_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "envlock")


def _matrix_folder() -> str | None:
    """The matrices/ folder as a plain path (inside the installed package, or
    beside it in a source checkout), found without importlib.resources (slow
    to import); None when it is not a plain folder (a zipped install)."""
    import envlock

    here = os.path.dirname(os.path.abspath(envlock.__file__))
    for folder in (os.path.join(here, "matrices"), os.path.join(os.path.dirname(here), "matrices")):
        if os.path.isdir(folder):
            return folder
    return None


def _fnv1a(data: bytes) -> int:
    """32-bit FNV-1a: names the cache file of an installation (zlib's crc32
    would do, at the price of importing zlib)."""
    h = 0x811C9DC5
    for byte in data:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


def _record_classes() -> dict[str, type]:
    from envlock.matrix import Matrix as MatrixType
    from envlock.matrix import TFMatrix, TFRelease
    from envlock.matrix.cuda import (
        CudaMatrix,
        CudaRelease,
        DriverBranch,
        ImageRelease,
        UbuntuRelease,
    )
    from envlock.matrix.gpus import GpuMatrix, GpuModel

    classes: tuple[type, ...] = (
        MatrixType, TFMatrix, TFRelease, CudaMatrix, CudaRelease, DriverBranch,
        ImageRelease, UbuntuRelease, GpuMatrix, GpuModel,
    )  # fmt: skip
    return {cls.__name__: cls for cls in classes}


def _to_plain(obj: object, classes: dict[str, type]) -> object:
    """A validated matrix as marshal-able data that decodes quickly: text,
    numbers, booleans, None and tuples of those stay as they are; a ``Ver`` is
    ["V", text, release, post]; a record is ["R", class name, field values, indexes of the
    values to decode]; a tuple holding any of these is ["T", items]. Anything
    else is a TypeError (no cache then)."""
    if isinstance(obj, tuple):
        items = tuple(_to_plain(x, classes) for x in obj)
        return ["T", items] if any(isinstance(x, list) for x in items) else items
    if obj is None or isinstance(obj, (str, int, float)):
        return obj
    if isinstance(obj, Ver):
        return ["V", str(obj), obj.release, obj.post]
    name = type(obj).__name__
    if classes.get(name) is not type(obj):
        raise TypeError(f"cannot cache a {name}")
    names: tuple[str, ...] = type(obj).__record_names__  # type: ignore[attr-defined]
    values = tuple(_to_plain(obj.__dict__[n], classes) for n in names)
    nested = tuple(i for i, v in enumerate(values) if isinstance(v, list))
    return ["R", name, values, nested]


def _from_plain(obj: object, classes: dict[str, type]) -> object:
    """The inverse of ``_to_plain``: only the tagged parts are visited."""
    from envlock.record import build

    def decode(value: object) -> object:
        if type(value) is not list:
            return value
        tag = value[0]
        if tag == "V":
            return Ver.restore(value[1], value[2], value[3])
        if tag == "T":
            return tuple([decode(x) for x in value[1]])
        values = list(value[2])
        for i in value[3]:
            values[i] = decode(values[i])
        return build(classes[value[1]], tuple(values))

    return decode(obj)


def load_matrix() -> Matrix:
    """``envlock.matrix.load()``, kept validated in a per-user cache.

    Parsing and validating the TOML files costs more than starting Python
    (tomllib is pure Python), so the validated ``Matrix`` is kept in
    ``cache_dir()`` in ``marshal`` form (``_to_plain``; marshal is built into
    the interpreter, pickle is a module to import), together with a stamp: the
    Python version and the exact bytes of the three matrix files, of the
    parser modules and of the record and version types. The cache is used
    only when its stamp equals the current one, byte for byte, so any change
    to a matrix file or a parser misses it. (Comparing the bytes spares
    hashing them: hashlib's import alone costs more than this whole check.)
    One file per installation (named by a hash of its paths and the Python
    version), rewritten when the stamp changes. A cache that cannot be read or
    written is ignored; the result is the same. The folder is the user's own
    (mode 0700), as for pip's and uv's caches.
    """
    import marshal

    import envlock
    from envlock.matrix import Matrix as MatrixType

    matrices = _matrix_folder()
    package = os.path.dirname(os.path.abspath(envlock.__file__))
    parsers = os.path.join(package, "matrix")
    # marshal's format follows the Python version
    where = f"{sys.version}|{matrices}|{package}".encode()
    parts = [where]
    try:
        if matrices is None:
            raise OSError("matrices/ is not a plain folder")
        for folder, names in (
            (matrices, MATRIX_FILES),
            (parsers, PARSER_FILES),
            (package, LAYOUT_FILES),
        ):
            for name in names:
                with open(os.path.join(folder, name), "rb") as f:
                    parts.append(f.read())
    except OSError:
        from envlock.matrix import load

        return load()  # no cache; the loader names a missing file
    stamp = b"".join(b"%d:%s|" % (len(part), part) for part in parts)
    path = os.path.join(cache_dir(), f"matrix-{_fnv1a(where):08x}.marshal")
    classes = _record_classes()
    try:
        with open(path, "rb") as f:
            cached_stamp, cached_plain = marshal.loads(f.read())
        if cached_stamp == stamp:
            cached = _from_plain(cached_plain, classes)
            if isinstance(cached, MatrixType):
                return cached
    except Exception:  # noqa: BLE001 - missing, unreadable, stale, damaged: parse again
        pass
    from envlock.matrix import load

    loaded = load()
    try:
        from pathlib import Path

        from envlock.fsutil import atomic_write

        plain: Any = _to_plain(loaded, classes)
        data = marshal.dumps((stamp, plain))
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        atomic_write(Path(path), data)
    except Exception:  # noqa: BLE001 - a read-only home must not break resolve
        pass
    return loaded


def resolve(c: Constraints, matrix: Matrix | None = None) -> Resolution:
    """The newest release (and Python, image, ...) satisfying every constraint."""
    if matrix is None:
        matrix = load_matrix()
    cm: CudaMatrix | None = matrix.cuda
    gm: GpuMatrix | None = matrix.gpus
    if cm is None:
        from envlock.errors import DataError

        raise DataError("matrices/cuda.toml: not available", hint="reinstall envlock")
    k = _validate(c, cm)
    tf = matrix.tensorflow
    newest_first = sorted(tf.releases, key=lambda r: r.version, reverse=True)

    # 1. the requirement itself
    def spec_ok(r: TFRelease) -> bool:
        if not k.spec.admits(r.version):
            return False
        return not (r.yanked and r.version.key != k.spec.exact)

    matched = [r for r in newest_first if spec_ok(r)]
    if not matched:
        raise _no_match(k, newest_first)

    # 2. the other constraints, in the order they are reported
    def driver_min(r: TFRelease) -> str | None:
        row = cm.release(r.cuda)
        return row.driver_min if row else None

    def place(r: TFRelease) -> _Placement | _NoPlacement:
        return _place(r, cm, k, c)

    stages: list[_Stage] = [
        _Stage(
            "gpu build",
            lambda r: (
                None
                if getattr(r, "cuda_build", True)
                else f"the tensorflow {_series(r)}.x wheels are CPU-only builds (the GPU "
                f"build of {_series(r)} was the separate tensorflow-gpu package)"
            ),
        ),
    ]
    if k.python:
        want_py = k.python
        stages.append(
            _Stage(
                f"--python {want_py}",
                lambda r: None if want_py in r.python else f"no Python {want_py} wheel",
            )
        )
    if k.cuda:
        want_cuda = k.cuda
        stages.append(
            _Stage(
                f"--cuda {want_cuda}",
                lambda r: None if _matches(r.cuda, want_cuda) else f"built with CUDA {r.cuda}",
            )
        )
    if k.cudnn:
        want_cudnn = k.cudnn
        stages.append(
            _Stage(
                f"--cudnn {want_cudnn}",
                lambda r: None if _matches(r.cudnn, want_cudnn) else f"built with cuDNN {r.cudnn}",
            )
        )
    if k.driver is not None:
        have = k.driver

        def driver_test(r: TFRelease) -> str | None:
            need = driver_min(r)
            if need is None:
                return f"matrices/cuda.toml has no CUDA {r.cuda} row"
            if have >= release_key(need):
                return None
            major = r.cuda.split(".")[0]
            builds = f"CUDA {major}.x builds" if int(major) >= 11 else f"CUDA {r.cuda} builds"
            return f"{builds} need driver >= {need}"

        stages.append(_Stage(f"--driver {c.driver}", driver_test))

    def image_test(r: TFRelease) -> str | None:
        p = place(r)
        return p.reason if isinstance(p, _NoPlacement) else None

    image_stage_name = "the base image" + (f" (--os {k.os})" if k.os else "")
    if k.source:
        image_stage_name += f" (--cuda-source {k.source})"
    stages.append(_Stage(image_stage_name, image_test))

    removed_by: dict[str, list[tuple[TFRelease, str]]] = {}
    remaining = matched
    for stage in stages:
        kept: list[TFRelease] = []
        for r in remaining:
            why = stage.test(r)
            if why is None:
                kept.append(r)
            else:
                removed_by.setdefault(stage.name, []).append((r, why))
        if not kept:
            raise _nothing_fits(k, c, stage, remaining, newest_first, stages, matrix)
        remaining = kept
    chosen = remaining[0]
    placement = place(chosen)
    assert isinstance(placement, _Placement)
    return _resolution(chosen, placement, k, c, matrix, cm, gm, removed_by, matched)


def _place(r: TFRelease, cm: CudaMatrix, k: _Checked, c: Constraints) -> _Placement | _NoPlacement:
    """Place ``r``: Python as asked, else the newest with a wheel (for the pip
    source: the newest every and-cuda requirement has wheels for)."""
    c_os = replace(c, os=k.os)
    if k.source == "pip":
        return _place_pip(r, cm, c_os, k.python)
    system = _place_system(r, cm, c_os, k.python or r.python[-1])
    if isinstance(system, _Placement) or k.source == "system":
        return system
    pip = _place_pip(r, cm, c_os, k.python)
    if isinstance(pip, _NoPlacement):
        return _NoPlacement(f"{system.reason}; the pip source does not fit either: {pip.reason}")
    return _Placement(
        pip.source,
        pip.image,
        pip.os,
        pip.tag,
        pip.reasons,
        (
            f"CUDA source pip, not system: {system.reason}; the nvidia-* wheels of "
            f"tensorflow[and-cuda] bring the CUDA and cuDNN it was built with",
            *pip.warnings,
        ),
        pip.python,
    )


def _no_match(k: _Checked, newest_first: Sequence[TFRelease]) -> NoResolution:
    spec = k.spec
    inside = [r for r in newest_first if spec.admits(r.version)]
    yanked = [r for r in inside if r.yanked]
    finals = [r for r in newest_first if not r.yanked]
    hint_parts: list[str] = []
    if yanked:
        pins = ", ".join(f"tensorflow=={r.version}" for r in yanked[:3])
        hint_parts.append(f"yanked releases are used only when pinned exactly ({pins})")
    if spec.prereleases:
        hint_parts.append("the matrix holds final releases only, no pre-releases")
    if finals:
        hint_parts.append(f"the matrix has tensorflow {finals[-1].version} to {finals[0].version}")
    return NoResolution(
        f"no tensorflow release matches {spec.text!r}",
        hint="; ".join(hint_parts) or "try 'tensorflow' to get the newest release",
    )


def _nearest(
    k: _Checked,
    stage: _Stage,
    blocked: Sequence[TFRelease],
    newest_first: Sequence[TFRelease],
    stages: Sequence[_Stage],
) -> str | None:
    """The release series nearest to the blocked set that passes every stage."""
    ok = [
        r
        for r in newest_first
        if not r.yanked and all(s.test(r) is None for s in stages)
    ]
    if not ok:
        return None
    lo = min(r.version for r in blocked)
    hi = max(r.version for r in blocked)
    newer = [r for r in ok if r.version > hi]
    older = [r for r in ok if r.version < lo]
    if newer:
        first = min(newer, key=lambda r: r.version)
        return f"tensorflow>={_series(first)}"
    if older:
        best = max(older, key=lambda r: r.version)
        return f"tensorflow=={_series(best)}"
    inside = max(ok, key=lambda r: r.version)
    return f"tensorflow=={inside.version}"


def _nothing_fits(
    k: _Checked,
    c: Constraints,
    stage: _Stage,
    blocked: Sequence[TFRelease],
    newest_first: Sequence[TFRelease],
    stages: Sequence[_Stage],
    matrix: Matrix,
) -> NoResolution:
    what = _describe(blocked)
    why = _first_distinct((stage.test(r) or "" for r in blocked), limit=3)
    nearest = _nearest(k, stage, blocked, newest_first, stages)
    hints: list[str] = []
    if stage.name.startswith("--python"):
        supported = _python_ranges(p for r in blocked for p in r.python)
        message = f"{what} supports Python {supported}; there is no Python {k.python} wheel"
        if nearest:
            hints.append(f"for Python {k.python} use {nearest}")
        hints.append("drop --python to get the newest Python the release supports")
    elif stage.name.startswith("--cuda "):
        message = f"{what} was built with CUDA {_distinct(r.cuda for r in blocked)}, not {k.cuda}"
        if nearest:
            hints.append(f"for CUDA {k.cuda} use {nearest}")
    elif stage.name.startswith("--cudnn"):
        message = (
            f"{what} was built with cuDNN {_distinct(r.cudnn for r in blocked)}, not {k.cudnn}"
        )
        if nearest:
            hints.append(f"for cuDNN {k.cudnn} use {nearest}")
    elif stage.name.startswith("--driver"):
        message = f"{what}: " + "; ".join(why) + f", and the driver is {c.driver}"
        if nearest:
            hints.append(f"with driver {c.driver} use {nearest}")
        need = _driver_min_of(matrix, blocked[0])
        hints.append(f"upgrade the driver to >= {need}" if need else "upgrade the driver")
    elif stage.name == "gpu build":
        message = "; ".join(why)
        if nearest:
            hints.append(f"the nearest GPU build is {nearest}")
    else:
        message = f"{what}: " + "; ".join(why)
        other_python = _and_cuda_python_hint(k, blocked[0], matrix)
        if other_python:
            hints.append(other_python)
        if nearest:
            hints.append(f"use {nearest}")
        alternatives = _source_alternatives(k, blocked[0], matrix)
        hints.extend(alternatives)
    prior = [s.name for s in stages[: list(stages).index(stage)] if s.name != "gpu build"]
    if prior:
        message += f" (after {', '.join(prior)})"
    return NoResolution(f"nothing fits: {message}", hint="; or ".join(hints) or None)


def _driver_min_of(matrix: Matrix, rel: TFRelease) -> str | None:
    row = matrix.cuda.release(rel.cuda) if matrix.cuda is not None else None
    return row.driver_min if row is not None else None


def _and_cuda_python_hint(k: _Checked, rel: TFRelease, matrix: Matrix) -> str | None:
    """``--python 3.10 or 3.9`` when the pip source fails only for the asked Python."""
    if not k.python or k.source == "system" or not rel.and_cuda:
        return None
    if k.python in rel.and_cuda_python or not rel.and_cuda_python:
        return None
    c = Constraints(spec=k.spec.text, os=k.os)
    if not isinstance(_place_pip(rel, matrix.cuda, c, rel.and_cuda_python[-1]), _Placement):
        return None
    pythons = " or ".join(reversed(rel.and_cuda_python))
    return (
        f"--python {pythons} (every tensorflow[and-cuda] {rel.version} requirement has "
        f"Linux x86_64 wheels for {_python_ranges(rel.and_cuda_python)})"
    )


def _source_alternatives(k: _Checked, rel: TFRelease, matrix: Matrix) -> list[str]:
    """Other settings under which ``rel`` would place: another source, another OS."""
    cm: CudaMatrix = matrix.cuda
    out: list[str] = []
    for source in CUDA_SOURCES:
        if source == k.source:
            continue
        c = Constraints(spec=k.spec.text, os=k.os)
        p = (
            _place_pip(rel, cm, c, k.python)
            if source == "pip"
            else _place_system(rel, cm, c, k.python or rel.python[-1])
        )
        if isinstance(p, _Placement):
            if source == "system" and k.spec.and_cuda:
                out.append(f"drop [and-cuda] for CUDA from the image (nvidia/cuda:{p.tag})")
            else:
                out.append(f"--cuda-source {source} (nvidia/cuda:{p.tag})")
    if k.os:
        for source in CUDA_SOURCES if k.source is None else (k.source,):
            c = Constraints(spec=k.spec.text)
            p = (
                _place_pip(rel, cm, c, k.python)
                if source == "pip"
                else _place_system(rel, cm, c, k.python or rel.python[-1])
            )
            if isinstance(p, _Placement):
                out.append(f"drop --os (nvidia/cuda:{p.tag})")
                break
    return out


def _compute_warnings(rel: TFRelease, gpus: Sequence[Gpu], gm: GpuMatrix | None) -> list[str]:
    """Warn when a GPU is served only through PTX JIT, or not at all."""
    out: list[str] = []
    sms = sorted(
        int(cap[3:].rstrip("abcdefghijklmnopqrstuvwxyz"))
        for cap in rel.compute_capabilities
        if cap.startswith("sm_")
    )
    ptx = sorted(
        int(cap[8:].rstrip("abcdefghijklmnopqrstuvwxyz"))
        for cap in rel.compute_capabilities
        if cap.startswith("compute_")
    )
    for gpu in gpus:
        label = f"GPU {gpu.name}" if gpu.name else "a GPU"
        cc = gpu.compute_capability
        if cc is None and gm is not None:
            model = gm.find(gpu.name)
            cc = model.compute_capability if model else None
        if cc is None:
            out.append(
                f"GPU {gpu.name!r}: compute capability unknown (not in matrices/gpus.toml); "
                f"give it with --gpu X.Y to check the compiled kernels"
            )
            continue
        major, minor = (int(x) for x in cc.split("."))
        have = major * 10 + minor
        if not sms and not ptx:
            out.append(
                f"tensorflow {rel.version}: the wheel does not list its compiled capabilities"
            )
            continue
        if any(s // 10 == major and s <= have for s in sms):
            continue
        usable_ptx = [p for p in ptx if p <= have]
        compiled = ", ".join(rel.compute_capabilities)
        if usable_ptx:
            out.append(
                f"{label} (compute capability {cc}) has no compiled kernels in tensorflow "
                f"{rel.version} ({compiled}): they are JIT-compiled from compute_{usable_ptx[-1]} "
                f"PTX at first start (minutes; cached afterwards)"
            )
        else:
            out.append(
                f"{label} (compute capability {cc}) is not supported by tensorflow "
                f"{rel.version} (compiled for {compiled}): GPU ops will fail"
            )
    return out


def _image_warnings(cm: CudaMatrix, placement: _Placement) -> list[str]:
    out: list[str] = []
    row = cm.release(placement.image.cuda)
    ref = f"nvidia/cuda:{placement.tag}"
    if row is None:
        return out
    if row.images == "deleted":
        out.append(
            f"{ref} is gone: {row.images_note}; build from a mirror that still has it "
            f"(--base-image)"
        )
    elif row.images == "eol":
        out.append(
            f"{ref} is end-of-life ({row.images_note}); NVIDIA deletes end-of-life tags "
            f"six months later: pin it by digest or mirror it"
        )
    elif row.driver_branch:
        branch = cm.branch(row.driver_branch)
        if branch is not None:
            out.append(
                f"{ref}: CUDA {row.version} shipped with driver branch {branch.branch}, "
                f"supported until {branch.ends}; NVIDIA deletes the tags six months after "
                f"that: pin it by digest or mirror it"
            )
    return out


def _resolution(
    rel: TFRelease,
    placement: _Placement,
    k: _Checked,
    c: Constraints,
    matrix: Matrix,
    cm: CudaMatrix,
    gm: GpuMatrix | None,
    removed_by: dict[str, list[tuple[TFRelease, str]]],
    matched: Sequence[TFRelease],
) -> Resolution:
    reasons: list[str] = []
    first = f"tensorflow {rel.version}: the newest release matching {k.spec.text!r}"
    if k.spec.widened:
        first += f" (read as {FRAMEWORK}{k.spec.shown}: ==X.Y means the X.Y series)"
    reasons.append(first)
    for name, removed in removed_by.items():
        newer = [r for r, _ in removed if r.version > rel.version]
        if newer:
            why = _distinct_text(w for r, w in removed if r.version > rel.version)
            reasons.append(f"newer {_describe(newer)} excluded by {name}: {why}")
    python = placement.python
    if k.python:
        reasons.append(
            f"Python {python} as asked (--python); wheels exist for {_python_ranges(rel.python)}"
        )
    elif placement.source == "pip" and rel.and_cuda_python != rel.python:
        reasons.append(
            f"Python {python}: the newest of {_python_ranges(rel.and_cuda_python)} for which "
            f"every tensorflow[and-cuda] requirement has a Linux x86_64 wheel "
            f"({rel.and_cuda_python_note}); tensorflow itself has wheels for "
            f"{_python_ranges(rel.python)}"
        )
    else:
        reasons.append(f"Python {python}: the newest of {_python_ranges(rel.python)} with a wheel")
    cuda_row = cm.release(rel.cuda)
    driver_min = cuda_row.driver_min if cuda_row else ""
    reasons.append(
        f"built with CUDA {rel.cuda_full} ({rel.cuda_from}) "
        f"and cuDNN {rel.cudnn} ({rel.cudnn_from})"
    )
    if cuda_row:
        major = rel.cuda.split(".")[0]
        rule = (
            f"any CUDA {major}.x runs on it (minor-version compatibility)"
            if int(major) >= 11
            else f"CUDA {rel.cuda}'s own minimum"
        )
        text = f"driver >= {driver_min}: {rule}"
        if k.driver is not None:
            origin = f" (read by {c.driver_from})" if c.driver_from else ""
            text += f"; driver {c.driver}{origin} is new enough"
        reasons.append(text)
    reasons.extend(placement.reasons)

    warnings: list[str] = list(placement.warnings)
    warnings.extend(_image_warnings(cm, placement))
    if rel.yanked:
        warnings.append(
            f"tensorflow {rel.version} is yanked on the index; used because it is pinned exactly"
        )
    warnings.extend(_compute_warnings(rel, k.gpus, gm))

    return Resolution(
        framework=FRAMEWORK,
        version=str(rel.version),
        python=python,
        python_supported=tuple(rel.python),
        cuda=rel.cuda,
        cudnn=rel.cudnn,
        driver_min=driver_min,
        compute_capabilities=tuple(rel.compute_capabilities),
        cuda_source=placement.source,
        os=placement.os.name,
        base_image=f"nvidia/cuda:{placement.tag}",
        base_image_digest=placement.image.digest(placement.tag),
        cuda_image_version=placement.image.version,
        image_cudnn=placement.image.cudnn if placement.source == "system" else None,
        and_cuda=tuple(rel.and_cuda),
        requires_python=rel.requires_python,
        matrix_version=matrix.data_version,
        matrix_digest=matrix.digest,
        warnings=tuple(warnings),
        reasons=tuple(reasons),
        os_python=placement.os.python,
    )


def _first_distinct(values: Iterable[str], limit: int) -> list[str]:
    out: list[str] = []
    for v in values:
        if v not in out:
            out.append(v)
    if len(out) > limit:
        out = [*out[:limit], f"and {len(out) - limit} more"]
    return out


def _distinct_text(values: Iterable[str]) -> str:
    out: list[str] = []
    for v in values:
        if v not in out:
            out.append(v)
    return "; ".join(out)
