"""Plain, frozen data passed between the stages.

Each stage takes and returns these; ``to_dict``/``from_dict`` give the JSON
shape (the ``--json`` output and the ``[tool.envlock]`` table of pylock.toml).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

CUDA_SOURCES = ("system", "pip")

# The oldest CPython the smoke harness (envlock/smoke/harness.py) runs on; its
# tests run under it. Resolve and lock refuse an older Python: a bundle whose
# harness cannot run proves nothing.
OLDEST_PYTHON = "3.8"


IMAGE_STATES = ("deleted", "eol", "supported")


@dataclass(frozen=True)
class ImageEndOfLife:
    """The end of life of a CUDA release's nvidia/cuda images (cuda.toml), as data:
    resolve words it as a warning, render as the Dockerfile's END OF LIFE note."""

    cuda: str  # the CUDA release of the images, "11.8"
    state: str  # "deleted", "eol", or "supported" (until the end of a driver branch)
    note: str = ""  # cuda.toml's images_note for deleted and eol images
    branch: str | None = None  # supported: the driver branch, "R535"
    ends: str | None = None  # supported: the month it ends, "2026-06"


@dataclass(frozen=True)
class Resolution:
    """What goes together for one framework release on one target."""

    framework: str  # "tensorflow"
    version: str  # exact release, "2.15.1"
    python: str  # chosen CPython minor, "3.11"
    python_supported: tuple[str, ...]  # minors with Linux x86_64 wheels
    cuda: str  # CUDA the release was built with, "12.2"
    cudnn: str  # cuDNN major.minor it was built with, "8.9"
    driver_min: str  # minimum Linux driver, "525.60.13"
    compute_capabilities: tuple[str, ...]  # as compiled: "sm_60", ..., "compute_80"
    cuda_source: str  # "system" (CUDA from the base image) | "pip" (nvidia-* wheels)
    os: str  # base image OS, "ubuntu22.04"
    base_image: str  # full reference, "nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04"
    base_image_digest: str | None  # "sha256:..." when known
    cuda_image_version: str  # CUDA of the base image tag, "12.2.2"
    image_cudnn: str | None  # exact cuDNN inside the base image, "8.9.6.50", if known
    and_cuda: tuple[str, ...]  # the and-cuda extra's requirements, as written
    requires_python: str  # the wheel's Requires-Python
    matrix_version: str  # tensorflow.toml data_version
    matrix_digest: str  # sha256 of tensorflow.toml
    warnings: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()  # why this release / python / image was chosen
    os_python: str | None = None  # python3 minor of the base image's OS, "3.10"
    # the base image's end of life, as data (the warnings word it); not recorded in the
    # lock: reading a lock computes it again from cuda.toml (envlock.lock.pylock)
    image_end_of_life: ImageEndOfLife | None = field(default=None, compare=False)
    # the why lines (among ``reasons``) of the library caps the lock met, as their own
    # data for the command that prints them; not recorded either
    cap_reasons: tuple[str, ...] = field(default=(), compare=False)
    # the other frameworks of the same environment (``resolve tensorflow==2.20 torch==2.9``:
    # torch's answer, on the same CUDA major and Python); written only when there are some
    together: tuple[Resolution, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name in NOT_RECORDED:
                continue
            value = getattr(self, f.name)
            if f.name == "together":
                if value:
                    out[f.name] = [r.to_dict() for r in value]
                continue
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Resolution:
        kwargs: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in data or f.name in NOT_RECORDED:
                continue
            value = data[f.name]
            if f.name == "together":
                kwargs[f.name] = tuple(cls.from_dict(v) for v in value)
                continue
            kwargs[f.name] = tuple(value) if isinstance(value, list) else value
        return cls(**kwargs)


# Resolution fields to_dict leaves out (data for this run, found again when a lock is read)
NOT_RECORDED = frozenset({"image_end_of_life", "cap_reasons"})


@dataclass(frozen=True)
class LockedWheel:
    """One wheel file of a locked package: where it is and its hash."""

    filename: str
    url: str
    size: int
    sha256: str


@dataclass(frozen=True)
class LockedSdist:
    """The source archive of a locked package that has no wheel for the target
    (PEP 751 ``[packages.sdist]``)."""

    filename: str  # name-version.tar.gz / .zip
    url: str
    size: int
    sha256: str


@dataclass(frozen=True)
class LockedPackage:
    """One package of the locked closure, with its wheels for the target."""

    name: str  # normalized (PEP 503)
    version: str
    wheels: tuple[LockedWheel, ...]  # the wheels valid for the target; usually one
    # the locked packages this one requires (normalized names, sorted): the lock's
    # dependency graph, recorded as PEP 751 ``dependencies``; () when unknown
    dependencies: tuple[str, ...] = ()
    # the extra index its files come from (routed there: envlock.index.routing), its
    # URL without user and password, recorded as PEP 751 ``packages.index``; None: the
    # default index
    index: str | None = None
    # only where no wheel fits the target (then ``wheels`` is ()): its source
    # archive, built where the lock is installed (#41)
    sdist: LockedSdist | None = None

    @property
    def files(self) -> tuple[LockedWheel | LockedSdist, ...]:
        """Every file of it the lock allows: its wheels, or its source archive."""
        return self.wheels + ((self.sdist,) if self.sdist is not None else ())

    @property
    def hashes(self) -> tuple[str, ...]:
        """The sha256 of every file of it the lock allows, sorted."""
        found = {w.sha256 for w in self.wheels}
        if self.sdist is not None:
            found.add(self.sdist.sha256)
        return tuple(sorted(found))


@dataclass(frozen=True)
class Gpu:
    """A GPU the result should serve: from the host, or named with --gpu."""

    name: str
    compute_capability: str | None = None  # "9.0"; None: look the name up in gpus.toml
    market: str | None = None  # "datacenter", "geforce", "workstation"; None: unknown


@dataclass(frozen=True)
class Constraints:
    """What the user asked resolve for (checked by ``envlock.resolve``): made once by
    the command line, recorded in the lock's input and read back for ``--check``."""

    spec: str = "tensorflow"
    python: str | None = None  # "3.11"
    cuda: str | None = None  # "12.2" or "12": the CUDA TensorFlow was built with
    cudnn: str | None = None  # "8.9" or "8": the cuDNN TensorFlow was built with
    driver: str | None = None  # the host driver, "535.104.05" (never "auto" here)
    driver_from: str = ""  # where the driver came from: "", "NVML", "nvidia-smi"
    driver_cuda: str | None = None  # newest CUDA the detected driver supports, "13.0"
    os: str | None = None  # "ubuntu22.04"
    cuda_source: str | None = None  # None: system, falling back to pip; or as given
    gpus: tuple[Gpu, ...] = ()
    # --exclude-newer as a UTC instant (RFC 3339, checked by envlock.instant):
    # releases and files uploaded at or after it are left out
    exclude_newer: str | None = None
    # --pre: pre-releases (release candidates) are candidates too, as pip's and uv's
    # --pre; without it only a SPEC naming a pre-release admits them (PEP 440)
    prereleases: bool = False
    # --only-binary: wheels only, a source-only package refused (envlock before #41);
    # without it a package with no wheel for the target is locked by its sdist
    only_binary: bool = False


# The version of the lock's recorded input ([tool.envlock.input]). 1 (no
# schema_version key): envlock before the request was recorded whole: no GPUs,
# and a CUDA source or Python resolve chose written as if asked. 2: the
# constraints as asked, GPUs included.
INPUT_SCHEMA = 2


class InputError(ValueError):
    """A recorded input that does not have the shape of one: ``path`` inside the
    input table ("input.gpus[0].name"), ``problem`` what is wrong there (the reader
    names the file and the table: ``pylock.toml: tool.envlock.input.gpus[0].name: ...``)."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


def _optional_str(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise InputError(f"input.{key}", f"a {type(value).__name__}, not a string")
    return value


def _gpu_from_dict(data: object, i: int) -> Gpu:
    if not isinstance(data, dict):
        raise InputError(f"input.gpus[{i}]", "not a table")
    name = data.get("name", "")
    if not isinstance(name, str):
        raise InputError(f"input.gpus[{i}].name", "not a string")
    cc, market = data.get("compute_capability"), data.get("market")
    for key, value in (("compute_capability", cc), ("market", market)):
        if value is not None and not isinstance(value, str):
            raise InputError(f"input.gpus[{i}].{key}", "not a string")
    return Gpu(name, cc, market)


@dataclass(frozen=True)
class LockInput:
    """What the user asked for, recorded so the lock can be recomputed (--check):
    resolve's constraints as asked, and the pins (--with and -r lines, in order).
    Values resolve chose (the Python, a pip CUDA fallback) are not in here: they
    are in the Resolution, with their reasons, and are chosen again on --check."""

    constraints: Constraints = field(default_factory=Constraints)
    with_requirements: tuple[str, ...] = ()  # --with and -r lines, in order
    index_url: str | None = None  # only when given on the command line
    # --index NAME=URL (URL without user and password) and --route WHAT=NAME, in
    # order (envlock.index.routing); () without extra indexes
    indexes: tuple[tuple[str, str], ...] = ()
    routes: tuple[tuple[str, str], ...] = ()
    # a schema-1 input as it was read: written back as it stands (pylock.toml and
    # the Regenerate line keep their bytes), so `lock --check` of a bundle made
    # before schema 2 compares what the lock is, not how its input was recorded
    legacy: Mapping[str, Any] | None = field(default=None, compare=False, hash=False)

    @property
    def spec(self) -> str:
        return self.constraints.spec

    @property
    def exclude_newer(self) -> str | None:
        return self.constraints.exclude_newer

    def to_dict(self) -> dict[str, Any]:
        """The recorded form: flat keys in schema 1's order, values not given left out."""
        if self.legacy is not None:
            return dict(self.legacy)
        c = self.constraints
        out: dict[str, Any] = {"spec": c.spec, "with_requirements": list(self.with_requirements)}
        for key in ("python", "cuda", "cudnn", "driver", "driver_from", "driver_cuda", "os"):
            value = getattr(c, key)
            if value:
                out[key] = value
        if c.cuda_source is not None:
            out["cuda_source"] = c.cuda_source
        if c.gpus:
            out["gpus"] = [
                {
                    k: v
                    for k, v in (
                        ("name", g.name),
                        ("compute_capability", g.compute_capability),
                        ("market", g.market),
                    )
                    if v is not None
                }
                for g in c.gpus
            ]
        if self.index_url is not None:
            out["index_url"] = self.index_url
        out.update(_routing_dict(self.indexes, self.routes))
        if c.exclude_newer is not None:
            out["exclude_newer"] = c.exclude_newer
        if c.prereleases:  # a string, as every recorded value (uv's --prerelease allow)
            out["prereleases"] = "allow"
        if c.only_binary:  # as pip's and uv's --only-binary :all:
            out["only_binary"] = ":all:"
        out["schema_version"] = INPUT_SCHEMA
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any], resolution: Resolution | None = None) -> LockInput:
        """The recorded input; ``InputError`` when a value has the wrong type.

        Schema 1 (no ``schema_version``) recorded a pip CUDA fallback as
        ``cuda_source = "pip"`` and a ``ci lock`` cell's default Python as
        ``python``: with the ``resolution`` recorded beside it (whose reasons
        say which values were asked for), those are read as not asked."""
        schema = data.get("schema_version", 1)
        if schema not in (1, INPUT_SCHEMA):
            raise InputError(
                "input.schema_version",
                f"{schema!r} is not one this envlock reads "
                f"(1 or {INPUT_SCHEMA}): the lock was made by a newer envlock",
            )
        spec = data.get("spec")
        if not isinstance(spec, str):
            raise InputError("input.spec", "missing or not a string")
        pins = data.get("with_requirements", [])
        if not isinstance(pins, (list, tuple)) or not all(isinstance(p, str) for p in pins):
            raise InputError("input.with_requirements", "not a list of strings")
        gpus = data.get("gpus", [])
        if not isinstance(gpus, (list, tuple)):
            raise InputError("input.gpus", "not a list")
        allow = data.get("prereleases")
        if allow not in (None, "allow"):
            raise InputError("input.prereleases", f'{allow!r}, not "allow"')
        prereleases = allow == "allow"
        binary = data.get("only_binary")
        if binary not in (None, ":all:"):
            raise InputError("input.only_binary", f'{binary!r}, not ":all:"')
        strings = {
            key: _optional_str(data, key)
            for key in (
                "python",
                "cuda",
                "cudnn",
                "driver",
                "driver_from",
                "driver_cuda",
                "os",
                "cuda_source",
                "exclude_newer",
                "index_url",
            )
        }
        python, source = strings["python"], strings["cuda_source"]
        if schema == 1 and resolution is not None:
            reasons, warnings = resolution.reasons, resolution.warnings
            if python is not None and not any("as asked (--python)" in r for r in reasons):
                python = None  # a ci lock cell's default Python
            if (
                source == "pip"
                and "[and-cuda]" not in spec.replace(" ", "")
                and any(w.startswith("CUDA source pip, not system") for w in warnings)
            ):
                source = None  # resolve's fallback, not asked for
        constraints = Constraints(
            spec=spec,
            python=python,
            cuda=strings["cuda"],
            cudnn=strings["cudnn"],
            driver=strings["driver"],
            driver_from=strings["driver_from"] or "",
            driver_cuda=strings["driver_cuda"],
            os=strings["os"],
            cuda_source=source,
            gpus=tuple(_gpu_from_dict(g, i) for i, g in enumerate(gpus)),
            exclude_newer=strings["exclude_newer"],
            prereleases=prereleases,
            only_binary=binary == ":all:",
        )
        legacy = dict(data) if schema == 1 else None
        indexes = _pairs(data, "indexes", ("name", "url"))
        routes = _pairs(data, "routes", ("match", "index"))
        return cls(constraints, tuple(pins), strings["index_url"], indexes, routes, legacy)


def _routing_dict(
    indexes: tuple[tuple[str, str], ...], routes: tuple[tuple[str, str], ...]
) -> dict[str, Any]:
    """The recorded extra indexes and routes (none: no keys, as before #41)."""
    from envlock.door import redact

    if not indexes and not routes:
        return {}
    return {
        "indexes": [{"name": n, "url": redact(u)} for n, u in indexes],
        "routes": [{"match": m, "index": i} for m, i in routes],
    }


def _pairs(data: dict[str, Any], key: str, names: tuple[str, str]) -> tuple[tuple[str, str], ...]:
    rows = data.get(key, [])
    if not isinstance(rows, (list, tuple)) or len(rows) > 1000:
        raise InputError(f"input.{key}", "not a list of at most 1000 tables")
    out = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or set(row) != set(names):
            raise InputError(f"input.{key}[{i}]", f"not a table of {' and '.join(names)}")
        a, b = row[names[0]], row[names[1]]
        if not isinstance(a, str) or not isinstance(b, str):
            raise InputError(f"input.{key}[{i}]", "values are not strings")
        out.append((a, b))
    return tuple(out)


@dataclass(frozen=True)
class PackageCuda:
    """The CUDA one locked distribution brings or needs (envlock.lock.gpufacts)."""

    name: str  # normalized
    version: str
    family: str  # the matrices/cuda-wheels.toml family, "torch"
    cuda: str | None  # "13.2", or only the major "13"; None: not known
    cuda_from: str  # how it is known: "torch/version.py", "+cu128", "the name", ...
    cudnn: str | None = None  # the cuDNN release it is, for nvidia-cudnn-cuNN
    driver_min: str | None = None  # the oldest driver that runs its CUDA at all
    toolkit_driver: str | None = None  # the oldest that JIT-compiles its CUDA's PTX

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class GpuFacts:
    """What the whole closure needs of the GPU machine: one driver floor, named with
    the packages that set it, and the CUDA facts of every CUDA-carrying package."""

    packages: tuple[PackageCuda, ...]  # sorted by name
    driver_min: str  # the highest floor any package needs
    set_by: str  # "torch 2.15.0 (CUDA 13.2, cuda-toolkit 13.2.2)"
    framework_driver_min: str  # the framework's own floor (its matrix row)
    toolkit_driver: str | None  # the highest PTX JIT floor known, if any
    toolkit_set_by: str  # "" when toolkit_driver is None
    files_read: bool  # the wheels' file lists were read (not --offline)
    problems: tuple[str, ...] = ()  # each names a package
    rules_version: str = ""  # matrices/cuda-wheels.toml data_version

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "driver_min": self.driver_min,
            "set_by": self.set_by,
            "framework_driver_min": self.framework_driver_min,
        }
        if self.toolkit_driver is not None:
            out["toolkit_driver"] = self.toolkit_driver
            out["toolkit_set_by"] = self.toolkit_set_by
        out["files_read"] = self.files_read
        out["problems"] = list(self.problems)
        out["rules_version"] = self.rules_version
        out["packages"] = [p.to_dict() for p in self.packages]
        return out


@dataclass(frozen=True)
class Lock:
    """A whole locked closure for one target, plus how it was made."""

    resolution: Resolution
    input: LockInput
    packages: tuple[LockedPackage, ...]  # sorted by name
    resolver: str  # "uv" | "pip"
    resolver_version: str
    top_requirements: tuple[str, ...] = field(default=())  # what was given to the resolver
    # the CUDA facts of the closure; None in a lock made before envlock read them
    gpu: GpuFacts | None = None
    # build-constraints.txt: the build requirements of the locked sdists, pinned
    # with hashes (one ``name==version --hash=sha256:...`` line each); () without sdists
    build_constraints: tuple[str, ...] = ()
