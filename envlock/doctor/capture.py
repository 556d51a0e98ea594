"""Capture a working environment that was never locked.

``capture_venv(venv)`` runs envlock doctor's probe (``envlock.doctor.probe``,
standard library only) in the venv's own interpreter: every installed
distribution, its version and how it was installed; then, only when TensorFlow
is installed, a second run that imports it for build_info, so a broken import
cannot lose the list. ``capture_freeze(file)`` reads a ``pip freeze``.
Either gives a ``Captured``: the framework release, the Python, and every
other distribution pinned at its installed version, which ``envlock capture``
locks as ``envlock lock 'tensorflow==<installed>' --with <pins>`` would.

pip, setuptools and wheel are pinned at their installed versions like the
rest: the lock then holds what the venv holds (a dependency such as
tensorboard's on setuptools would otherwise lock the newest, and doctor would
fail the untouched venv). What is left out, and why (each said in ``notes``):
the framework's own lines (SPEC states
the release); the nvidia CUDA wheels (their presence picks the pip CUDA
source, and the release's and-cuda pins decide their versions); editable or
local-folder installs (no index has them).

``unavailable(pins, target, index)`` names the pins the index cannot serve for
the target, each with the nearest versions it can (PEP 691 pages).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envlock.errors import EnvironmentFailure, UsageError
from envlock.lock.freeze import framework_names, is_cuda_wheel

FRAMEWORK = "tensorflow"


@dataclass(frozen=True)
class Captured:
    """A working environment as envlock locks it."""

    source: str  # the venv folder or the freeze file
    framework: str  # "tensorflow"
    version: str  # the installed release, "2.15.1"
    python: str | None  # the venv's Python, "3.11.7"; None for a freeze
    pins: tuple[str, ...]  # name==version of every other distribution, sorted by name
    cuda_source: str | None  # "pip" when nvidia CUDA wheels are installed, else None
    build_info: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def python_minor(self) -> str | None:
        return ".".join(self.python.split(".")[:2]) if self.python else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "framework": self.framework,
            "version": self.version,
            "python": self.python,
            "pins": list(self.pins),
            "cuda_source": self.cuda_source,
            "build_info": self.build_info,
            "notes": list(self.notes),
        }


def venv_python(venv: Path) -> Path:
    """The venv's interpreter (not resolved: a venv's python is a link that must stay one)."""
    python = venv / "bin" / "python"
    if not (venv / "pyvenv.cfg").is_file() or not os.access(python, os.X_OK):
        raise UsageError(
            f"--venv {venv}: not a venv (no pyvenv.cfg and bin/python there)",
            hint="give the folder a `python -m venv` made, e.g. --venv .venv",
        )
    return python


def _probe(venv: Path, tensorflow: str, timeout: float) -> dict[str, Any]:
    """envlock doctor's probe, run in the venv's interpreter (PYTHONPATH and
    PYTHONHOME left out: capture reads what the venv holds, nothing else)."""
    from envlock.doctor.target import Target, run_probe

    python = venv_python(Path(os.path.abspath(venv)))  # the probe runs in a temp folder
    where = Target(str(python), "--venv", f"--venv {venv}")
    return run_probe(where, tensorflow=tensorflow, deep=False, timeout=timeout, isolated=True)


def probe_venv(venv: Path, timeout: float = 120) -> tuple[str, list[dict[str, Any]]]:
    """(the venv's Python version, its distributions as the probe lists them); the
    probe does not import TensorFlow, so a broken import cannot lose the list."""
    doc = _probe(venv, "no", timeout)
    return str(doc["python"]["version"]), list(doc["distributions"])


def build_info(venv: Path, timeout: float = 300) -> tuple[dict[str, Any], str | None]:
    """TensorFlow's build_info read in the venv; ({}, why) when it does not import."""
    try:
        tf = _probe(venv, "yes", timeout).get("tensorflow") or {}
    except EnvironmentFailure as e:  # the import took the interpreter down
        return {}, f"tensorflow does not import in {venv} ({e.message}); build_info not read"
    if not tf.get("imported"):
        error = tf.get("error") or {}
        lines = str(error.get("message", "")).strip().splitlines()
        tail = f"{error.get('type', 'Error')}: {lines[-1] if lines else ''}".rstrip(": ")
        return {}, f"tensorflow does not import in {venv} ({tail}); build_info not read"
    info = tf.get("build_info")
    if not isinstance(info, dict):
        why = tf.get("build_info_error", "no build_info")
        return {}, f"tensorflow imports in {venv} but gives no build_info ({why}); not read"
    return info, None


def _version(text: str, origin: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        raise UsageError(
            f"{origin}: {text!r} is not a version envlock can lock",
            hint="pin it by hand with envlock lock --with",
        ) from None


def captured_from(
    source: str,
    dists: Sequence[tuple[str, str, str | None]],
    *,
    python: str | None = None,
    build: dict[str, Any] | None = None,
    notes: Sequence[str] = (),
) -> Captured:
    """``dists`` = (name, version, direct-install kind or None) -> Captured."""
    fw_names = framework_names(FRAMEWORK)
    found: dict[str, str] = {}
    pins: dict[str, str] = {}
    cuda: list[str] = []
    local: list[str] = []
    said = list(notes)
    for name, version, direct in dists:
        key = canonicalize_name(name)
        if key in fw_names:
            found[key] = str(_version(version, f"{source}: {name}"))
            continue
        if is_cuda_wheel(key):
            cuda.append(key)
            continue
        if direct in ("editable", "folder"):
            local.append(f"{key} {version}")
            continue
        pins.setdefault(key, f"{key}=={_version(version, f'{source}: {name}')}")
    if not found:
        raise UsageError(
            f"{source}: no TensorFlow installed there ({', '.join(sorted(fw_names))} not found)",
            hint="capture a venv that holds TensorFlow, or lock a release: envlock lock "
            "'tensorflow==2.15' -r requirements.txt -o DIR",
        )
    if len(set(found.values())) > 1:
        both = ", ".join(f"{k} {v}" for k, v in sorted(found.items()))
        raise UsageError(
            f"{source}: more than one TensorFlow release is installed ({both})",
            hint="keep one of them in the environment, then capture again",
        )
    fw = FRAMEWORK if FRAMEWORK in found else sorted(found)[0]
    version = found[fw]
    if fw != FRAMEWORK:
        said.append(f"{fw} {version} is installed; the lock pins {FRAMEWORK} {version}")
    if cuda:
        said.append(
            f"{len(cuda)} nvidia CUDA wheel(s) installed ({', '.join(sorted(cuda))}): "
            f"locked with the pip CUDA source ({FRAMEWORK}[and-cuda]'s own pins)"
        )
    if local:
        said.append(
            "left out, installed from a local folder (no index has them): "
            + ", ".join(sorted(local))
        )
    return Captured(
        source=source,
        framework=FRAMEWORK,
        version=version,
        python=python,
        pins=tuple(pins[k] for k in sorted(pins)),
        cuda_source="pip" if cuda else None,
        build_info=build or {},
        notes=tuple(said),
    )


def capture_venv(venv: Path, *, timeout: float = 300) -> Captured:
    venv = Path(os.path.abspath(venv))  # --venv .venv: the probe runs in another folder
    python, dists = probe_venv(venv, timeout)
    names = {canonicalize_name(str(d["name"])) for d in dists}
    notes: list[str] = []
    build: dict[str, Any] = {}
    if names & framework_names(FRAMEWORK):
        build, why = build_info(venv, timeout)
        if why:
            notes.append(why)
    rows = [(str(d["name"]), str(d["version"]), d.get("direct")) for d in dists]
    return captured_from(str(venv), rows, python=python, build=build, notes=notes)


def capture_freeze(path: str) -> Captured:
    """A ``pip freeze`` file (name==version lines) -> Captured."""
    from envlock.bundle.folder import read_requirement_file

    rows: list[tuple[str, str, str | None]] = []
    for line in read_requirement_file(path):
        try:
            req = Requirement(line)
        except InvalidRequirement as e:
            raise UsageError(
                f"-r {path}: {line!r} is not a requirement ({e})",
                hint="give the output of pip freeze",
            ) from None
        specs = list(req.specifier)
        if req.url or len(specs) != 1 or specs[0].operator not in ("==", "==="):
            raise UsageError(
                f"-r {path}: {line!r} is not pinned to one version",
                hint="capture reads a pip freeze (name==version lines); to lock ranges use "
                "envlock lock SPEC -r FILE",
            )
        rows.append((req.name, specs[0].version, None))
    return captured_from(f"-r {path}", rows)


@dataclass(frozen=True)
class Unavailable:
    pin: str  # "dep-a==1.2"
    reason: str  # "no such project on the index" | "no wheel of 1.2 for ..."
    below: str | None  # the nearest version with a wheel for the target, below the pin
    above: str | None  # and above it

    def describe(self) -> str:
        near = [f"{v} ({side})" for v, side in ((self.below, "below"), (self.above, "above")) if v]
        nearest = f"; nearest available: {', '.join(near)}" if near else ""
        return f"{self.pin}: {self.reason}{nearest}"


def unavailable(pins: Sequence[str], target: Any, index: str) -> list[Unavailable]:
    """The pins whose version the index has no wheel of for ``target`` (an
    ``envlock.target.Target``), with the nearest versions it has."""
    from envlock.index import http, pep691

    sess = http.session()

    def one(pin: str) -> Unavailable | None:
        req = Requirement(pin)
        want = Version(next(iter(req.specifier)).version)
        files = pep691.project_files(sess, index, canonicalize_name(req.name))
        if files is None:
            return Unavailable(pin, "no such project on the index", None, None)
        have: set[Version] = set()
        for f in files:
            if f.yanked or not f.filename.endswith(".whl") or not target.wheel_ok(f.filename):
                continue
            try:
                have.add(Version(f.filename.split("-")[1]))
            except (InvalidVersion, IndexError):
                continue
        if want in have:
            return None
        below = max((v for v in have if v < want), default=None)
        above = min((v for v in have if v > want), default=None)
        return Unavailable(
            pin,
            f"no wheel of {want} for {target.describe()} on the index",
            str(below) if below else None,
            str(above) if above else None,
        )

    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            found = list(pool.map(one, pins))
    finally:
        sess.close()
    return [u for u in found if u is not None]
