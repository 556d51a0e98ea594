"""PEP 751 pylock.toml: write it from a Lock, read a Lock back from it.

Written with tomli-w from plain data (sorted packages, sorted wheels, no
clock), so the same lock always gives the same bytes; read back and validated
with ``packaging.pylock``. ``[tool.envlock]`` carries what
``envlock render`` and ``envlock lock --check`` need to start again: the
resolution, the user's input, the resolver and its version, and the
requirements handed to the resolver.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from envlock.door import bad_character, carries_secret, redact, shown
from envlock.errors import DataError
from envlock.lock.sdists import (
    built_from_source,
    check_build_constraints,
    check_sdist,
    sdist_entry,
    sdist_from_pylock,
    source_header,
)
from envlock.lockplatform import Target
from envlock.model import (
    GpuFacts,
    InputError,
    Lock,
    LockedPackage,
    LockedWheel,
    LockInput,
    PackageCuda,
    Resolution,
)

PYLOCK = "pylock.toml"


# TOML allows a tab in a comment, no other control character.
_NOT_IN_COMMENT = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def comment(line: str) -> str:
    """``line`` as one comment line; control characters are shown escaped (``\\x7f``)."""
    if not line:
        return "#"
    return "# " + _NOT_IN_COMMENT.sub(lambda m: f"\\x{ord(m.group()):02x}", line)


def target_of(lock: Lock) -> Target:
    return Target.for_lock(lock.resolution.python, lock.resolution.os)


def resolve_argv(inp: LockInput) -> list[str]:
    """The recorded constraints as ``envlock resolve`` arguments, for the Regenerate
    line people read and paste (``--check`` reads the recorded input itself). A GPU
    is named as it was given: by name, else by compute capability (host GPUs from
    ``--driver auto``/``--gpu auto`` keep their recorded brand only in the lock)."""
    if inp.legacy is not None:  # schema 1: its line as it was written
        args = [str(inp.legacy.get("spec", ""))]
        for flag, key in (
            ("--python", "python"),
            ("--cuda", "cuda"),
            ("--cudnn", "cudnn"),
            ("--driver", "driver"),
            ("--os", "os"),
            ("--cuda-source", "cuda_source"),
            ("--exclude-newer", "exclude_newer"),
        ):
            if inp.legacy.get(key):
                args += [flag, str(inp.legacy[key])]
        return args
    c = inp.constraints
    args = [c.spec]
    for flag, value in (
        ("--python", c.python),
        ("--cuda", c.cuda),
        ("--cudnn", c.cudnn),
        ("--driver", c.driver),
        ("--os", c.os),
        ("--cuda-source", c.cuda_source),
    ):
        if value:
            args += [flag, value]
    for gpu in c.gpus:
        if gpu.name and gpu.compute_capability is None:
            args += ["--gpu", gpu.name]
        elif gpu.compute_capability:
            args += ["--gpu", gpu.compute_capability]
    if c.exclude_newer:
        args += ["--exclude-newer", c.exclude_newer]
    return args


def routing_argv(inp: LockInput) -> list[str]:
    """The recorded extra indexes and routes as --index / --route flags."""
    args: list[str] = []
    for name, url in inp.indexes:
        args += ["--index", f"{name}={redact(url)}"]
    for match, index in inp.routes:
        args += ["--route", f"{match}={index}"]
    return args


def regenerate_command(lock: Lock, out: str = ".") -> str:
    """The envlock command line that makes this lock again."""
    inp = lock.input
    args = ["envlock", "lock", *resolve_argv(inp)]
    for req in inp.with_requirements:
        args += ["--with", req]
    if lock.resolver != "uv":
        args += ["--resolver", lock.resolver]
    if inp.constraints.only_binary:
        args.append("--only-binary")
    if inp.index_url:
        args += ["--index-url", redact(inp.index_url)]
    args += routing_argv(inp)
    args += ["-o", out]
    return shlex.join(args)


def describe(lock: Lock) -> str:
    r = lock.resolution
    return (
        f"{r.framework} {r.version} for {target_of(lock).describe()}; "
        f"CUDA {r.cuda}, cuDNN {r.cudnn}, CUDA source: {r.cuda_source}"
    )


def driver_line(lock: Lock) -> str:
    """The driver the whole lock needs, and what sets it (a lock made before envlock
    read the closure's CUDA: its framework's floor alone)."""
    gpu = lock.gpu
    if gpu is None:
        return f"Needs an NVIDIA driver >= {lock.resolution.driver_min}."
    line = f"Needs an NVIDIA driver >= {gpu.driver_min}: {gpu.set_by}"
    if gpu.driver_min != gpu.framework_driver_min:
        r = lock.resolution
        line += f" ({r.framework} {r.version} alone: >= {gpu.framework_driver_min})"
    return line + "."


def _without_none(data: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if v is not None}


def routed_index(pkg: LockedPackage) -> dict[str, str]:
    """PEP 751 ``index`` of a package routed to an extra index (envlock.index.routing):
    its URL without user and password; nothing for the default index."""
    return {"index": redact(pkg.index)} if pkg.index else {}


def pylock_document(lock: Lock) -> dict[str, Any]:
    """The PEP 751 document of ``lock`` as TOML-ready plain data (sorted, no clock)."""
    target = target_of(lock)
    packages = [
        {
            "name": pkg.name,
            "version": pkg.version,
            # PEP 751: the locked packages this one requires (the `# via` lines)
            **(
                {"dependencies": [{"name": d} for d in pkg.dependencies]}
                if pkg.dependencies
                else {}
            ),
            **routed_index(pkg),
            # a package with no wheel for the target: its source archive (#41)
            **({"sdist": sdist_entry(pkg.sdist)} if pkg.sdist is not None else {}),
            **(
                {
                    "wheels": [
                        # a wheel URL made absolute against an index URL with a password
                        # carries it: the lock records the URL without user and password
                        {
                            "name": w.filename,
                            "url": redact(w.url),
                            "size": w.size,
                            "hashes": {"sha256": w.sha256},
                        }
                        for w in sorted(pkg.wheels, key=lambda w: w.filename)
                    ]
                }
                if pkg.wheels or pkg.sdist is None
                else {}
            ),
        }
        for pkg in sorted(lock.packages, key=lambda p: p.name)
    ]
    tool = {
        "resolver": lock.resolver,
        "resolver_version": lock.resolver_version,
        "platform": target.manylinux,
        "top_requirements": list(lock.top_requirements),
        "resolution": _without_none(lock.resolution.to_dict()),
        "input": lock.input.to_dict(),
    }
    if lock.gpu is not None:
        tool["gpu"] = lock.gpu.to_dict()
    if lock.build_constraints:
        tool["build_constraints"] = list(lock.build_constraints)
    return {
        "lock-version": "1.0",
        "environments": [target.environment],
        "requires-python": f"=={target.python}.*",
        "created-by": "envlock",
        "packages": packages,
        "tool": {"envlock": tool},
    }


def pylock_text(lock: Lock) -> str:
    """pylock.toml: a header saying how to use and remake it, then the document (tomli-w)."""
    header = [
        f"PEP 751 lock made by envlock: {describe(lock)}.",
        # a lock made before envlock read the closure's CUDA is written as it was
        *([driver_line(lock)] if lock.gpu else []),
        f"Resolved with {lock.resolver} {lock.resolver_version} from: "
        + " ".join(lock.top_requirements),
        *(
            [
                "Install into a fresh venv, through your configured index (the wheel URLs",
                "  carried credentials and are recorded without them):",
                "  pip install --require-hashes --no-deps -r requirements.txt",
            ]
            if any(carries_secret(w.url) for p in lock.packages for w in p.wheels)
            else [
                "Install into a fresh venv: uv pip install -r pylock.toml",
                "  (or: pip install --require-hashes --no-deps -r requirements.txt)",
            ]
        ),
        *source_header(lock),
        f"Regenerate (in this folder): {regenerate_command(lock)}",
        "Check it is current:         envlock lock --check .",
    ]
    check_lock(
        lock,
        "the lock to write",
        hint="give the spec, --with and -r requirements without control characters",
    )
    import tomli_w  # writing only: reading a lock (doctor on a bare python3) needs it not

    return "".join(comment(line) + "\n" for line in header) + tomli_w.dumps(pylock_document(lock))


def _resolution(data: Mapping[str, Any], where: str) -> Resolution:
    full: dict[str, Any] = {f.name: None for f in fields(Resolution)}
    full.update(data)
    required = ("framework", "version", "python", "cuda", "cudnn", "cuda_source", "os")
    missing = [k for k in required if not isinstance(full.get(k), str)]
    if missing:
        named = ", ".join(f"tool.envlock.resolution.{k}" for k in missing)
        raise DataError(
            f"{where}: {named}: missing or not a string",
            hint="the lock was edited or damaged: re-create it with `envlock lock`",
        )
    for f in fields(Resolution):
        if full[f.name] is None and "tuple" in str(f.type):
            full[f.name] = ()
    return Resolution.from_dict(full)


# The shapes of the [tool.envlock] fields that reach generated files; every
# other string field must at least be one line without control characters.
_WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
_VERSION = re.compile(r"^[0-9][A-Za-z0-9._+-]*$")
_SHAPES: Mapping[str, tuple[re.Pattern[str], str]] = {
    "resolution.framework": (_WORD, "a plain name"),
    "resolution.version": (_VERSION, "a version"),
    "resolution.python": (_VERSION, "a version"),
    "resolution.cuda": (_VERSION, "a version"),
    "resolution.cudnn": (_VERSION, "a version"),
    "resolution.driver_min": (_VERSION, "a version"),
    "resolution.cuda_image_version": (_VERSION, "a version"),
    "resolution.image_cudnn": (_VERSION, "a version"),
    "resolution.cuda_source": (_WORD, "a plain name"),
    "resolution.os": (_WORD, "a plain name"),
    "resolution.os_python": (_VERSION, "a version"),
    "resolution.compute_capabilities": (_WORD, "a plain name"),
    "resolution.python_supported": (_VERSION, "a version"),
    "resolution.base_image": (re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]*$"), "an image reference"),
    "resolution.base_image_digest": (re.compile(r"^sha256:[0-9a-f]{64}$"), "a sha256 digest"),
    "resolver": (re.compile(r"^(?:uv|pip)$"), "uv or pip"),
    "resolver_version": (_VERSION, "a version"),
    "input.index_url": (re.compile(r"^(?:https?|file)://\S+$"), "an http(s) or file URL"),
    "input.cuda_source": (re.compile(r"^(?:system|pip)$"), "system or pip"),
    "input.gpus.compute_capability": (re.compile(r"^[0-9]{1,2}\.[0-9]$"), "a compute capability"),
    "input.gpus.market": (_WORD, "a plain name"),
    "input.driver_from": (_WORD, "a plain name"),
    "input.exclude_newer": (
        re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?Z$"),
        "an RFC 3339 instant in UTC",
    ),
    "package.name": (re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$"), "a name"),
    "wheel.sha256": (re.compile(r"^[0-9a-f]{64}$"), "64 lowercase hex digits"),
    "wheel.url": (re.compile(r"^(?:https?|file)://\S+$"), "an http(s) or file URL"),
    "wheel.filename": (re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*\.whl$"), "a wheel file name"),
}
_MAX_FIELD = 4096


_DAMAGED = "the lock was edited or damaged: re-create it with `envlock lock`"


def _check_value(value: object, field: str, shape: str, where: str, hint: str = _DAMAGED) -> None:
    """One string field of the lock: a string, one line, no control characters, its shape."""
    problem = None
    if not isinstance(value, str):
        problem = f"is a {type(value).__name__}, not a string"
    elif len(value) > _MAX_FIELD:
        problem = f"is longer than {_MAX_FIELD} characters"
    elif bad_character(value) is not None:
        problem = f"holds the control character {bad_character(value)}"
    elif shape in _SHAPES and not _SHAPES[shape][0].match(value):
        problem = f"is not {_SHAPES[shape][1]}"
    if problem is not None:
        text = shown(value) if isinstance(value, str) else repr(value)[:80]
        raise DataError(f"{where}: {field}: {text} {problem}", hint=hint)


_GPU_KEYS = (
    "driver_min",
    "set_by",
    "framework_driver_min",
    "toolkit_driver",
    "toolkit_set_by",
    "files_read",
    "problems",
    "rules_version",
    "packages",
)
_PACKAGE_KEYS = tuple(f.name for f in fields(PackageCuda))
_MAX_GPU_PACKAGES = 4096


def gpu_facts(data: object, where: str) -> GpuFacts:
    """``[tool.envlock.gpu]`` read back: every key known, every value of its kind
    (the strings are checked for their shape by ``check_lock``)."""
    name = "tool.envlock.gpu"

    def bad(key: str, problem: str) -> DataError:
        return DataError(f"{where}: {name}{key}: {problem}", hint=_DAMAGED)

    if not isinstance(data, dict):
        raise bad("", "not a table")
    unknown = sorted(set(data) - set(_GPU_KEYS))
    if unknown:
        raise bad(f".{unknown[0]}", "unknown key")
    for key in ("driver_min", "set_by", "framework_driver_min", "rules_version"):
        if not isinstance(data.get(key), str):
            raise bad(f".{key}", "missing or not a string")
    if not isinstance(data.get("files_read"), bool):
        raise bad(".files_read", "missing or not true/false")
    toolkit = data.get("toolkit_driver")
    if toolkit is not None and not isinstance(toolkit, str):
        raise bad(".toolkit_driver", "not a string")
    if not isinstance(data.get("toolkit_set_by", ""), str):
        raise bad(".toolkit_set_by", "not a string")
    problems = data.get("problems", [])
    if not isinstance(problems, list) or not all(isinstance(p, str) for p in problems):
        raise bad(".problems", "not a list of strings")
    rows = data.get("packages", [])
    if not isinstance(rows, list) or len(rows) > _MAX_GPU_PACKAGES:
        raise bad(".packages", f"not a list of at most {_MAX_GPU_PACKAGES} tables")
    packages = []
    for i, row in enumerate(rows):
        at = f".packages[{i}]"
        if not isinstance(row, dict):
            raise bad(at, "not a table")
        extra = sorted(set(row) - set(_PACKAGE_KEYS))
        if extra:
            raise bad(f"{at}.{extra[0]}", "unknown key")
        for key in _PACKAGE_KEYS:
            value = row.get(key)
            required = key in ("name", "version", "family", "cuda_from")
            if (required and not isinstance(value, str)) or (
                value is not None and not isinstance(value, str)
            ):
                raise bad(f"{at}.{key}", "missing or not a string" if required else "not a string")
        values: dict[str, Any] = {k: row.get(k) for k in _PACKAGE_KEYS}
        packages.append(PackageCuda(**values))
    return GpuFacts(
        packages=tuple(packages),
        driver_min=data["driver_min"],
        set_by=data["set_by"],
        framework_driver_min=data["framework_driver_min"],
        toolkit_driver=toolkit,
        toolkit_set_by=data.get("toolkit_set_by", ""),
        files_read=data["files_read"],
        problems=tuple(problems),
        rules_version=data["rules_version"],
    )


def _check_gpu(gpu: GpuFacts, where: str, hint: str) -> None:
    base = "tool.envlock.gpu"
    for key in ("driver_min", "framework_driver_min", "toolkit_driver"):
        value = getattr(gpu, key)
        if value is not None:
            _check_value(value, f"{base}.{key}", "resolution.driver_min", where, hint=hint)
    for key in ("set_by", "toolkit_set_by", "rules_version"):
        _check_value(getattr(gpu, key), f"{base}.{key}", "", where, hint=hint)
    for i, problem in enumerate(gpu.problems):
        _check_value(problem, f"{base}.problems[{i}]", "", where, hint=hint)
    for i, pkg in enumerate(gpu.packages):
        at = f"{base}.packages[{i}]"
        _check_value(pkg.name, f"{at}.name", "package.name", where, hint=hint)
        _check_value(pkg.version, f"{at}.version", "resolution.version", where, hint=hint)
        _check_value(pkg.family, f"{at}.family", "resolution.framework", where, hint=hint)
        _check_value(pkg.cuda_from, f"{at}.cuda_from", "", where, hint=hint)
        for key in ("cuda", "cudnn", "driver_min", "toolkit_driver"):
            value = getattr(pkg, key)
            if value is not None:
                _check_value(value, f"{at}.{key}", "resolution.version", where, hint=hint)


def check_lock(lock: Lock, where: str, hint: str = _DAMAGED) -> None:
    """Every string of ``lock`` checked for its kind: the lock is read, not trusted,
    and envlock never writes a lock its own reader would refuse."""
    recorded = lock.input.to_dict()
    recorded.pop("schema_version", None)
    for group, record in (("resolution", lock.resolution.to_dict()), ("input", recorded)):
        for key, value in record.items():
            name = f"tool.envlock.{group}.{key}"
            if value is None:
                continue
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if isinstance(item, dict):  # a GPU: name, compute_capability, market
                        for k, v in item.items():
                            _check_value(v, f"{name}[{i}].{k}", f"{group}.{key}.{k}", where, hint)
                    else:
                        _check_value(item, f"{name}[{i}]", f"{group}.{key}", where, hint=hint)
            else:
                _check_value(value, name, f"{group}.{key}", where, hint=hint)
    _check_value(lock.resolver, "tool.envlock.resolver", "resolver", where, hint=hint)
    if lock.resolver_version:
        _check_value(
            lock.resolver_version,
            "tool.envlock.resolver_version",
            "resolver_version",
            where,
            hint=hint,
        )
    for i, req in enumerate(lock.top_requirements):
        _check_value(req, f"tool.envlock.top_requirements[{i}]", "", where, hint=hint)
    if lock.gpu is not None:
        _check_gpu(lock.gpu, where, hint)
    for i, pkg in enumerate(lock.packages):
        _check_value(pkg.name, f"packages[{i}].name", "package.name", where, hint=hint)
        for k, dep in enumerate(pkg.dependencies):
            field = f"packages[{i}].dependencies[{k}].name"
            _check_value(dep, field, "package.name", where, hint=hint)
        _check_value(pkg.version, f"packages[{i}].version", "resolution.version", where, hint=hint)
        if pkg.index is not None:
            _check_value(pkg.index, f"packages[{i}].index", "wheel.url", where, hint=hint)
        for j, w in enumerate(pkg.wheels):
            for key in ("filename", "url", "sha256"):
                _check_value(
                    getattr(w, key),
                    f"packages[{i}].wheels[{j}].{key}",
                    f"wheel.{key}",
                    where,
                    hint=hint,
                )
        if pkg.sdist is not None:
            check_sdist(pkg.sdist, pkg.name, pkg.version, f"packages[{i}].sdist", where, hint)
    check_build_constraints(lock.build_constraints, where, hint)


def _check_routing(lock_input: LockInput, where: str) -> None:
    """The recorded extra indexes and routes hold together as the flags must."""
    from envlock.errors import UsageError
    from envlock.index.routing import from_pairs

    if not lock_input.indexes and not lock_input.routes:
        return
    try:
        from_pairs(lock_input.indexes, lock_input.routes)
    except UsageError as e:
        raise DataError(f"{where}: tool.envlock.input: {e.message}", hint=_DAMAGED) from None


def parse_pylock(text: str, where: str) -> Lock:
    """A Lock from pylock.toml text, read through ``packaging.pylock``; ``where`` names
    the file in errors."""
    from packaging.pylock import Pylock, PylockValidationError

    from envlock.readers import parse_toml

    doc = parse_toml(text, where, hint="regenerate it with envlock lock", error=DataError)
    try:
        pylock = Pylock.from_dict(doc)
    except PylockValidationError as e:
        raise DataError(
            f"{where}: not a valid PEP 751 lock: {e}", hint="regenerate it with envlock lock"
        ) from None
    tool = (pylock.tool or {}).get("envlock")
    if not isinstance(tool, dict):
        raise DataError(
            f"{where}: no [tool.envlock] table (not made by envlock lock)",
            hint="make the bundle with envlock lock SPEC -o DIR",
        )
    try:
        resolution = _resolution(tool.get("resolution") or {}, where)
        lock_input = LockInput.from_dict(tool.get("input") or {}, resolution)
    except InputError as e:
        raise DataError(f"{where}: tool.envlock.{e.path}: {e.problem}", hint=_DAMAGED) from None
    except TypeError as e:
        raise DataError(f"{where}: [tool.envlock] is incomplete ({e})") from None
    _check_routing(lock_input, where)
    packages: list[LockedPackage] = []
    for i, pkg in enumerate(pylock.packages):
        wheels = []
        for j, w in enumerate(pkg.wheels or ()):
            sha = w.hashes.get("sha256")
            if not sha or not w.url or w.size is None:
                raise DataError(
                    f"{where}: packages[{i}].wheels[{j}]: url, size and sha256 are required"
                )
            wheels.append(LockedWheel(filename=w.filename, url=w.url, size=w.size, sha256=sha))
        sdist = None
        if pkg.sdist is not None and pkg.version is not None:
            field = f"packages[{i}].sdist"
            sdist = sdist_from_pylock(pkg.sdist, pkg.name, str(pkg.version), field, where)
            if wheels:
                raise DataError(
                    f"{where}: packages[{i}] ({pkg.name}) has wheels and a source archive; "
                    "envlock records the sdist only of a package with no wheel for the target",
                    hint=_DAMAGED,
                )
        if (not wheels and sdist is None) or pkg.version is None:
            raise DataError(f"{where}: packages[{i}] ({pkg.name}) has no version or no wheels")
        deps: list[str] = []
        for k, dep in enumerate(pkg.dependencies or ()):
            dep_name = dep.get("name") if isinstance(dep, Mapping) else None
            if not isinstance(dep_name, str):
                raise DataError(f"{where}: packages[{i}].dependencies[{k}] has no name")
            deps.append(dep_name)
        packages.append(
            LockedPackage(
                name=pkg.name,
                version=str(pkg.version),
                wheels=tuple(wheels),
                dependencies=tuple(sorted(set(deps))),
                index=pkg.index,
                sdist=sdist,
            )
        )
    top = tool.get("top_requirements") or ()
    if not isinstance(top, (list, tuple)):
        raise DataError(f"{where}: tool.envlock.top_requirements: not a list", hint=_DAMAGED)
    gpu = tool.get("gpu")
    build = tool.get("build_constraints", [])
    if not isinstance(build, list) or not all(isinstance(b, str) for b in build):
        raise DataError(f"{where}: tool.envlock.build_constraints: not a list of strings")
    locked = Lock(
        resolution=resolution,
        input=lock_input,
        packages=tuple(sorted(packages, key=lambda p: p.name)),
        resolver=tool.get("resolver", ""),
        resolver_version=tool.get("resolver_version", ""),
        top_requirements=tuple(top),
        gpu=None if gpu is None else gpu_facts(gpu, where),
        build_constraints=tuple(build),
    )
    if lock_input.constraints.only_binary and built_from_source(locked):
        raise DataError(
            f"{where}: a source archive in a lock made with --only-binary "
            f"({', '.join(built_from_source(locked))})",
            hint=_DAMAGED,
        )
    check_lock(locked, where)
    return locked


def read_lock(directory: Path | str) -> Lock:
    """The Lock recorded in ``DIR/pylock.toml`` (strict UTF-8, through envlock.readers)."""
    from envlock.readers import read_text

    path = Path(directory) / PYLOCK
    if not path.exists() and not path.is_symlink():
        raise DataError(
            f"{path} does not exist", hint="make the bundle first: envlock lock SPEC -o DIR"
        )
    text = read_text(path, hint="regenerate it with envlock lock", error=DataError)
    return parse_pylock(text, str(path))
