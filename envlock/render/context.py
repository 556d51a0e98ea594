"""The one typed context every template renders from.

``bundle_context`` turns a Lock, the bytes of its two files and the
``RenderOptions`` into a ``BundleContext``: the base image (the resolved one,
or ``--base-image``/``--base-digest``/``--os``), where Python comes from
(``--python-from``), the nvidia-* wheel folders, the labels and the warnings.
Every value is checked by ``envlock.render.values`` first; nothing else
reaches the templates.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envlock import __version__
from envlock.errors import DataError, UsageError
from envlock.model import Lock
from envlock.render.options import PYTHON_SOURCES, RenderOptions, regenerate_command
from envlock.render.values import (
    OS_SUFFIX_RE,
    check_digest,
    check_image,
    check_lock_fields,
    check_os,
    os_of,
    python_minor,
    read_ca_cert,
    split_digest,
)

CA_CERT_NAME = "envlock-ca.pem"
VENV = "/opt/venv"
BUNDLE_IN_IMAGE = "/opt/envlock"
USER = "envlock"
UID = 10001
# The uv release whose image provides the `uv` binary when the base image's
# Ubuntu has another Python minor than the lock (--python-from uv).
UV_IMAGE = "ghcr.io/astral-sh/uv:0.13.9"
FRAMEWORK_TITLES: Mapping[str, str] = {"tensorflow": "TensorFlow", "torch": "PyTorch", "jax": "JAX"}

_NVIDIA_WHEEL_RE = re.compile(r"^nvidia-(.+)-cu\d+$")


@dataclass(frozen=True)
class BundleContext:
    """Everything the templates may use; nothing else reaches them."""

    envlock_version: str
    regenerate: str  # the command that renders this bundle again
    framework: str
    framework_title: str
    version: str
    python: str
    cuda: str
    cudnn: str
    cuda_source: str
    driver_min: str
    compute_capabilities: tuple[str, ...]
    lock_digest: str  # sha256:<hex of pylock.toml>
    requirements_digest: str  # sha256:<hex of requirements.txt>
    package_count: int
    base_image: str  # default of ARG BASE_IMAGE (with @digest when pinned)
    resolved_base_image: str  # what envlock resolved, before any override
    base_overridden: bool
    base_pinned: bool
    os: str  # "ubuntu22.04", or "" when the base image is not an Ubuntu tag
    os_python: str  # the OS's own python3 minor, "" when unknown
    os_pythons: tuple[tuple[str, str], ...]  # (ubuntuXX.YY, python3 minor) from cuda.toml
    python_from: str  # image | apt | uv
    python_reason: str
    python_bin: str  # "python3.11"
    uv_image: str
    ca_cert: bool
    ca_cert_name: str
    venv: str
    site_packages: str  # inside the image
    bundle_dir: str  # inside the image
    lib_dirs: tuple[str, ...]  # nvidia-* wheel library folders, relative to site-packages
    bin_dirs: tuple[str, ...]  # nvidia-* wheel tool folders (ptxas), relative to site-packages
    user: str
    uid: int
    labels: tuple[tuple[str, str], ...]
    warnings: tuple[str, ...]
    end_of_life: tuple[str, ...]  # end-of-life notes about the base image
    top_requirements: tuple[str, ...]


def _digest(data: bytes) -> str:
    from envlock.fsutil import sha256_bytes

    return f"sha256:{sha256_bytes(data)}"


def _wheel_dirs(lock: Lock) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Library and tool folders of the locked nvidia-* wheels, relative to site-packages.

    The nvidia-*-cuXX wheels unpack to ``nvidia/<component>/lib`` (the component
    is the project name between ``nvidia-`` and ``-cuXX`` with ``-`` made
    ``_``); TensorFlow 2.16/2.17 do not add these to the loader's path
    themselves (tensorflow issue #63362), so the bundle does. ``cuda-nvcc``
    also carries ``bin/ptxas``, which XLA looks for on PATH.
    """
    libs: list[str] = []
    bins: list[str] = []
    for pkg in lock.packages:
        m = _NVIDIA_WHEEL_RE.match(canonicalize_name(pkg.name))
        if not m:
            continue
        component = m.group(1).replace("-", "_")
        libs.append(f"nvidia/{component}/lib")
        if component == "cuda_nvcc":
            bins.append(f"nvidia/{component}/bin")
    return tuple(sorted(set(libs))), tuple(sorted(set(bins)))


@functools.lru_cache(maxsize=1)
def _cuda_matrix() -> Any:
    """cuda.toml (Ubuntu python3 minors, image tags, end-of-life); read once."""
    from envlock.matrix import cuda, read_toml

    doc, _digest, shown = read_toml("cuda.toml")
    return cuda.parse(doc, shown)


def _image_release(cuda_image_version: str) -> Any:
    for image in _cuda_matrix().images:
        if image.version == cuda_image_version:
            return image
    return None


def _end_of_life(cuda_image_version: str, image: str) -> list[str]:
    """End-of-life notes for the nvidia/cuda release of the base image."""
    try:
        release = Version(cuda_image_version).release
    except InvalidVersion:
        return []
    row = _cuda_matrix().release(".".join(str(p) for p in release[:2]))
    if row is None or row.images not in ("eol", "deleted"):
        return []
    state = "were deleted" if row.images == "deleted" else "are end of life"
    return [
        f"the nvidia/cuda {row.version} images {state} ({row.images_note}); NVIDIA deletes "
        f"end-of-life tags six months after end of life, so {image} may vanish: copy it to "
        "your own registry and render with --base-image"
    ]


def bundle_context(
    lock: Lock, options: RenderOptions, lock_files: Mapping[str, bytes]
) -> BundleContext:
    """Compute the one context every template renders from."""
    res = lock.resolution
    try:
        pylock = lock_files["pylock.toml"]
        requirements = lock_files["requirements.txt"]
    except KeyError as e:
        raise DataError(
            f"render_bundle needs the bytes of {e.args[0]}", hint="pass both lock files"
        ) from None
    python = python_minor(res.python)
    check_lock_fields(lock)
    warnings = [" ".join(w.split()) for w in res.warnings]  # one line each in comments

    resolved = res.base_image
    if res.base_image_digest and "@" not in resolved:
        resolved = f"{resolved}@{res.base_image_digest}"
    if options.base_digest:
        check_digest(options.base_digest, "--base-digest")

    if options.base_image:
        name, digest = split_digest(check_image(options.base_image, "--base-image"))
        overridden = True
    else:
        name, digest = split_digest(res.base_image)
        digest = digest or res.base_image_digest
        overridden = False

    os_name = os_of(name)
    if options.os:
        wanted = check_os(options.os)
        if os_name is None:
            raise UsageError(
                f"--os {wanted}: the base image {name} has no -ubuntuXX.YY tag to change",
                hint="give the full image with --base-image instead",
            )
        if wanted != os_name:
            image = _image_release(res.cuda_image_version)
            release = wanted.removeprefix("ubuntu")
            if image is not None and release not in image.os:
                raise UsageError(
                    f"--os {wanted}: nvidia/cuda {image.version} images exist for "
                    + ", ".join(f"ubuntu{o}" for o in image.os),
                    hint="pick one of those, or give an image with --base-image",
                )
            old_name, name = name, OS_SUFFIX_RE.sub(f"-{wanted}", name)
            known = None
            if image is not None and not overridden:
                known = image.digest(name.split(":", 1)[-1])
            if digest and not known and not options.base_digest:
                warnings.append(
                    f"the digest {digest} belongs to {old_name}, not {name}: the base image "
                    "is not pinned for --os " + wanted
                )
            digest = known
            os_name = wanted
    if options.base_digest:
        if digest and digest != options.base_digest:
            raise UsageError(
                f"--base-image carries {digest} but --base-digest says {options.base_digest}",
                hint="give the digest once",
            )
        digest = options.base_digest
    base_image = f"{name}@{digest}" if digest else name
    if not digest:
        warnings.append(
            f"the base image {name} is not pinned by digest; a rebuild may get other bytes "
            "(pass --base-digest sha256:...)"
        )

    ubuntu = _cuda_matrix().ubuntu_release(os_name) if os_name else None
    os_python = ubuntu.python if ubuntu is not None else ""
    said = any("end-of-life" in w or "end of life" in w for w in warnings)
    if not overridden and not said:
        warnings.extend(_end_of_life(res.cuda_image_version, name))
    python_from, python_reason = _python_source(options.python_from, python, os_name, os_python)
    if python_from == "apt" and os_python != python:
        raise UsageError(
            f"--python-from apt: {os_name or 'this base image'} ships "
            f"{('Python ' + os_python) if os_python else 'no known python3'}, the lock needs "
            f"Python {python}",
            hint="use --python-from uv (standalone CPython), or --os with an Ubuntu whose "
            "python3 is the lock's minor",
        )

    ca_cert = bool(options.ca_cert)
    if options.ca_cert:
        read_ca_cert(options.ca_cert)

    lib_dirs, bin_dirs = _wheel_dirs(lock)
    if res.cuda_source == "pip" and not lib_dirs:
        warnings.append(
            "the lock uses the pip CUDA source but holds no nvidia-* wheels; TensorFlow "
            "will not find CUDA in this image"
        )
    end_of_life = tuple(w for w in warnings if "end of life" in w.lower() or "end-of-life" in w)

    lock_digest = _digest(pylock)
    title = FRAMEWORK_TITLES.get(res.framework, res.framework)
    labels = (
        ("org.opencontainers.image.title", f"{res.framework} {res.version}"),
        (
            "org.opencontainers.image.description",
            f"{title} {res.version} on Python {python}, CUDA {res.cuda}, cuDNN {res.cudnn} "
            f"({res.cuda_source} CUDA source), locked by envlock",
        ),
        ("org.opencontainers.image.version", res.version),
        ("io.envlock.lock.digest", lock_digest),
        ("io.envlock.framework", res.framework),
        ("io.envlock.framework.version", res.version),
        ("io.envlock.python", python),
        ("io.envlock.cuda", res.cuda),
        ("io.envlock.cudnn", res.cudnn),
        ("io.envlock.cuda-source", res.cuda_source),
    )
    return BundleContext(
        envlock_version=__version__,
        regenerate=regenerate_command(options),
        framework=res.framework,
        framework_title=title,
        version=res.version,
        python=python,
        cuda=res.cuda,
        cudnn=res.cudnn,
        cuda_source=res.cuda_source,
        driver_min=res.driver_min,
        compute_capabilities=tuple(res.compute_capabilities),
        lock_digest=lock_digest,
        requirements_digest=_digest(requirements),
        package_count=len(lock.packages),
        base_image=base_image,
        resolved_base_image=resolved,
        base_overridden=overridden,
        base_pinned=digest is not None,
        os=os_name or "",
        os_python=os_python,
        os_pythons=tuple((u.name, u.python) for u in _cuda_matrix().ubuntu),
        python_from=python_from,
        python_reason=python_reason,
        python_bin=f"python{python}",
        uv_image=UV_IMAGE,
        ca_cert=ca_cert,
        ca_cert_name=CA_CERT_NAME,
        venv=VENV,
        site_packages=f"{VENV}/lib/python{python}/site-packages",
        bundle_dir=BUNDLE_IN_IMAGE,
        lib_dirs=lib_dirs,
        bin_dirs=bin_dirs,
        user=USER,
        uid=UID,
        labels=labels,
        warnings=tuple(dict.fromkeys(warnings)),
        end_of_life=end_of_life,
        top_requirements=tuple(lock.top_requirements),
    )


def _python_source(
    asked: str | None, python: str, os_name: str | None, os_python: str
) -> tuple[str, str]:
    if asked is not None:
        if asked not in PYTHON_SOURCES:
            raise UsageError(
                f"--python-from {asked!r} is not one of {', '.join(PYTHON_SOURCES)}",
                hint="image: the base image has pythonX.Y; apt: the OS's own python3; "
                "uv: a standalone CPython",
            )
        reasons = {
            "image": f"the base image already provides python{python} (--python-from image)",
            "apt": f"{os_name}'s own python3 is {python} (--python-from apt)",
            "uv": f"a standalone CPython {python} installed by uv (--python-from uv)",
        }
        return asked, reasons[asked]
    if os_python == python:
        return "apt", f"{os_name}'s own python3 is {python}, installed from its apt archive"
    where = f"{os_name}'s python3 is {os_python}" if os_python else "the base image's OS is unknown"
    return "uv", (
        f"{where}, so a relocatable standalone CPython {python} is installed with "
        "`uv python install` in the build stage and copied to the runtime stage"
    )
