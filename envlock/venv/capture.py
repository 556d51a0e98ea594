"""Capture a working environment that was never locked.

``capture_interpreter(given)`` runs envlock doctor's probe (``envlock.venv.probe``,
standard library only) in the interpreter ``--venv`` names, as doctor takes it
(``envlock.venv.interpreter.choose``): a venv folder, or any interpreter file (a
venv's bin/python, a system python3, one with a ``--user`` site, a Jupyter
kernel's ``sys.executable``). The probe lists every distribution that
interpreter's ``importlib.metadata`` lists, its version and how it was
installed; then, only when TensorFlow is installed, a second run imports it for
build_info, so a broken import cannot lose the list. ``capture_freeze(file)``
reads a ``pip freeze``. Either gives a ``Captured``: the framework release, the
Python, and every other distribution pinned at its installed version, which
``envlock capture`` locks as ``envlock lock 'tensorflow==<installed>' --with
<pins>`` would.

pip, setuptools and wheel are pinned at their installed versions like the
rest: the lock then holds what the venv holds (a dependency such as
tensorboard's on setuptools would otherwise lock the newest, and doctor would
fail the untouched venv). A system interpreter's distro-packaged distributions
(Debian's /usr/lib/python3/dist-packages) are pinned like the rest too: the
index serves most of them, and one it does not is named by ``unavailable``
with the nearest versions it has, not guessed around.

What is left out, and why (one note each): the framework's own lines (SPEC
states the release); the nvidia CUDA wheels (their presence picks the pip CUDA
source, and the release's and-cuda pins decide their versions); every direct
install (PEP 610; a freeze's ``name @ URL`` and ``-e`` lines): a local
checkout, folder or file is on no index, and a VCS checkout's or a URL's build
is not the index's build of the same version (``envlock.lock.freeze.left_out_why``);
and a version that is no PEP 440 version (a distro's ``1.2ubuntu1``), which
no index can serve. A distribution listed twice (a ``--user`` upgrade of a
system one) is captured as the one that imports, the first listed, with a note.

``unavailable(pins, target, index)`` names the pins the index cannot serve for
the target, each with the nearest versions it can (PEP 691 pages).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envlock.errors import EnvironmentFailure, UsageError
from envlock.lock.freeze import (
    Installed,
    framework_names,
    installed_line,
    is_cuda_wheel,
    left_out_why,
)

if TYPE_CHECKING:
    from envlock.venv.probe import Dist, ErrorText, ProbeDoc

FRAMEWORK = "tensorflow"


class CapturedDict(TypedDict):
    """envlock capture --json's account of what it captured."""

    source: str
    interpreter: str | None
    venv: str | None
    framework: str
    version: str
    python: str | None
    pins: list[str]
    left_out: list[str]
    cuda_source: str | None
    build_info: dict[str, object]
    notes: list[str]


def _no_probe() -> ProbeDoc:
    return {}


@dataclass(frozen=True)
class Captured:
    """A working environment as envlock locks it."""

    source: str  # what --venv named (absolute), or "-r FILE"
    framework: str  # "tensorflow"
    version: str  # the installed release, "2.15.1"
    python: str | None  # the interpreter's Python, "3.11.7"; None for a freeze
    pins: tuple[str, ...]  # name==version of every other distribution, sorted by name
    cuda_source: str | None  # "pip" when nvidia CUDA wheels are installed, else None
    build_info: dict[str, object] = field(default_factory=dict)  # TensorFlow's, as JSON values
    notes: tuple[str, ...] = ()
    left_out: tuple[str, ...] = ()  # names of the distributions left out of the pins
    interpreter: str | None = None  # the interpreter probed, absolute, links kept; None: a freeze
    venv: str | None = None  # its venv folder; None for a system interpreter or a freeze
    probe: ProbeDoc = field(default_factory=_no_probe, repr=False, compare=False)
    # torch: the CUDA of the installed build's +cuXYZ label ("13.0"), which picks the build
    # the lock takes; JAX: the CUDA extra its installed plugin stands for ("cuda13")
    cuda: str | None = None
    extra: str = ""

    @property
    def spec(self) -> str:
        """The SPEC the lock resolves: ``tensorflow==2.15.1``, ``torch==2.11.0``,
        ``jax[cuda13]==0.11.2``."""
        extra = f"[{self.extra}]" if self.extra else ""
        return f"{self.framework}{extra}=={self.version}"

    @property
    def python_minor(self) -> str | None:
        return ".".join(self.python.split(".")[:2]) if self.python else None

    def to_dict(self) -> CapturedDict:
        return {
            "source": self.source,
            "interpreter": self.interpreter,
            "venv": self.venv,
            "framework": self.framework,
            "version": self.version,
            "python": self.python,
            "pins": list(self.pins),
            "left_out": list(self.left_out),
            "cuda_source": self.cuda_source,
            "build_info": self.build_info,
            "notes": list(self.notes),
        }


def interpreter_of(given: str) -> tuple[str, str | None]:
    """(the interpreter ``--venv given`` names, absolute with its links kept; its
    venv folder or None), as envlock doctor --venv takes it. A venv whose
    interpreter is a dangling link is doctor's finding, InterpreterGone (exit 1)."""
    from envlock.venv.interpreter import InterpreterGone, choose, venv_of

    path = Path(given)
    if path.is_symlink() and not path.exists():  # --venv VENV/bin/python, its Python gone
        points_to = os.readlink(path)
        venv = venv_of(str(path.absolute()))
        if venv is not None:
            raise InterpreterGone(Path(venv), path, points_to)
        raise UsageError(
            f"--venv {given} is a link to {points_to}, which no longer exists",
            hint="give a venv folder (--venv .venv) or an interpreter that runs "
            "(--venv /usr/bin/python3)",
        )
    try:
        chosen = choose(given, None, {})
    except InterpreterGone:
        raise
    except UsageError:
        raise UsageError(
            f"--venv {given}: neither a venv nor an interpreter (no bin/python there)",
            hint="give a venv folder (--venv .venv) or an interpreter file, e.g. a kernel's "
            "sys.executable (--venv /usr/bin/python3)",
        ) from None
    return chosen.python, venv_of(chosen.python)


def _probe(python: str, tensorflow: str, timeout: float) -> ProbeDoc:
    """envlock doctor's probe, run in ``python`` (PYTHONPATH and PYTHONHOME left
    out: capture reads what the interpreter holds, not what this shell adds)."""
    from envlock.venv.interpreter import Target, run_probe

    where = Target(python, "--venv", f"--venv {python}")
    return run_probe(where, tensorflow=tensorflow, deep=False, timeout=timeout, isolated=True)


def probe_venv(venv: Path, timeout: float = 120) -> tuple[str, list[Dist]]:
    """(the Python version, the distributions as the probe lists them) of the
    interpreter ``--venv venv`` names; the probe does not import TensorFlow, so a
    broken import cannot lose the list."""
    python, _ = interpreter_of(os.path.abspath(venv))
    doc = _probe(python, "no", timeout)
    return str(doc["python"]["version"]), list(doc["distributions"])


def build_info(
    venv: Path | str, timeout: float = 300, *, python: str | None = None
) -> tuple[dict[str, object], str | None]:
    """TensorFlow's build_info read in ``python`` (default: the one ``--venv venv``
    names); ({}, why) when it does not import."""
    if python is None:
        python, _ = interpreter_of(os.path.abspath(venv))
    try:
        tf = _probe(python, "yes", timeout).get("tensorflow") or {}
    except EnvironmentFailure as e:  # the import took the interpreter down
        return {}, f"tensorflow does not import in {venv} ({e.message}); build_info not read"
    if not tf.get("imported"):
        error: ErrorText | dict[str, str] = tf.get("error") or {}
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


def _row(row: Installed | Sequence[Any]) -> Installed:
    if isinstance(row, Installed):
        return row
    name, version, direct, *rest = row
    return Installed(str(name), version, direct, rest[0] if rest else None)


def _at(item: Installed) -> str:
    said = f"{canonicalize_name(item.name)} {item.version}"
    return f"{said} (in {item.location})" if item.location else said


def captured_from(
    source: str,
    dists: Sequence[Installed | Sequence[Any]],
    *,
    python: str | None = None,
    build: dict[str, object] | None = None,
    notes: Sequence[str] = (),
    interpreter: str | None = None,
    venv: str | None = None,
    probe: ProbeDoc | None = None,
) -> Captured:
    """``dists`` = Installed (or (name, version, direct kind, [url]) rows) -> Captured;
    ``interpreter``, ``venv`` and ``probe`` (its document) say where they were read."""
    rows = list(map(_row, dists))
    framework = _main_framework(rows)
    fw_names = framework_names(framework)
    found: dict[str, str] = {}
    pins: dict[str, str] = {}
    cuda: list[str] = []
    left: list[tuple[str, str]] = []  # (name or line, the note)
    said = list(notes)
    fw_direct: list[str] = []
    first: dict[str, Installed] = {}
    for item in rows:
        key = canonicalize_name(item.name) if item.name else ""
        if key in first:  # importlib.metadata lists the one that imports first
            if item.version != first[key].version:
                said.append(
                    f"{_at(item)} is shadowed by {_at(first[key])}, the one that "
                    "imports: that one is captured"
                )
            continue
        if key:
            first[key] = item
        if key in fw_names:
            if item.version is None:
                raise UsageError(
                    f"{source}: {item.describe()!r} names no version of {item.name}",
                    hint=f"write the installed release instead, {framework}==VERSION, with "
                    f"VERSION from: python -c 'import {framework}; print({framework}.__version__)'",
                )
            found[key] = str(_version(item.version, f"{source}: {item.name}"))
            if item.direct is not None:
                fw_direct.append(f"{key} {item.version} ({item.url or item.direct})")
            continue
        if key and is_cuda_wheel(key):
            cuda.append(key)
            continue
        why = left_out_why(item)
        if why is None and item.version is not None:
            try:
                pinned = Version(item.version)
            except InvalidVersion:
                why = f"{item.version!r} is no PEP 440 version (a distro's build?): no index has it"
        if why is not None or item.version is None:
            why = why or "no version stated"
            left.append((key or item.describe(), f"left out: {item.describe()}: {why}"))
            continue
        pins.setdefault(key, f"{key}=={pinned}")
    if not found:
        raise UsageError(
            f"{source}: no TensorFlow installed there ({', '.join(sorted(fw_names))} not found)",
            hint="capture a venv or interpreter that holds TensorFlow, or lock a release: "
            "envlock lock 'tensorflow==2.15' -r requirements.txt -o DIR",
        )
    if len(set(found.values())) > 1:
        both = ", ".join(f"{k} {v}" for k, v in sorted(found.items()))
        raise UsageError(
            f"{source}: more than one TensorFlow release is installed ({both})",
            hint="keep one of them in the environment, then capture again",
        )
    fw = framework if framework in found else sorted(found)[0]
    version = found[fw]
    if fw != framework:
        said.append(f"{fw} {version} is installed; the lock pins {framework} {version}")
    build_cuda, extra = None, ""
    if framework != FRAMEWORK:
        version, build_cuda, extra, more = _build_of(framework, version, pins, source)
        said += more
    for text in fw_direct:
        said.append(
            f"{text} is a direct install; the lock pins the index's {framework}=={version}, "
            "which may be another build"
        )
    if cuda:
        whose = f"{FRAMEWORK}[and-cuda]'s" if framework == FRAMEWORK else f"{framework}'s"
        said.append(
            f"{len(cuda)} nvidia CUDA wheel(s) installed ({', '.join(sorted(cuda))}): "
            f"locked with the pip CUDA source ({whose} own pins)"
        )
    said += [note for _, note in sorted(left)]
    return Captured(
        source=source,
        framework=framework,
        version=version,
        python=python,
        pins=tuple(pins[k] for k in sorted(pins)),
        cuda_source="pip" if cuda or framework != FRAMEWORK else None,
        cuda=build_cuda,
        extra=extra,
        build_info=build or {},
        notes=tuple(said),
        left_out=tuple(sorted({name for name, _ in left})),
        interpreter=interpreter,
        venv=venv,
        probe=probe or _no_probe(),
    )


def _main_framework(rows: Sequence[Installed]) -> str:
    """The framework a capture locks: TensorFlow where it is installed (torch or JAX
    beside it are pins of its lock), else torch, else JAX; TensorFlow's name when
    none is (the error then names what is missing)."""
    names = {canonicalize_name(r.name) for r in rows if r.name}
    if names & framework_names(FRAMEWORK):
        return FRAMEWORK
    for other in ("torch", "jax"):
        if other in names:
            return other
    return FRAMEWORK


_LOCAL_CUDA = re.compile(r"^cu([0-9]{2})([0-9])$")


def _build_of(
    framework: str, version: str, pins: dict[str, str], source: str
) -> tuple[str, str | None, str, list[str]]:
    """(release, CUDA of the build, JAX extra, notes) of an installed torch or JAX:
    torch ``2.11.0+cu130`` is release 2.11.0, the CUDA 13.0 build (the one the lock
    takes with ``--cuda 13.0``); JAX's build is the CUDA plugin installed beside it
    (``jax-cuda13-plugin``: ``jax[cuda13]``). UsageError for a CPU-only JAX."""
    parsed = Version(version)
    notes: list[str] = []
    if framework == "torch":
        label = parsed.local or ""
        m = _LOCAL_CUDA.match(label)
        if label and not m:
            raise UsageError(
                f"{source}: torch {version} is not a CUDA build (+{label})",
                hint="capture an environment with a CUDA build of torch (+cuXYZ, or the "
                "index's own build without a label)",
            )
        cuda = f"{m.group(1).lstrip('0')}.{m.group(2)}" if m else None
        if m:
            notes.append(
                f"torch {version}: the CUDA {cuda} build, labelled as PyTorch's own index "
                f"does; the lock takes torch=={parsed.public} with CUDA {cuda} (lock's --cuda "
                f"{cuda}), which is the configured index's build when it has that one"
            )
        return parsed.public, cuda, "", notes
    plugins = sorted(
        n for n in pins if re.fullmatch(r"jax-cuda[0-9]{2}-plugin", n) is not None
    )
    if not plugins:
        raise UsageError(
            f"{source}: jax {version} is installed without a CUDA plugin (the CPU build)",
            hint="capture an environment with jax[cuda12] or jax[cuda13] installed",
        )
    extra = plugins[-1].split("-")[1]
    return str(parsed), None, extra, notes


def capture_interpreter(given: Path | str, *, timeout: float = 300) -> Captured:
    """Capture what ``--venv given`` names: a venv folder or an interpreter file."""
    source = os.path.abspath(given)  # --venv .venv: the probe runs in another folder
    python, venv = interpreter_of(source)
    doc = _probe(python, "no", timeout)
    dists = list(doc["distributions"])
    names = {canonicalize_name(str(d["name"])) for d in dists}
    notes: list[str] = []
    build: dict[str, object] = {}
    if names & framework_names(FRAMEWORK):
        build, why = build_info(source, timeout, python=python)
        if why:
            notes.append(why)
    rows = [
        Installed(
            str(d["name"]),
            str(d["version"]),
            d.get("direct"),
            d.get("direct_url"),
            location=d.get("location"),
        )
        for d in dists
    ]
    return captured_from(
        source,
        rows,
        python=str(doc["python"]["version"]),
        build=build,
        notes=notes,
        interpreter=python,
        venv=venv,
        probe=doc,
    )


capture_venv = capture_interpreter  # the name capture had when --venv took only venvs


def capture_freeze(path: str) -> Captured:
    """A ``pip freeze`` file -> Captured: name==version lines pinned; ``name @ URL``
    and ``-e`` lines left out, each with a note saying why."""
    return captured_from(f"-r {path}", freeze_rows(path))


def freeze_rows(path: str) -> list[Installed]:
    """The lines of a ``pip freeze``, each as an Installed; a name listed twice is
    bad input (exit 2), both lines named."""
    from envlock.bundle.folder import read_requirement_file
    from envlock.venv.leftout import duplicates

    origin = f"-r {path}"
    rows = [installed_line(line, origin) for line in read_requirement_file(path, options=True)]
    duplicates([(canonicalize_name(r.name) if r.name else "", r.describe()) for r in rows], origin)
    return rows


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
    ``envlock.lockplatform.Target``), with the nearest versions it has."""
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
