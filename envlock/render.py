"""Render the bundle (Dockerfile, bootstrap.sh, README.md, ...) from a Lock.

One typed context (``BundleContext``) is computed here from the Lock and the
options; the text of every file lives in ``templates/`` (Jinja2 with
``StrictUndefined``), which hold only loops and conditionals over that context.
``render_bundle`` is pure: no network, no Docker; it reads only the packaged
templates, the smoke harness and, when asked for, the ``--ca-cert`` file.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envlock import __version__
from envlock.errors import DataError, UsageError
from envlock.model import Lock

EXECUTABLE: frozenset[str] = frozenset({"bootstrap.sh"})

PYTHON_SOURCES = ("image", "apt", "uv")
# render.json: the options a bundle was rendered with, so `envlock render DIR`
# and `envlock lock --check DIR` render it the same way again.
RENDER_JSON = "render.json"
RENDER_SCHEMA = "envlock.render/v1"
RECORDED_OPTIONS = ("base_image", "base_digest", "os", "ca_cert", "python_from")
CA_CERT_NAME = "envlock-ca.pem"
VENV = "/opt/venv"
BUNDLE_IN_IMAGE = "/opt/envlock"
USER = "envlock"
UID = 10001
# The uv release whose image provides the `uv` binary when the base image's
# Ubuntu has another Python minor than the lock (--python-from uv).
UV_IMAGE = "ghcr.io/astral-sh/uv:0.13.9"
FRAMEWORK_TITLES: Mapping[str, str] = {"tensorflow": "TensorFlow", "torch": "PyTorch", "jax": "JAX"}

_OS_RE = re.compile(r"^ubuntu(\d{2})\.(\d{2})$")
_OS_SUFFIX_RE = re.compile(r"-(ubuntu\d{2}\.\d{2})$")
_DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
# registry[:port]/path/name[:tag][@sha256:digest], as docker accepts them
_IMAGE_RE = re.compile(
    r"^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::[0-9]+)?/)?"
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
    r"(?:@sha256:[0-9a-f]{64})?$"
)
_NVIDIA_WHEEL_RE = re.compile(r"^nvidia-(.+)-cu\d+$")


@dataclass(frozen=True)
class RenderOptions:
    """How to render; None is "not given". All but ``runtime`` are recorded in render.json."""

    base_image: str | None = None  # FROM this instead of the resolved nvidia/cuda tag
    base_digest: str | None = None  # "sha256:..." pin for the base image
    os: str | None = None  # "ubuntu24.04": the same CUDA image on another Ubuntu
    ca_cert: str | None = None  # PEM file trusted by the build stage
    python_from: str | None = None  # image | apt | uv; None: chosen from the OS
    runtime: Mapping[str, Any] | None = None  # runtime.json settings to keep

    def recorded(self) -> dict[str, Any]:
        """The render.json document: the options as given, None where not given."""
        doc: dict[str, Any] = {"schema": RENDER_SCHEMA}
        doc.update((name, getattr(self, name)) for name in RECORDED_OPTIONS)
        return doc

    def over(self, recorded: Mapping[str, str | None]) -> RenderOptions:
        """These options, with the recorded ones standing in for those not given."""
        missing: dict[str, Any] = {
            name: recorded.get(name) for name in RECORDED_OPTIONS if getattr(self, name) is None
        }
        return replace(self, **missing)


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


# --------------------------------------------------------------------------- helpers


def _digest(data: bytes) -> str:
    from envlock.fsutil import sha256_bytes

    return f"sha256:{sha256_bytes(data)}"


def _python_minor(value: str) -> str:
    try:
        release = Version(value).release
    except InvalidVersion:
        raise DataError(
            f"pylock.toml: [tool.envlock] resolution.python {value!r} is not a version",
            hint="re-create the lock with `envlock lock`",
        ) from None
    if len(release) < 2 or release[0] != 3:
        raise DataError(
            f"pylock.toml: [tool.envlock] resolution.python {value!r} is not a CPython 3.X minor",
            hint="re-create the lock with `envlock lock`",
        )
    return f"{release[0]}.{release[1]}"


_PLAIN_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


def _check_lock_fields(lock: Lock) -> None:
    """Values of the lock that reach the Dockerfile and the script must be plain words."""
    res = lock.resolution
    fields = {
        "framework": res.framework,
        "version": res.version,
        "cuda": res.cuda,
        "cudnn": res.cudnn,
        "driver_min": res.driver_min,
        "cuda_source": res.cuda_source,
        "cuda_image_version": res.cuda_image_version,
        **{f"compute_capabilities[{i}]": c for i, c in enumerate(res.compute_capabilities)},
    }
    for key, value in fields.items():
        if not isinstance(value, str) or not _PLAIN_RE.match(value):
            raise DataError(
                f"pylock.toml: [tool.envlock] resolution.{key} {value!r} is not a plain value",
                hint="re-create the lock with `envlock lock`",
            )
    if not _IMAGE_RE.match(res.base_image) or (
        res.base_image_digest is not None and not _DIGEST_RE.match(res.base_image_digest)
    ):
        raise DataError(
            f"pylock.toml: [tool.envlock] resolution.base_image {res.base_image!r} "
            f"(digest {res.base_image_digest!r}) is not an image reference",
            hint="re-create the lock with `envlock lock`",
        )
    for pkg in lock.packages:
        if not _PLAIN_RE.match(pkg.name):
            raise DataError(
                f"pylock.toml: package name {pkg.name!r} is not a plain name",
                hint="re-create the lock with `envlock lock`",
            )


def _check_image(ref: str, origin: str) -> str:
    ref = ref.strip()
    if not _IMAGE_RE.match(ref):
        raise UsageError(
            f"{origin} {ref!r} is not an image reference",
            hint="write it as [registry/]name[:tag][@sha256:digest], e.g. "
            "nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04",
        )
    return ref


def _split_digest(ref: str) -> tuple[str, str | None]:
    if "@" in ref:
        name, digest = ref.split("@", 1)
        return name, digest
    return ref, None


def _check_digest(value: str, origin: str) -> str:
    value = value.strip()
    if not _DIGEST_RE.match(value):
        raise UsageError(
            f"{origin} {value!r} is not a sha256 digest",
            hint="write it as sha256: followed by 64 lowercase hex digits "
            "(docker buildx imagetools inspect IMAGE shows it)",
        )
    return value


def _check_os(value: str) -> str:
    value = value.strip().lower()
    if not _OS_RE.match(value):
        raise UsageError(
            f"--os {value!r} is not an Ubuntu release of the nvidia/cuda images",
            hint="write it as ubuntuXX.YY, e.g. ubuntu22.04",
        )
    return value


def _read_ca_cert(path: str) -> bytes:
    try:
        data = Path(path).expanduser().read_bytes()
    except FileNotFoundError:
        raise UsageError(
            f"--ca-cert {path}: no such file", hint="give the PEM file of the CA to trust"
        ) from None
    except OSError as e:
        raise UsageError(
            f"--ca-cert {path}: cannot read it ({e.strerror or e})",
            hint="give a readable PEM file",
        ) from None
    if b"-----BEGIN CERTIFICATE-----" not in data:
        raise UsageError(
            f"--ca-cert {path}: no PEM certificate in it",
            hint="give a PEM file (-----BEGIN CERTIFICATE-----), e.g. "
            "/etc/ssl/certs/ca-certificates.crt; convert DER with "
            "`openssl x509 -inform der -in CA.cer -out ca.pem`",
        )
    return data


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


def _harness() -> bytes:
    from importlib import resources

    source = resources.files("envlock") / "smoke" / "harness.py"
    if not source.is_file():
        raise DataError(
            "the smoke harness envlock/smoke/harness.py is missing from this envlock",
            hint="reinstall envlock",
        )
    return source.read_bytes()


def _runtime_module() -> bytes:
    from importlib import resources

    return (resources.files("envlock") / "bundle" / "envlock_runtime.py").read_bytes()


def runtime_settings(existing: Mapping[str, Any] | None) -> dict[str, Any]:
    """The runtime.json document: the defaults, or ``existing`` checked."""
    from envlock.bundle import envlock_runtime

    if existing is None:
        return dict(envlock_runtime.DEFAULTS)
    try:
        return envlock_runtime.validate(dict(existing))
    except envlock_runtime.ConfigError as e:
        raise UsageError(str(e), hint="fix runtime.json or delete it to get the defaults") from None


def read_runtime(directory: Path) -> dict[str, Any] | None:
    """An existing bundle's runtime.json (so re-rendering keeps the user's edits)."""
    path = directory / "runtime.json"
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UsageError(
            f"{path}: not readable JSON ({e})",
            hint="fix it or delete it to get the default runtime settings",
        ) from None
    return runtime_settings(data)


def read_render_options(directory: Path) -> dict[str, str | None] | None:
    """The options an existing bundle was rendered with (its render.json), or
    None when it has none (bundles made before envlock recorded them)."""
    path = directory / RENDER_JSON
    hint = "fix it, or delete it and give the render options on the command line"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UsageError(f"{path}: not readable JSON ({e})", hint=hint) from None
    if not isinstance(doc, dict) or doc.get("schema") != RENDER_SCHEMA:
        raise UsageError(f"{path}: not an {RENDER_SCHEMA} document", hint=hint)
    options: dict[str, str | None] = {}
    for name, value in doc.items():
        if name == "schema":
            continue
        if name not in RECORDED_OPTIONS:
            raise UsageError(f"{path}: unknown option {name!r}", hint=hint)
        if value is not None and not isinstance(value, str):
            raise UsageError(f"{path}: {name} must be a string or null, not {value!r}", hint=hint)
        options[name] = value
    return options


def _regenerate_command(options: RenderOptions) -> str:
    parts = ["envlock", "render", "."]
    if options.base_image:
        parts += ["--base-image", options.base_image]
    if options.base_digest:
        parts += ["--base-digest", options.base_digest]
    if options.os:
        parts += ["--os", options.os]
    if options.ca_cert:
        parts += ["--ca-cert", options.ca_cert]
    if options.python_from:
        parts += ["--python-from", options.python_from]
    return shlex.join(parts)


# --------------------------------------------------------------------------- context


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
    python = _python_minor(res.python)
    _check_lock_fields(lock)
    warnings = [" ".join(w.split()) for w in res.warnings]  # one line each in comments

    resolved = res.base_image
    if res.base_image_digest and "@" not in resolved:
        resolved = f"{resolved}@{res.base_image_digest}"
    if options.base_digest:
        _check_digest(options.base_digest, "--base-digest")

    if options.base_image:
        name, digest = _split_digest(_check_image(options.base_image, "--base-image"))
        overridden = True
    else:
        name, digest = _split_digest(res.base_image)
        digest = digest or res.base_image_digest
        overridden = False

    os_name = _os_of(name)
    if options.os:
        wanted = _check_os(options.os)
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
            old_name, name = name, _OS_SUFFIX_RE.sub(f"-{wanted}", name)
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
        _read_ca_cert(options.ca_cert)

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
        regenerate=_regenerate_command(options),
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


def _os_of(image: str) -> str | None:
    m = _OS_SUFFIX_RE.search(image)
    return m.group(1) if m else None


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


# --------------------------------------------------------------------------- rendering


def _dquote(value: object) -> str:
    """A double-quoted Dockerfile/shell word: backslash, quote, $ and ` escaped."""
    text = str(value)
    for ch in ("\\", '"', "$", "`"):
        text = text.replace(ch, "\\" + ch)
    return f'"{text}"'


@functools.lru_cache(maxsize=1)
def _environment() -> Any:
    """One Jinja2 environment per process; templates are compiled once."""
    import jinja2

    from envlock.resources import data_dir

    folder = data_dir("templates")

    def load(name: str) -> str:
        path = folder / name
        if not path.is_file():
            raise jinja2.TemplateNotFound(name)
        return path.read_text(encoding="utf-8")

    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(load),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["dquote"] = _dquote
    env.filters["shquote"] = lambda v: shlex.quote(str(v))
    return env


def render_template(name: str, ctx: BundleContext, **extra: Any) -> str:
    """Render one template of ``templates/`` with the bundle context."""
    import jinja2

    env = _environment()
    try:
        return str(env.get_template(name).render(ctx=ctx, **extra))
    except jinja2.UndefinedError as e:  # a template bug, not a user's mistake
        raise DataError(f"templates/{name}: {e.message}", hint="report this envlock bug") from e


def expect_document(ctx: BundleContext) -> dict[str, Any]:
    return {
        "framework": ctx.framework,
        "version": ctx.version,
        "python": ctx.python,
        "cuda": ctx.cuda,
        "cudnn": ctx.cudnn,
        "compute_capabilities": list(ctx.compute_capabilities),
        "lock_digest": ctx.lock_digest,
    }


def render_bundle(
    lock: Lock, options: RenderOptions, lock_files: Mapping[str, bytes]
) -> dict[str, str | bytes]:
    """Return {relative path: content} for every rendered bundle file."""
    ctx = bundle_context(lock, options, lock_files)
    files: dict[str, str | bytes] = {
        "Dockerfile": render_template("Dockerfile.j2", ctx),
        ".dockerignore": render_template("dockerignore.j2", ctx),
        "bootstrap.sh": render_template("bootstrap.sh.j2", ctx),
        "README.md": render_template("README.md.j2", ctx),
        "expect.json": json.dumps(expect_document(ctx), indent=2) + "\n",
        "runtime.json": json.dumps(runtime_settings(options.runtime), indent=2) + "\n",
        RENDER_JSON: json.dumps(options.recorded(), indent=2, sort_keys=True) + "\n",
        "envlock_runtime.py": _runtime_module(),
        "envlock_smoke.py": _harness(),
    }
    if options.ca_cert:
        files[CA_CERT_NAME] = _read_ca_cert(options.ca_cert)
    return files


def warnings_of(lock: Lock, options: RenderOptions, lock_files: Mapping[str, bytes]) -> list[str]:
    """What render would warn about (printed by the commands)."""
    return list(bundle_context(lock, options, lock_files).warnings)


__all__ = [
    "EXECUTABLE",
    "BundleContext",
    "RENDER_JSON",
    "RenderOptions",
    "bundle_context",
    "read_render_options",
    "read_runtime",
    "render_bundle",
    "render_template",
    "runtime_settings",
    "warnings_of",
]
