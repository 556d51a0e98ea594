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
from envlock.lock.sdists import built_from_source
from envlock.model import ImageEndOfLife, Lock, Resolution
from envlock.render.options import PYTHON_SOURCES, RenderOptions, regenerate_command
from envlock.render.values import (
    DIGEST_RE,
    MINOR_RE,
    OS_RE,
    OS_SUFFIX_RE,
    Checked,
    check_digest,
    check_image,
    check_lock_fields,
    check_os,
    checked,
    image_path,
    label_key,
    os_of,
    python_minor,
    read_ca_cert,
    relative_path,
    split_digest,
    text,
    user_path,
    version,
    word,
)
from envlock.resolve.explain import image_warnings

CA_CERT_NAME = "envlock-ca.pem"
VENV = "/opt/venv"
BUNDLE_IN_IMAGE = "/opt/envlock"
USER = "envlock"
UID = 10001
# The uv release whose image provides the `uv` binary when the base image's
# Ubuntu has another Python minor than the lock (--python-from uv).
UV_IMAGE = "ghcr.io/astral-sh/uv:0.13.9"
FRAMEWORK_TITLES: Mapping[str, str] = {"tensorflow": "TensorFlow", "torch": "PyTorch", "jax": "JAX"}

# the frameworks the smoke harness has an adapter for (envlock/smoke/harness.py)
SMOKED = ("tensorflow", "torch", "jax")


def _cuda_of(gpu: Any, name: str) -> str:
    """The CUDA the lock's GPU facts give ``name`` ("" when they give none)."""
    for fact in gpu.packages if gpu is not None else ():
        if fact.name == name and fact.cuda:
            return str(fact.cuda)
    return ""


_NVIDIA_WHEEL_RE = re.compile(r"^nvidia-(.+)-cu\d+$")


@dataclass(frozen=True)
class BundleContext:
    """Everything the templates may use; nothing else reaches them.

    Every string is a ``Checked`` one (``envlock.render.values``): it passed the
    validator of its kind, and ``render_template`` refuses any other.
    """

    envlock_version: Checked
    regenerate: Checked  # the command that renders this bundle again
    framework: Checked
    framework_title: Checked
    version: Checked
    python: Checked
    cuda: Checked
    cudnn: Checked
    cuda_source: Checked
    # the whole lock's floor (its framework's alone in a lock without [tool.envlock.gpu])
    driver_min: Checked
    driver_set_by: Checked  # "torch 2.15.0 (CUDA 13.2, cuda-toolkit 13.2.2)"; "" when unknown
    framework_driver_min: Checked  # the framework's own floor
    # (name, version, CUDA, how it is known, driver floor) of each CUDA-carrying package
    cuda_packages: tuple[tuple[Checked, Checked, Checked, Checked, Checked], ...]
    # the frameworks the lock holds, the resolved one first (the smoke harness tests each)
    frameworks: tuple[Checked, ...]
    # each other framework of the lock (beside the resolved one): its name, its locked
    # version and the CUDA the lock's GPU facts give it ("" when none): what the smoke
    # harness judges that framework against (expect.json's "others")
    others: tuple[tuple[Checked, Checked, Checked], ...]
    compute_capabilities: tuple[Checked, ...]
    lock_digest: Checked  # sha256:<hex of pylock.toml>
    requirements_digest: Checked  # sha256:<hex of requirements.txt>
    package_count: int
    base_image: Checked  # default of ARG BASE_IMAGE (with @digest when pinned)
    resolved_base_image: Checked  # what envlock resolved, before any override
    base_overridden: bool
    base_pinned: bool
    os: Checked  # "ubuntu22.04", or "" when the base image is not an Ubuntu tag
    os_python: Checked  # the OS's own python3 minor, "" when unknown
    os_pythons: tuple[tuple[Checked, Checked], ...]  # (ubuntuXX.YY, python3 minor) from cuda.toml
    python_from: Checked  # image | apt | uv
    python_reason: Checked
    python_bin: Checked  # "python3.11"
    uv_image: Checked
    ca_cert: bool
    ca_cert_name: Checked
    venv: Checked
    site_packages: Checked  # inside the image
    bundle_dir: Checked  # inside the image
    lib_dirs: tuple[Checked, ...]  # nvidia-* wheel library folders, relative to site-packages
    bin_dirs: tuple[Checked, ...]  # nvidia-* wheel tool folders (ptxas), relative to site-packages
    glibc_min: Checked  # "2.17": the glibc the locked wheels need, "" when none names one
    user: Checked
    uid: int
    labels: tuple[tuple[Checked, Checked], ...]
    warnings: tuple[Checked, ...]
    end_of_life: tuple[Checked, ...]  # end-of-life notes about the base image
    top_requirements: tuple[Checked, ...]
    # the packages locked by a source archive (#41), built where the bundle installs
    from_source: tuple[Checked, ...] = ()


def _digest(data: bytes) -> Checked:
    from envlock.fsutil import sha256_bytes

    return checked(f"sha256:{sha256_bytes(data)}", "a digest", shape=DIGEST_RE, what="a digest")


def _wheel_dirs(lock: Lock) -> tuple[tuple[Checked, ...], tuple[Checked, ...]]:
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
    where = "the library folder of a locked nvidia-* wheel"
    return (
        tuple(relative_path(d, where) for d in sorted(set(libs))),
        tuple(relative_path(d, where) for d in sorted(set(bins))),
    )


_GLIBC_RE = re.compile(r"^\d+\.\d+$")
_MANYLINUX_RE = re.compile(r"^manylinux_(\d+)_(\d+)_")
_MANYLINUX_LEGACY = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


def _wheel_glibc(filename: str) -> tuple[int, int]:
    """The oldest glibc one wheel installs on: (0, 0) for a wheel that names none."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    try:
        tags = parse_wheel_filename(filename)[3]
    except InvalidWheelFilename:
        return (0, 0)
    floors: list[tuple[int, int]] = []
    for tag in tags:
        m = _MANYLINUX_RE.match(tag.platform)
        if m:
            floors.append((int(m.group(1)), int(m.group(2))))
        elif tag.platform.split("_", 1)[0] in _MANYLINUX_LEGACY:
            floors.append(_MANYLINUX_LEGACY[tag.platform.split("_", 1)[0]])
        else:  # any, or a tag that names no glibc
            floors.append((0, 0))
    return min(floors, default=(0, 0))


def glibc_floor(lock: Lock) -> str:
    """The glibc the lock needs: per package its most tolerant wheel (pip picks any
    wheel that fits), then the newest of those; "" when no wheel names a glibc."""
    need = max(
        (min((_wheel_glibc(w.filename) for w in p.wheels), default=(0, 0)) for p in lock.packages),
        default=(0, 0),
    )
    return f"{need[0]}.{need[1]}" if need != (0, 0) else ""


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


def _image_end_of_life(res: Resolution) -> ImageEndOfLife | None:
    """The base image's end of life: the resolution's own, else (a lock read from a
    file does not record it) found again by the same function from cuda.toml."""
    if res.image_end_of_life is not None:
        return res.image_end_of_life
    try:
        release = Version(res.cuda_image_version).release
    except InvalidVersion:
        return None
    end_of_life: ImageEndOfLife | None = _cuda_matrix().end_of_life(
        ".".join(str(p) for p in release[:2])
    )
    return end_of_life


def _end_of_life_note(eol: ImageEndOfLife, image: str) -> str:
    """The Dockerfile's END OF LIFE note for deleted or end-of-life images."""
    state = "were deleted" if eol.state == "deleted" else "are end of life"
    return (
        f"the nvidia/cuda {eol.cuda} images {state} ({eol.note}); NVIDIA deletes "
        f"end-of-life tags six months after end of life, so {image} may vanish: copy it to "
        "your own registry and render with --base-image"
    )


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
    # the options, each for its kind, before anything is computed from them
    if options.base_image is not None:
        check_image(options.base_image, "--base-image")
    if options.ca_cert is not None:
        user_path(options.ca_cert, "--ca-cert")
    if options.python_from is not None:
        text(options.python_from, "--python-from", UsageError)
    warnings = [" ".join(w.split()) for w in res.warnings]  # one line each in comments
    gpu = lock.gpu
    warnings += [" ".join(w.split()) for w in (gpu.problems if gpu else ())]

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
    base_image = check_image(base_image, "--base-image" if overridden else "the base image")
    # the end of life as data: resolve's words for an end-of-life image are the note
    # (a deleted image's "is gone" stays a warning), else render's own for the image
    eol = _image_end_of_life(res)
    end_of_life: list[str] = []
    if eol is not None and eol.state == "eol":
        resolved_name = split_digest(res.base_image)[0]
        end_of_life = [w for w in image_warnings(eol, resolved_name) if w in warnings]
    if eol is not None and eol.state in ("eol", "deleted") and not overridden and not end_of_life:
        end_of_life.append(_end_of_life_note(eol, name))
        warnings.append(end_of_life[-1])
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
    if res.framework != "tensorflow" and not any(p.name == "tensorflow" for p in lock.packages):
        # torch and JAX load the nvidia-* wheels' libraries from site-packages themselves
        # (torch: its libraries' RPATH and preload; JAX: its CUDA plugin), CUDA 13's
        # suffix-less wheels (nvidia/cu13/lib) included: the loader's path is left alone
        lib_dirs, bin_dirs = (), ()
    elif res.cuda_source == "pip" and not lib_dirs:
        warnings.append(
            "the lock uses the pip CUDA source but holds no nvidia-* wheels; TensorFlow "
            "will not find CUDA in this image"
        )

    lock_digest = _digest(pylock)
    title = word(FRAMEWORK_TITLES.get(res.framework, res.framework), "the framework's title")
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
    matrix = "cuda.toml: "
    return BundleContext(
        envlock_version=version(__version__, "envlock's version"),
        regenerate=text(regenerate_command(options), "the render command", UsageError),
        framework=word(res.framework, "the framework"),
        framework_title=title,
        version=version(res.version, "the framework's version"),
        python=python,
        cuda=version(res.cuda, "the CUDA version"),
        cudnn=version(res.cudnn, "the cuDNN version"),
        cuda_source=word(res.cuda_source, "the CUDA source"),
        driver_min=version(gpu.driver_min if gpu else res.driver_min, "the minimum driver"),
        driver_set_by=(
            text(gpu.set_by, "pylock.toml: tool.envlock.gpu.set_by") if gpu else Checked("")
        ),
        framework_driver_min=version(res.driver_min, "the framework's minimum driver"),
        frameworks=tuple(
            word(name, "a framework of the lock")
            for name in dict.fromkeys(
                [res.framework, *(p.name for p in lock.packages if p.name in SMOKED)]
            )
        ),
        others=tuple(
            (
                word(p.name, "a framework of the lock"),
                version(p.version, "a framework's locked version"),
                version(_cuda_of(gpu, p.name), "a framework's CUDA")
                if _cuda_of(gpu, p.name)
                else Checked(""),
            )
            for p in lock.packages
            if p.name in SMOKED and p.name != res.framework
        ),
        cuda_packages=tuple(
            (
                word(p.name, "pylock.toml: tool.envlock.gpu.packages: a name"),
                version(p.version, "pylock.toml: tool.envlock.gpu.packages: a version"),
                text(p.cuda or "unknown", "pylock.toml: tool.envlock.gpu.packages: a CUDA"),
                text(p.cuda_from, "pylock.toml: tool.envlock.gpu.packages: how"),
                text(
                    f">= {p.driver_min}" if p.driver_min else "unknown",
                    "pylock.toml: tool.envlock.gpu.packages: a driver",
                ),
            )
            for p in (gpu.packages if gpu else ())
        ),
        compute_capabilities=tuple(
            word(c, "a compute capability") for c in res.compute_capabilities
        ),
        lock_digest=lock_digest,
        requirements_digest=_digest(requirements),
        package_count=len(lock.packages),
        base_image=base_image,
        resolved_base_image=check_image(resolved, "pylock.toml: the resolved base image"),
        base_overridden=overridden,
        base_pinned=digest is not None,
        os=_optional(os_name, OS_RE, "the base image's Ubuntu release"),
        os_python=_optional(os_python, MINOR_RE, matrix + "the Ubuntu release's python3"),
        os_pythons=tuple(
            (
                checked(u.name, matrix + "an Ubuntu release", shape=OS_RE, what="a release"),
                checked(u.python, matrix + "a python3 minor", shape=MINOR_RE, what="a minor"),
            )
            for u in _cuda_matrix().ubuntu
        ),
        python_from=word(python_from, "--python-from"),
        python_reason=text(python_reason, "the Python source's reason"),
        python_bin=word(f"python{python}", "the Python command"),
        uv_image=check_image(UV_IMAGE, "the uv image"),
        ca_cert=ca_cert,
        ca_cert_name=word(CA_CERT_NAME, "the CA file's name"),
        venv=image_path(VENV, "the venv"),
        site_packages=image_path(f"{VENV}/lib/python{python}/site-packages", "site-packages"),
        bundle_dir=image_path(BUNDLE_IN_IMAGE, "the bundle folder"),
        lib_dirs=lib_dirs,
        bin_dirs=bin_dirs,
        glibc_min=_optional(glibc_floor(lock), _GLIBC_RE, "the locked wheels' manylinux tags"),
        user=word(USER, "the user"),
        uid=UID,
        labels=tuple(
            (label_key(key, "a label key"), text(value, f"the label {key}"))
            for key, value in labels
        ),
        warnings=tuple(text(w, "a warning") for w in dict.fromkeys(warnings)),
        end_of_life=tuple(text(w, "an end-of-life note") for w in end_of_life),
        top_requirements=tuple(
            text(r, "pylock.toml: [tool.envlock] top_requirements") for r in lock.top_requirements
        ),
        from_source=tuple(word(n, "pylock.toml: a package name") for n in built_from_source(lock)),
    )


def _optional(value: str | None, shape: re.Pattern[str], origin: str) -> Checked:
    """A value that may be absent ("" then): checked for its shape when present."""
    if not value:
        return Checked("")
    return checked(value, origin, shape=shape, what="a known value", error=DataError)


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
