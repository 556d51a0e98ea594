"""The CUDA of every distribution in a lock, its one driver floor, and files two
wheels would both install.

``read_listings`` is the I/O: the central directory of each CUDA-carrying wheel
(matrices/cuda-wheels.toml names the families) and the members a family asks
for (torch/version.py), by HTTP range requests, a few per wheel, never a
download. ``derive`` is pure: the facts of each package (``PackageCuda``), the
highest driver floor any of them needs with the packages that set it
(``GpuFacts``), and ``collisions``: paths two wheels install with different
bytes (nvidia-cudnn-cu12 and -cu13 both install nvidia/cudnn/lib/libcudnn.so.9:
whichever installs last wins, and one framework loads the other's library).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envlock.model import GpuFacts, Lock, LockedPackage, PackageCuda

if TYPE_CHECKING:
    from envlock.matrix.cuda import CudaMatrix
    from envlock.matrix.cudawheels import CudaWheels, Family
    from envlock.matrix.rangefile import Fetch
    from envlock.matrix.wheel_members import WheelListing

# the CUDA 13 wheels without a -cuNN suffix install under nvidia/cu13/
_CU_FOLDER = re.compile(r"nvidia/cu([0-9]+)/")
# torch/version.py: cuda: Optional[str] = '13.2'  (or: cuda = '12.8'; None for a CPU build)
_VERSION_PY = re.compile(r"^cuda\s*(?::[^=\n]*)?=\s*['\"]([0-9]+\.[0-9]+)['\"]", re.MULTILINE)
_LOCAL = re.compile(r"cu([0-9]+)([0-9])")  # +cu128 -> 12.8, +cu92 -> 9.2
WORKERS = 8
SHOWN = 3  # top requirements named as setting the floor; more are counted


@dataclass(frozen=True)
class Collision:
    """Paths two locked wheels both install, with different bytes."""

    packages: tuple[str, str]  # "name version", sorted
    paths: tuple[str, ...]  # sorted; shared libraries first

    def describe(self) -> str:
        shown = ", ".join(self.paths[:3])
        more = f" and {len(self.paths) - 3} more" if len(self.paths) > 3 else ""
        return f"{self.packages[0]} and {self.packages[1]} both install {shown}{more}"


def cuda_packages(lock: Lock, rules: CudaWheels) -> list[tuple[LockedPackage, Family]]:
    """The locked packages a family of cuda-wheels.toml names, by name."""
    out = []
    for pkg in lock.packages:
        family = rules.family_of(pkg.name)
        if family is not None:
            out.append((pkg, family))
    return out


def read_listings(
    lock: Lock,
    rules: CudaWheels,
    index: str,
    progress: Callable[[str], None] | None = None,
) -> dict[str, WheelListing]:
    """The listing of one wheel of each CUDA-carrying package ``to_read`` names, read
    in parallel. Errors are the range reader's: exit 3 for an index that fails or a
    wheel that is not a readable zip, naming the wheel."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from envlock.index import http
    from envlock.matrix.refresh import range_fetcher
    from envlock.matrix.wheel_members import read_listing

    todo = to_read(lock, rules)
    if not todo:
        return {}
    if progress is not None:
        progress(f"reading the file lists of {len(todo)} CUDA-carrying wheels")
    local = threading.local()
    sessions: list[Any] = []  # one per worker thread, closed when all are read

    def one(item: tuple[LockedPackage, Family]) -> tuple[str, WheelListing]:
        pkg, family = item
        sess = getattr(local, "session", None)
        if sess is None:
            sess = local.session = http.session()
            sessions.append(sess)
        wheel = min(pkg.wheels, key=lambda w: w.filename)
        fetch = (
            local_fetcher(wheel.url, wheel.size)
            if wheel.url.startswith("file://")
            else range_fetcher(sess, wheel.url, index, wheel.size)
        )
        wanted = (family.member,) if family.member else ()
        return pkg.name, read_listing(fetch, wheel.filename, wanted)

    try:
        with ThreadPoolExecutor(max_workers=min(WORKERS, len(todo))) as pool:
            return dict(pool.map(one, todo))
    finally:
        for sess in sessions:
            sess.close()


def to_read(lock: Lock, rules: CudaWheels) -> list[tuple[LockedPackage, Family]]:
    """The CUDA-carrying wheels whose file lists a fact or a collision needs (the
    framework whose facts come from its matrix is never read: its files are not
    CUDA's):

    - every one, when the names and versions already span two CUDA majors: that is
      where wheels collide (nvidia-cudnn-cu12 and -cu13 both install
      nvidia/cudnn/lib/libcudnn.so.9); the wheels of one major are NVIDIA's own
      set, made to be installed together, and are not read for collisions;
    - else only those whose CUDA the name and version do not state: torch without
      a +cuXYZ (its torch/version.py), and the CUDA 13 wheels without a suffix
      when no cuda-toolkit or nvidia-cuda-runtime in the lock states the major
      (their nvidia/cuNN/ folder).

    Measured (BENCHMARKS.md, Lock): reading every CUDA wheel of a
    tensorflow[and-cuda] lock cost about 0.4 s, 1.7x raw uv's whole lock."""
    # a package locked by its source archive (#41) has no wheel to read
    todo = [(p, f) for p, f in cuda_packages(lock, rules) if f.cuda != "matrix" and p.wheels]
    majors = {m for p, f in todo for m in [_stated_major(p, f)] if m is not None}
    if len(majors) > 1:
        return todo
    closure = _closure_major(lock.packages, rules)[0]
    return [
        (p, f)
        for p, f in todo
        if (f.cuda == "local" and f.member and _stated_major(p, f) is None)
        or (f.cuda == "files" and closure is None)
    ]


def _stated_major(pkg: LockedPackage, family: Family) -> str | None:
    """The CUDA major a package's name or version states, without its wheel."""
    if family.cuda == "name":
        return family.name_major(pkg.name)
    if family.cuda in ("version", "version-major"):
        mm = _major_minor(pkg.version)
        return _major(mm) if mm else None
    if family.cuda == "local":
        m = _LOCAL.fullmatch(Version(pkg.version).local or "")
        return m.group(1) if m else None
    return None


def local_fetcher(url: str, size: int) -> Fetch:
    """Range reads of a wheel of a file:// index (pip's resolver allows them)."""
    from urllib.parse import unquote, urlparse

    from envlock.errors import EnvironmentFailure

    path = unquote(urlparse(url).path)

    def fetch(start: int, end: int | None) -> tuple[bytes, int]:
        try:
            with open(path, "rb") as f:
                total = os.fstat(f.fileno()).st_size
                if total != size:
                    raise EnvironmentFailure(
                        f"{path} is {total} bytes, the lock lists {size}",
                        hint="the file changed in the index folder; lock again",
                    )
                first = max(total + start, 0) if end is None else start
                last = total - 1 if end is None else min(end, total - 1)
                f.seek(first)
                return f.read(max(last - first + 1, 0)), total
        except OSError as e:
            raise EnvironmentFailure(
                f"cannot read {path}: {e.strerror or e}", hint="check the index folder"
            ) from None

    return fetch


# -- facts ---------------------------------------------------------------------


def _major_minor(version: str) -> str | None:
    try:
        v = Version(version)
    except InvalidVersion:
        return None
    if len(v.release) < 2:
        return None
    return f"{v.release[0]}.{v.release[1]}"


def _major(cuda: str) -> str:
    return cuda.split(".")[0]


def _rows(cuda_matrix: CudaMatrix, cuda: str) -> tuple[str | None, str | None]:
    """(driver_min, toolkit_driver) of a CUDA release ("13.2") or major ("13"):
    the runs-at-all floor is the major's (minor-version compatibility: every
    row of a major from CUDA 11 on has the same), the toolkit driver only for
    an exact major.minor; (None, None) when cuda.toml has no row of the major."""
    exact = cuda_matrix.release(cuda) if "." in cuda else None
    same_major = [r for r in cuda_matrix.cuda if _major(r.version) == _major(cuda)]
    if exact is None and not same_major:
        return None, None
    floor = (exact or min(same_major, key=lambda r: r.key)).driver_min
    return floor, (exact.toolkit_driver or None) if exact else None


def _closure_major(packages: Sequence[LockedPackage], rules: CudaWheels) -> tuple[str | None, str]:
    """The CUDA major cuda-toolkit (else nvidia-cuda-runtime) states in the lock, and
    which package says so; (None, "") when none does or they disagree."""
    found: dict[str, str] = {}
    stated = [
        (family.id != "cuda-toolkit", pkg.name, pkg.version)
        for pkg in packages
        for family in [rules.family_of(pkg.name)]
        if family is not None and family.cuda == "version"
    ]
    for _, name, version in sorted(stated):
        mm = _major_minor(version)
        if mm:
            found.setdefault(_major(mm), f"{name} {version}")
    if len(found) == 1:
        major, which = next(iter(found.items()))
        return major, which
    return None, ""


def _one(
    pkg: LockedPackage,
    family: Family,
    lock: Lock | None,
    listing: WheelListing | None,
    closure: tuple[str | None, str],
    problems: list[str],
) -> tuple[str | None, str, str | None]:
    """(cuda, how it is known, cudnn) of one package."""
    label = f"{pkg.name} {pkg.version}"
    how = family.cuda
    cudnn = pkg.version if family.cudnn_from_version else None
    if how == "matrix":
        if lock is None or canonicalize_name(lock.resolution.framework) != pkg.name:
            return None, "not the locked framework", cudnn
        res = lock.resolution
        return res.cuda, "matrices/tensorflow.toml", res.cudnn
    if how == "version":
        mm = _major_minor(pkg.version)
        said = family.name_major(pkg.name)
        if mm and said and _major(mm) != said:
            problems.append(
                f"{label}: the name says CUDA {said}, the version says CUDA {mm}; "
                "envlock counts the version"
            )
        return mm, "its version", cudnn
    if how == "version-major":
        mm = _major_minor(pkg.version)
        return (_major(mm) if mm else None), "its version's major", cudnn
    if how == "name":
        return family.name_major(pkg.name), "its name", cudnn
    if how == "files":
        if listing is not None:
            majors = sorted(
                {m.group(1) for name in listing.files for m in [_CU_FOLDER.match(name)] if m}
            )
            if len(majors) == 1:
                return majors[0], f"nvidia/cu{majors[0]}/ in the wheel", cudnn
            if len(majors) > 1:
                problems.append(
                    f"{label}: the wheel installs under "
                    + " and ".join(f"nvidia/cu{m}/" for m in majors)
                    + "; envlock cannot tell its CUDA"
                )
                return None, "unknown", cudnn
        major, which = closure
        if major is not None:
            return major, which + " in the lock", cudnn
        return None, "unknown", cudnn
    # "local": +cuXYZ, else the member the family names
    local = Version(pkg.version).local or ""
    m = _LOCAL.fullmatch(local)
    from_local = f"{m.group(1)}.{m.group(2)}" if m else None
    from_member = None
    if listing is not None and family.member and family.member in listing.members:
        text = listing.members[family.member].decode("utf-8", errors="replace")
        found = _VERSION_PY.search(text)
        from_member = found.group(1) if found else None
    if from_local and from_member and from_local != from_member:
        problems.append(
            f"{label}: its local version says CUDA {from_local}, "
            f"{family.member} says {from_member}; envlock counts {family.member}"
        )
    if from_member:
        return from_member, family.member or "", cudnn
    if from_local:
        return from_local, f"+{local}", cudnn
    return None, "unknown", cudnn


def derive(
    lock: Lock,
    rules: CudaWheels,
    cuda_matrix: CudaMatrix,
    listings: Mapping[str, WheelListing] | None,
) -> GpuFacts:
    """The facts of every CUDA-carrying package of ``lock`` and the one floor.

    ``listings`` is None when the wheels were not read (``--offline``): then
    families that need the file list fall back to cuda-toolkit's major, and
    torch's CUDA is known only from a +cuXYZ local version.
    """
    problems: list[str] = []
    closure = _closure_major(lock.packages, rules)
    facts: list[PackageCuda] = []
    for pkg, family in cuda_packages(lock, rules):
        listing = listings.get(pkg.name) if listings is not None else None
        cuda, how, cudnn = _one(pkg, family, lock, listing, closure, problems)
        if how == "not the locked framework":
            continue
        driver_min = toolkit = None
        if cuda is not None:
            if family.cuda == "matrix":
                driver_min = lock.resolution.driver_min
                toolkit = _rows(cuda_matrix, cuda)[1]
            else:
                driver_min, toolkit = _rows(cuda_matrix, cuda)
                if driver_min is None:
                    problems.append(
                        f"{pkg.name} {pkg.version}: CUDA {cuda} (from {how}) is not in "
                        "matrices/cuda.toml: envlock cannot state the driver it needs"
                    )
        elif how == "unknown" and family.cuda in ("local", "files"):
            problems.append(
                f"{pkg.name} {pkg.version}: envlock could not tell which CUDA it needs"
                + (" (its wheel was not read: --offline)" if listings is None else "")
            )
        facts.append(
            PackageCuda(pkg.name, pkg.version, family.id, cuda, how, cudnn, driver_min, toolkit)
        )
    problems += _disagreements(lock, facts)
    return _floor(lock, facts, problems, listings is not None, rules.data_version)


def _disagreements(lock: Lock, facts: Sequence[PackageCuda]) -> list[str]:
    """A framework build whose CUDA (+cuXYZ, version.py) is not the major of the
    CUDA libraries it depends on directly."""
    by_name = {f.name: f for f in facts}
    deps = {p.name: p.dependencies for p in lock.packages}
    out = []
    for fact in facts:
        if fact.family not in ("torch", "torch-domain") or fact.cuda is None:
            continue
        other = sorted(
            f"{d} ({by_name[d].cuda})"
            for d in deps.get(fact.name, ())
            if d in by_name
            and by_name[d].cuda is not None
            and _major(by_name[d].cuda or "") != _major(fact.cuda)
            and by_name[d].family != "cuda-python"
        )
        if other:
            out.append(
                f"{fact.name} {fact.version}: built for CUDA {fact.cuda} ({fact.cuda_from}) "
                f"but depends on {', '.join(other)}"
            )
    return out


def _vkey(text: str) -> Version:
    return Version(text)


def _tops(lock: Lock) -> list[tuple[str, set[str]]]:
    """Each top requirement's name and the locked names its closure holds (itself too)."""
    deps = {p.name: p.dependencies for p in lock.packages}
    out = []
    for text in lock.top_requirements:
        try:
            name = str(canonicalize_name(Requirement(text).name))
        except InvalidRequirement:
            continue
        seen: set[str] = {name}
        todo: list[str] = [name]
        while todo:
            for d in deps.get(todo.pop(), ()):
                if d not in seen:
                    seen.add(d)
                    todo.append(d)
        out.append((name, seen))
    return out


def _set_by(lock: Lock, facts: Sequence[PackageCuda], at: Iterable[PackageCuda]) -> str:
    """ "torch 2.15.0 (CUDA 13.2, cuda-toolkit 13.2.2)": each top requirement whose
    closure holds a package at the floor, with its own CUDA and the package of its
    closure that states the CUDA release most exactly."""
    at = list(at)
    versions = {p.name: p.version for p in lock.packages}
    by_name = {f.name: f for f in facts}
    tops = _tops(lock)
    # the top requirements that carry CUDA themselves (torch, tensorflow, a JAX plugin)
    # and are not in another such one's closure: a top that reaches the floor only
    # through one of those (accelerate -> torch -> cuda-toolkit, or cuda-toolkit pinned
    # beside torch by a capture) is not named beside it
    carriers = {top: closure for top, closure in tops if top in by_name and by_name[top].cuda}
    primary = {
        top
        for top in carriers
        if not any(top in closure for other, closure in carriers.items() if other != top)
    }
    covered = set().union(*(carriers[top] for top in primary))
    parts = []
    for top, closure in tops:
        mine = [f for f in at if f.name in closure]
        if not mine or (top not in primary and all(f.name in covered for f in mine)):
            continue
        details = []
        own = by_name.get(top)
        if own is not None and own.cuda is not None:
            details.append(f"CUDA {own.cuda}")
        exact = sorted(
            (f for f in mine if f.name != top),
            key=lambda f: (f.family not in ("cuda-toolkit", "cuda-runtime"), f.name),
        )
        if exact:
            e = exact[0]
            shown = "" if own is not None and own.cuda else f": CUDA {e.cuda}"
            details.append(f"{e.name} {e.version}{shown}")
        text = f"{top} {versions.get(top, '')}".strip()
        parts.append(text + (f" ({', '.join(details)})" if details else ""))
    if len(parts) > SHOWN:  # the framework's part first, as the top requirements are
        rest = len(parts) - SHOWN
        parts = [*parts[:SHOWN], f"{rest} more of the requirements"]
    return "; ".join(parts)


def _floor(
    lock: Lock,
    facts: Sequence[PackageCuda],
    problems: list[str],
    files_read: bool,
    rules_version: str,
) -> GpuFacts:
    res = lock.resolution
    floors = [f.driver_min for f in facts if f.driver_min]
    floor = max([res.driver_min, *floors], key=_vkey)
    at = [f for f in facts if f.driver_min and _vkey(f.driver_min) == _vkey(floor)]
    set_by = _set_by(lock, facts, at) or f"{res.framework} {res.version} (CUDA {res.cuda})"
    jit = [f.toolkit_driver for f in facts if f.toolkit_driver]
    toolkit = max(jit, key=_vkey) if jit else None
    toolkit_by = ""
    if toolkit is not None:
        top = [f for f in facts if f.toolkit_driver and _vkey(f.toolkit_driver) == _vkey(toolkit)]
        toolkit_by = _set_by(lock, facts, top)
    return GpuFacts(
        packages=tuple(sorted(facts, key=lambda f: f.name)),
        driver_min=floor,
        set_by=set_by,
        framework_driver_min=res.driver_min,
        toolkit_driver=toolkit,
        toolkit_set_by=toolkit_by,
        files_read=files_read,
        problems=tuple(problems),
        rules_version=rules_version,
    )


# -- files two wheels install ------------------------------------------------------


def collisions(lock: Lock, listings: Mapping[str, WheelListing]) -> list[Collision]:
    """Paths (outside .dist-info) that two read wheels both install with different
    bytes (CRC-32 or size): identical files, such as an empty nvidia/__init__.py
    many NVIDIA wheels carry, are not a collision."""
    versions = {p.name: p.version for p in lock.packages}
    owners: dict[str, list[tuple[str, tuple[int, int]]]] = {}
    for name in sorted(listings):
        for path, stamp in listings[name].files.items():
            if path.split("/", 1)[0].endswith((".dist-info", ".data")):
                continue
            owners.setdefault(path, []).append((name, stamp))
    pairs: dict[tuple[str, str], list[str]] = {}
    for path, who in owners.items():
        for i in range(len(who)):
            for j in range(i + 1, len(who)):
                if who[i][1] != who[j][1]:
                    pair = (who[i][0], who[j][0])
                    pairs.setdefault(pair, []).append(path)
    out = []
    for (a, b), paths in sorted(pairs.items()):
        ordered = sorted(paths, key=lambda p: (".so" not in p, p))
        out.append(
            Collision((f"{a} {versions.get(a, '')}", f"{b} {versions.get(b, '')}"), tuple(ordered))
        )
    return out


# -- an installed environment (doctor) ------------------------------------------------


def installed_facts(
    dists: Sequence[tuple[str, str, str | None]], rules: CudaWheels, cuda_matrix: CudaMatrix
) -> list[PackageCuda]:
    """The CUDA of each installed distribution (name, version, the CUDA its installed
    files state: the probe reads torch/version.py and the nvidia/cuNN/ folder) that
    a family names, else as ``derive`` gives it without the wheels' file lists. The
    framework whose facts come from its matrix is left out: doctor checks it against
    the lock or its matrix row."""
    stated = {str(canonicalize_name(n)): c for n, _v, c in dists if c}
    packages = [
        LockedPackage(str(canonicalize_name(name)), version, ())
        for name, version, _cuda in dists
        if _valid(version)
    ]
    closure = _closure_major(packages, rules)
    out = []
    for pkg in packages:
        family = rules.family_of(pkg.name)
        if family is None or family.cuda == "matrix":
            continue
        said = stated.get(pkg.name)
        cuda: str | None
        if said and family.cuda in ("local", "files"):
            where = (family.member or "") if family.cuda == "local" else f"nvidia/cu{said}/"
            cuda, how, cudnn = said, f"{where} (installed)", None
        else:
            cuda, how, cudnn = _one(pkg, family, None, None, closure, [])
        driver_min, toolkit = _rows(cuda_matrix, cuda) if cuda else (None, None)
        out.append(
            PackageCuda(pkg.name, pkg.version, family.id, cuda, how, cudnn, driver_min, toolkit)
        )
    return sorted(out, key=lambda f: f.name)


def _valid(version: str) -> bool:
    try:
        Version(version)
    except InvalidVersion:
        return False
    return True
