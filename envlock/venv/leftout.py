"""What a capture of a freeze can lock, what it leaves out and why, and its Python.

A platform's freeze (700+ lines) always holds lines no index serves as
written. ``triage`` reads the index's PEP 691 page of every pinned project
once (``pages``; threads, one session) and sorts each line into the pins the
resolver is given and the lines left out, each with one reason from a small
fixed set (``envlock.bundle.left_out.REASONS``) and, where one exists, the command that would take
it in:

- ``os-package``: installed by the OS package manager (python-apt,
  dbus-python, PyGObject, or a distro version such as ``1.2ubuntu1``): the
  Debian package installs it (``apt-get install -y python3-apt``);
- ``other-index``: a local version (``torch==2.10.0+cu128``) the index does
  not serve: another index builds it (PyTorch's own, for ``+cuXXX``); the
  options that add one and route the label to it are named (``--index``,
  ``--route``; envlock.index.routing);
- ``yanked``: the version is yanked or no longer on the index: the nearest
  version with a wheel for the target is named, and the capture again with
  ``--with name==nearest`` takes it in;
- ``direct``: a ``name @ URL``, ``file:``, VCS or ``-e`` line: installed as
  written into the restored venv (``pip install --no-deps 'LINE'``);
- ``no-distribution``: no wheel for this Python and platform and no source
  archive whose Requires-Python allows it (a pin with a fitting source archive
  is locked by it, #41; with ``--only-binary`` it is left out here instead,
  and pip builds it from the source archive in the restored venv).

A project the index does not have at all, and that no OS package explains,
is bad input (exit 2): a typo or a private package, not a left-out line.

``choose_python`` infers the Python of a freeze that does not say it: the
newest CPython minor (``CANDIDATES``, bounded) for which every pin the index
serves has a wheel, or, for a source-only pin, a fitting Requires-Python;
when none fits all, the one most pins fit (newest first). ``contradicting``
names the pins whose every file's Requires-Python excludes a ``--python``.
"""

from __future__ import annotations

import contextlib
import functools
import shlex
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from packaging.requirements import Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from envlock.bundle.left_out import LeftOut
from envlock.door import redact
from envlock.errors import UsageError

if TYPE_CHECKING:
    from envlock.index.pep691 import IndexFile
    from envlock.index.routing import ExtraIndex
    from envlock.lock.freeze import Installed
    from envlock.lockplatform import Target

# distributions Debian and Ubuntu install as OS packages, and the package that does
OS_PACKAGES = {
    "python-apt": "python3-apt",
    "dbus-python": "python3-dbus",
    "pygobject": "python3-gi",
}
CANDIDATES = ("3.14", "3.13", "3.12", "3.11", "3.10", "3.9")  # newest first
MAX_PROJECTS = 5000  # the most pages one capture reads (a freeze of 700+ lines: ~720)
WORKERS = 16

Pages = Mapping[str, "Sequence[IndexFile] | None"]


@dataclass(frozen=True)
class PythonChoice:
    python: str  # "3.12"
    how: str  # one line: where it came from, or the rule that chose it
    deciding: tuple[str, ...] = ()  # "pin: why it rules out 3.13", for each newer minor


@dataclass(frozen=True)
class Commands:
    """How the printed commands name the capture and the venv it restores into."""

    rerun: Callable[[Sequence[str]], str]  # the capture again, with these arguments added
    python: str  # the restored venv's interpreter, "DIR/.venv/bin/python"
    index_url: str | None = None  # the capture's --index-url: pip installs from it too

    def pip_install(self, *words: str) -> str:
        where = ["--index-url", self.index_url] if self.index_url else []
        return shlex.join([self.python, "-m", "pip", "install", "--no-deps", *where, *words])


def pin_of(pin: str) -> tuple[str, str]:
    req = Requirement(pin)
    return canonicalize_name(req.name), next(iter(req.specifier)).version


@dataclass(frozen=True)
class Where:
    """Which index serves each project: the default one, or the extra index a
    ``--route`` sends it to (envlock.index.routing; routed projects only from there)."""

    default: str
    routed: Mapping[str, ExtraIndex] = field(default_factory=dict)

    def url(self, name: str) -> str:
        extra = self.routed.get(name)
        return extra.url if extra else self.default

    def said(self, name: str) -> str:
        extra = self.routed.get(name)
        if extra is None:
            return f"the index at {redact(self.default)}"
        return f"the index {extra.name} at {redact(extra.url)} (its --route)"


def pages(names: Sequence[str], where: Where) -> dict[str, Sequence[IndexFile] | None]:
    """Every project's PEP 691 files, each from the index it comes from (None: that
    index has no such project); each page's files are made as they are asked for
    (``pep691.LazyFiles``: one version's through ``_of``)."""
    from envlock.index import http, pep691

    wanted = sorted(set(names))
    if len(wanted) > MAX_PROJECTS:
        raise UsageError(
            f"{len(wanted)} projects to capture; envlock reads at most {MAX_PROJECTS}",
            hint="split the freeze",
        )
    sess = http.session()
    try:
        with _no_cycle_collection(), ThreadPoolExecutor(max_workers=WORKERS) as pool:
            found = list(pool.map(lambda n: pep691.project_page(sess, where.url(n), n), wanted))
    finally:
        sess.close()
    return dict(zip(wanted, found, strict=True))


@contextlib.contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Python's cycle collector off while the pages are read, then as it was.

    The pages decode to ~150 MB of dicts and lists (a freeze of ~720 lines), all
    kept: each time the heap grew by a quarter the collector walked all of it
    again (the reading took 2.92 s with it, 2.50 s without, alternated here).
    JSON makes no cycles; reference counting frees it as before."""
    import gc

    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _version(filename: str) -> Version | None:
    """The version a wheel's or an sdist's (.tar.gz, .zip) file name states.

    A freeze's triage asks this about a million times (every file of ~720
    projects, several passes): the version part is cut from the name and each
    distinct version string parsed once (``_parsed``), not the whole name
    validated each time (~18 s of a capture, profiled)."""
    if filename.endswith(".whl"):
        parts = filename[:-4].split("-")
        return _parsed(parts[1]) if len(parts) in (5, 6) else None
    for ext in (".tar.gz", ".zip"):
        if filename.endswith(ext):
            stem = filename[: -len(ext)]
            return _parsed(stem.rpartition("-")[2]) if "-" in stem else None
    return None


@functools.lru_cache(maxsize=None)
def _parsed(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


# each page's files by the version their names state, made once per page (a freeze's
# triage asks for one version's files of ~720 pages about 2,000 times); the page
# itself is kept beside its index, so its id is not reused while the entry lives
_BY_VERSION: dict[int, tuple[Sequence[IndexFile], dict[Version | None, list[IndexFile]]]] = {}
_BY_VERSION_MAX = 8192


def _of(files: Sequence[IndexFile], version: Version) -> list[IndexFile]:
    """The files of ``files`` whose names state ``version``, in their order."""
    from envlock.index.pep691 import LazyFiles

    if isinstance(files, LazyFiles):
        return files.select(_version, version)
    entry = _BY_VERSION.get(id(files))
    if entry is None or entry[0] is not files:
        index: dict[Version | None, list[IndexFile]] = {}
        for f in files:
            index.setdefault(_version(f.filename), []).append(f)
        if len(_BY_VERSION) >= _BY_VERSION_MAX:
            _BY_VERSION.clear()
        entry = _BY_VERSION[id(files)] = (files, index)
    return list(entry[1].get(version, ()))


def _allows(f: IndexFile, python: str) -> bool:
    return not f.requires_python or _spec_allows(f.requires_python, python)


@functools.lru_cache(maxsize=4096)
def _spec_allows(requires_python: str, python: str) -> bool:
    try:
        return SpecifierSet(requires_python).contains(f"{python}.0", prereleases=True)
    except InvalidSpecifier:
        return True  # an index's broken field decides nothing


def _wheels(files: Sequence[IndexFile]) -> list[IndexFile]:
    return [f for f in files if f.filename.endswith(".whl")]


def fits(files: Sequence[IndexFile], target: Target) -> bool:
    """One version's files serve ``target``: a wheel for it, or, with no wheel at
    all, a source archive whose Requires-Python allows it."""
    live = [f for f in files if not f.yanked]
    wheels = _wheels(live)
    if wheels:
        return any(target.wheel_ok(f.filename) and _allows(f, target.python) for f in wheels)
    return any(_allows(f, target.python) for f in live)


def _wheel_fits(files: Sequence[IndexFile], target: Target) -> bool:
    return any(
        not f.yanked and target.wheel_ok(f.filename) and _allows(f, target.python)
        for f in _wheels(files)
    )


def _sdist_fits(files: Sequence[IndexFile], target: Target) -> bool:
    """A live source archive among ``files`` whose Requires-Python allows the target."""
    return any(
        not f.yanked and not f.filename.endswith(".whl") and _allows(f, target.python)
        for f in files
    )


def _served(pins: Sequence[str], found: Pages) -> list[tuple[str, list[IndexFile]]]:
    """(pin, that version's files) for the pins the index serves as written."""
    out = []
    for pin in pins:
        name, text = pin_of(pin)
        files = found.get(name)
        if not files or name in OS_PACKAGES:
            continue
        mine = _of(files, Version(text))
        if mine and not all(f.yanked for f in mine):
            out.append((pin, mine))
    return out


def _pythons_of(files: Sequence[IndexFile], os_name: str | None) -> list[str]:
    from envlock.lockplatform import Target

    return [p for p in CANDIDATES if fits(files, Target.for_lock(p, os_name))]


def choose_python(pins: Sequence[str], found: Pages, os_name: str | None = None) -> PythonChoice:
    """The newest Python every served pin fits; else the one most pins fit."""
    served = _served(pins, found)
    per_pin = {pin: set(_pythons_of(files, os_name)) for pin, files in served}
    score = {p: sum(p in ok for ok in per_pin.values()) for p in CANDIDATES}
    best = max(CANDIDATES, key=lambda p: (score[p], Version(p)))
    total = len(per_pin)
    deciding: list[str] = []
    for newer in CANDIDATES[: CANDIDATES.index(best)]:
        out = sorted(pin for pin, ok in per_pin.items() if newer not in ok and best in ok)
        if out:
            shown = ", ".join(out[:5]) + (f" and {len(out) - 5} more" if len(out) > 5 else "")
            deciding.append(f"not {newer}: no wheel or Requires-Python for it in {shown}")
    also = [p for p in CANDIDATES if p != best and score[p] == score[best]]
    if score[best] == total:
        how = (
            f"Python {best}: the newest Python for which every one of the {total} pins the "
            "index serves has a wheel (or, source only, a fitting Requires-Python)"
        )
    else:
        how = (
            f"Python {best}: no Python fits all {total} pins the index serves; {score[best]} "
            f"fit {best}, the most of any (newest first)"
        )
    if also:
        how += f"; {', '.join(also)} fit as many"
    return PythonChoice(best, how, tuple(deciding))


def contradicting(pins: Sequence[str], found: Pages, python: str) -> list[tuple[str, str]]:
    """(pin, its Requires-Python) of the pins whose files all exclude ``python``."""
    out = []
    for pin, files in _served(pins, found):
        live = [f for f in files if not f.yanked]
        if live and all(f.requires_python and not _allows(f, python) for f in live):
            out.append((pin, live[0].requires_python))
    return out


def _closest(files: Sequence[IndexFile], want: Version, target: Target) -> Version | None:
    """The version nearest ``want`` with a wheel for ``target``: same release first,
    then the smallest step up, then down."""
    have = {
        v
        for f in files
        if not f.yanked and target.wheel_ok(f.filename) and _allows(f, target.python)
        for v in (_version(f.filename),)
        if v is not None and not v.is_prerelease and not v.local and v != want
    }
    public = Version(want.public)
    if public in have:
        return public
    above = min((v for v in have if v > want), default=None)
    below = max((v for v in have if v < want), default=None)
    return above or below


def os_package(line: str, name: str, why: str) -> LeftOut:
    deb = OS_PACKAGES.get(name)
    return LeftOut(
        line,
        name,
        "os-package",
        f"{why}; the OS package {deb} installs it" if deb else why,
        f"apt-get install -y {deb}" if deb else None,
    )


def direct(line: str, name: str, why: str, commands: Commands) -> LeftOut:
    words = shlex.split(line) if line.startswith("-") else [line]
    return LeftOut(line, name, "direct", why, commands.pip_install(*words))


def not_pinned(item: Installed, commands: Commands) -> LeftOut:
    """A freeze line capture did not pin: a direct install, or a version no index can
    have (a distro's ``1.2ubuntu1``: the OS installed it)."""
    from envlock.lock.freeze import left_out_why

    name = canonicalize_name(item.name) if item.name else ""
    why = left_out_why(item)
    if why is not None:
        return direct(item.describe(), name, why, commands)
    if name in OS_PACKAGES or item.version is not None:
        return os_package(item.describe(), name, f"{item.version!r} is no PEP 440 version")
    return LeftOut(item.describe(), name, "no-distribution", "no version stated", None)


def triage(
    lines: Sequence[tuple[str, str]],
    found: Pages,
    target: Target,
    commands: Commands,
    *,
    where: Where,
    only_binary: bool = False,
) -> tuple[list[str], list[LeftOut]]:
    """(pins -> the pins to lock, the lines left out); ``lines`` are (pin, freeze line).

    A pin with no wheel for the target but a source archive whose Requires-Python
    allows it is kept (the lock records the sdist), unless ``only_binary``.

    Raises UsageError (exit 2) naming every line whose project the index does
    not have and no OS package explains, and every routed line its index does not
    serve (a routed project comes from its index only, whatever the default has).
    """
    keep: list[str] = []
    left: list[LeftOut] = []
    unknown: list[str] = []
    misrouted: list[str] = []
    for pin, line in lines:
        name, text = pin_of(pin)
        want = Version(text)
        files = found.get(name)
        if name in where.routed and not (files and _wheel_fits(_of(files, want), target)):
            misrouted.append(f"  {line}: not served by {where.said(name)}")
            continue
        if name in OS_PACKAGES and not (files and _wheel_fits(_of(files, want), target)):
            left.append(os_package(line, name, "a distribution the OS installs"))
            continue
        if files is None:
            unknown.append(line)
            continue
        mine = _of(files, want)
        live = [f for f in mine if not f.yanked]
        if _wheel_fits(live, target) or (not only_binary and _sdist_fits(live, target)):
            keep.append(pin)
            continue
        if want.local and not live:
            label = want.local
            build = (
                f"PyTorch's {label} index"
                if label.startswith(("cu", "cpu", "rocm", "xpu"))
                else "another index"
            )
            public = Version(want.public)
            has = "has" if any(_version(f.filename) == public for f in files) else "lacks"
            left.append(
                LeftOut(
                    line,
                    name,
                    "other-index",
                    f"the +{label} build comes from {build}; the index given {has} "
                    f"{name} {public} (another build); add that index and route the label "
                    f"to it: --index NAME=URL --route '+{label}=NAME'",
                    None,
                )
            )
            continue
        if not live:
            near = _closest(files, want, target)
            said = "yanked on the index" if mine else "no longer on the index"
            if near is None:
                left.append(
                    LeftOut(line, name, "yanked", f"{said}; no other version has a wheel", None)
                )
                continue
            left.append(
                LeftOut(
                    line,
                    name,
                    "yanked",
                    f"{said}; nearest with a wheel for {target.describe()}: {near}",
                    commands.rerun(["--with", f"{name}=={near}"]),
                )
            )
            continue
        wheels = _wheels(live)
        sdist = [f for f in live if not f.filename.endswith(".whl")]
        if not wheels:
            why = "the index has only a source archive of it (--only-binary)"
        else:
            others = [p for p in CANDIDATES if p != target.python and _of_python(wheels, p)]
            why = f"no wheel of it for {target.describe()}" + (
                f" (wheels for Python {', '.join(others)})" if others else ""
            )
        if not all(_allows(f, target.python) for f in live):
            why += f"; Requires-Python {live[0].requires_python}"
        cmd = None
        if sdist:
            why += "; pip builds it from the source archive"
            cmd = commands.pip_install(pin)
        left.append(LeftOut(line, name, "no-distribution", why, cmd))
    if misrouted:
        raise UsageError(
            f"{len(misrouted)} routed line(s) are not on the index they are routed to, and a "
            "routed package is taken from that index only (never from another that has the "
            "name):\n" + "\n".join(misrouted),
            hint="check the --index URL and the --route rules, or delete those lines",
        )
    if unknown:
        shown = "\n".join(f"  {line}" for line in unknown)
        index = redact(where.default)
        raise UsageError(
            f"{len(unknown)} line(s) name a project the index at {index} does not have:\n{shown}",
            hint="check the spelling, delete those lines, or give the index that serves them "
            "with --index-url",
        )
    return keep, left


def _of_python(wheels: Sequence[IndexFile], python: str) -> bool:
    from envlock.lockplatform import Target

    target = Target.for_lock(python, None)
    return any(target.wheel_ok(f.filename) for f in wheels)


def read_os_info(path: str) -> str:
    """The Python a platform's published os-info file states ("Python 3.12.13"), as X.Y.Z."""
    import re

    from envlock.readers import read_text

    try:
        text = read_text(path, "--os-info", hint="give the platform's os-info file")
    except FileNotFoundError:
        raise UsageError(f"--os-info {path}: no such file", hint="check the path") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"--os-info {path}: cannot read it ({e})", hint="check the file") from None
    found = {
        m.group(1)
        for line in text.splitlines()
        if not line.startswith("#")
        for m in (re.fullmatch(r"\s*Python (3\.\d+\.\d+)\S*\s*", line),)
        if m
    }
    if len(found) != 1:
        said = "no line" if not found else f"{len(found)} lines ({', '.join(sorted(found))})"
        raise UsageError(
            f"--os-info {path}: {said} of the form 'Python 3.X.Y' (what `python --version` prints)",
            hint="give the platform's os-info file, or the Python with --python 3.X",
        )
    return found.pop()


def duplicates(rows: Sequence[tuple[str, str]], origin: str) -> None:
    """(name, line) rows of a freeze: a name twice is bad input (exit 2), both lines named."""
    seen: dict[str, str] = {}
    twice: list[str] = []
    for name, line in rows:
        if not name:
            continue
        if name in seen:
            twice.append(f"  {seen[name]!r} and {line!r}")
        else:
            seen[name] = line
    if twice:
        raise UsageError(
            f"{origin}: {len(twice)} name(s) listed twice (a freeze lists each once):\n"
            + "\n".join(twice),
            hint="keep the line of the version that is installed, delete the other",
        )
