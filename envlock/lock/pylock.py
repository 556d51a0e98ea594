"""PEP 751 pylock.toml: write it from a Lock, read a Lock back from it.

The writer is small and exact (sorted packages, sorted wheels, no clock), so
the same lock always gives the same bytes. ``[tool.envlock]`` carries what
``envlock render`` and ``envlock lock --check`` need to start again: the
resolution, the user's input, the resolver and its version, and the
requirements handed to the resolver.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from envlock.errors import DataError
from envlock.lock.target import Target
from envlock.model import Lock, LockedPackage, LockedWheel, LockInput, Resolution

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PYLOCK = "pylock.toml"


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{_key(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def _key(key: str) -> str:
    if key and all(c.isalnum() or c in "-_" for c in key):
        return key
    return json.dumps(key, ensure_ascii=False)


def _table(name: str, data: Mapping[str, Any]) -> list[str]:
    lines = [f"[{name}]"]
    for k, v in data.items():
        if v is None:
            continue
        lines.append(f"{_key(k)} = {_toml(v)}")
    return lines


def target_of(lock: Lock) -> Target:
    return Target.for_lock(lock.resolution.python, lock.resolution.os)


def resolve_argv(inp: LockInput) -> list[str]:
    """The recorded spec and resolve options as ``envlock resolve`` arguments."""
    args = [inp.spec]
    for flag, value in (
        ("--python", inp.python),
        ("--cuda", inp.cuda),
        ("--cudnn", inp.cudnn),
        ("--driver", inp.driver),
        ("--os", inp.os),
        ("--cuda-source", inp.cuda_source),
    ):
        if value:
            args += [flag, value]
    return args


def regenerate_command(lock: Lock, out: str = ".") -> str:
    """The envlock command line that makes this lock again."""
    inp = lock.input
    args = ["envlock", "lock", *resolve_argv(inp)]
    for req in inp.with_requirements:
        args += ["--with", req]
    if lock.resolver != "uv":
        args += ["--resolver", lock.resolver]
    if inp.index_url:
        args += ["--index-url", inp.index_url]
    args += ["-o", out]
    return shlex.join(args)


def describe(lock: Lock) -> str:
    r = lock.resolution
    return (
        f"{r.framework} {r.version} for {target_of(lock).describe()}; "
        f"CUDA {r.cuda}, cuDNN {r.cudnn}, CUDA source: {r.cuda_source}"
    )


def pylock_text(lock: Lock) -> str:
    target = target_of(lock)
    lines = [
        f"# PEP 751 lock made by envlock: {describe(lock)}.",
        f"# Resolved with {lock.resolver} {lock.resolver_version} from: "
        + " ".join(lock.top_requirements),
        "# Install into a fresh venv: uv pip install -r pylock.toml",
        "#   (or: pip install --require-hashes --no-deps -r requirements.txt)",
        f"# Regenerate (in this folder): {regenerate_command(lock)}",
        "# Check it is current:         envlock lock --check .",
        'lock-version = "1.0"',
        f"environments = {_toml([target.environment])}",
        f"requires-python = {_toml(f'=={target.python}.*')}",
        'created-by = "envlock"',
    ]
    for pkg in sorted(lock.packages, key=lambda p: p.name):
        lines += [
            "",
            "[[packages]]",
            f"name = {_toml(pkg.name)}",
            f"version = {_toml(pkg.version)}",
        ]
        lines.append("wheels = [")
        for w in sorted(pkg.wheels, key=lambda w: w.filename):
            entry = {
                "name": w.filename,
                "url": w.url,
                "size": w.size,
                "hashes": {"sha256": w.sha256},
            }
            lines.append(f"    {_toml(entry)},")
        lines.append("]")
    lines.append("")
    lines += _table(
        "tool.envlock",
        {
            "resolver": lock.resolver,
            "resolver_version": lock.resolver_version,
            "platform": target.manylinux,
            "top_requirements": list(lock.top_requirements),
        },
    )
    lines.append("")
    lines += _table("tool.envlock.resolution", lock.resolution.to_dict())
    lines.append("")
    lines += _table("tool.envlock.input", lock.input.to_dict())
    return "\n".join(lines) + "\n"


def _resolution(data: Mapping[str, Any], where: str) -> Resolution:
    full: dict[str, Any] = {f.name: None for f in fields(Resolution)}
    full.update(data)
    required = ("framework", "version", "python", "cuda", "cudnn", "cuda_source", "os")
    missing = [k for k in required if not isinstance(full.get(k), str)]
    if missing:
        raise DataError(f"{where}: [tool.envlock.resolution] lacks {', '.join(missing)}")
    for f in fields(Resolution):
        if full[f.name] is None and "tuple" in str(f.type):
            full[f.name] = ()
    return Resolution.from_dict(full)


def parse_pylock(text: str, where: str) -> Lock:
    """A Lock from pylock.toml text; ``where`` names the file in errors."""
    from packaging.pylock import Pylock, PylockValidationError

    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise DataError(
            f"{where}: not valid TOML ({e})", hint="regenerate it with envlock lock"
        ) from None
    try:
        Pylock.from_dict(doc)
    except PylockValidationError as e:
        raise DataError(
            f"{where}: not a valid PEP 751 lock: {e}", hint="regenerate it with envlock lock"
        ) from None
    tool = (doc.get("tool") or {}).get("envlock")
    if not isinstance(tool, dict):
        raise DataError(
            f"{where}: no [tool.envlock] table (not made by envlock lock)",
            hint="make the bundle with envlock lock SPEC -o DIR",
        )
    try:
        resolution = _resolution(tool.get("resolution") or {}, where)
        lock_input = LockInput.from_dict(tool.get("input") or {})
    except TypeError as e:
        raise DataError(f"{where}: [tool.envlock] is incomplete ({e})") from None
    packages: list[LockedPackage] = []
    for i, pkg in enumerate(doc.get("packages", [])):
        wheels = []
        for j, w in enumerate(pkg.get("wheels") or []):
            sha = (w.get("hashes") or {}).get("sha256")
            if not sha or not w.get("url") or "size" not in w:
                raise DataError(
                    f"{where}: packages[{i}].wheels[{j}]: url, size and sha256 are required"
                )
            name = w.get("name") or str(w["url"]).rsplit("/", 1)[-1]
            wheels.append(LockedWheel(filename=name, url=w["url"], size=int(w["size"]), sha256=sha))
        if not wheels:
            raise DataError(f"{where}: packages[{i}] ({pkg.get('name')}) has no wheels")
        packages.append(
            LockedPackage(name=pkg["name"], version=pkg["version"], wheels=tuple(wheels))
        )
    return Lock(
        resolution=resolution,
        input=lock_input,
        packages=tuple(sorted(packages, key=lambda p: p.name)),
        resolver=str(tool.get("resolver", "")),
        resolver_version=str(tool.get("resolver_version", "")),
        top_requirements=tuple(tool.get("top_requirements") or ()),
    )


def read_lock(directory: Path | str) -> Lock:
    """The Lock recorded in ``DIR/pylock.toml``."""
    path = Path(directory) / PYLOCK
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(
            f"{path} does not exist", hint="make the bundle first: envlock lock SPEC -o DIR"
        ) from None
    except OSError as e:
        raise DataError(f"cannot read {path}: {e.strerror or e}") from None
    return parse_pylock(text, str(path))
