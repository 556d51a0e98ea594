"""matrices/libraries.toml: nvidia-* library versions that dropped or broke a
GPU architecture or an execution path, with sources, and the caps a lock for
given GPUs takes from them.

``parse`` validates the document; ``load`` reads the packaged file (cached).
``caps_for`` is the derivation: the entries that apply to a framework release,
its and-cuda requirements and the GPUs asked for, each with the resolver
constraint (``nvidia-cudnn-cu12<9.11``) that keeps the locked version out of
the affected range. ``unverified`` and ``affected_without_gpu`` read a lock's
locked versions against the same entries.
"""

from __future__ import annotations

import functools
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

if TYPE_CHECKING:
    from pathlib import Path

    from envlock.matrix.gpus import GpuMatrix
    from envlock.matrix.schema import Checker

FILENAME = "libraries.toml"
SCHEMA_VERSION = 1
HINT = "each [[caps]] entry needs package, versions (one clause), kind, path, effect and from"
KINDS = ("dropped", "broken")
PATHS = ("kernels", "ptx-jit", "xla", "cudnn")
_FIELDS = (
    "package",
    "versions",
    "compute_capability",
    "framework",
    "kind",
    "path",
    "effect",
    "works_from",
    "from",
)
# the complement of one clause, as one clause: what the resolver is given
_COMPLEMENT = {">=": "<", ">": "<=", "<": ">=", "<=": ">", "==": "!=", "!=": "=="}


@dataclass(frozen=True)
class LibraryCap:
    """One entry: ``package`` versions in ``versions`` drop or break ``path`` on
    the GPUs whose compute capability is in ``compute_capability`` (None: all)."""

    package: str  # normalized
    versions: str  # the affected clause, ">=9.11"
    cap: str  # its complement, "<9.11"
    compute_capability: str | None  # "<7.5"; None: every GPU
    framework: str | None  # "tensorflow==2.21.0"; None: any
    kind: str  # "dropped" | "broken"
    path: str  # one of PATHS
    effect: str
    works_from: str | None  # a version a source verified to work
    sources: tuple[str, ...]  # keys of [sources]

    @property
    def constraint(self) -> str:
        return f"{self.package}{self.cap}"

    def affects(self, version: str) -> bool:
        return SpecifierSet(self.versions).contains(version, prereleases=True)

    def on_gpu(self, capability: str) -> bool:
        if self.compute_capability is None:
            return True
        return SpecifierSet(self.compute_capability).contains(capability)

    def for_release(self, framework: str, version: str) -> bool:
        if self.framework is None:
            return True
        req = Requirement(self.framework)
        return canonicalize_name(req.name) == canonicalize_name(framework) and (
            req.specifier.contains(version, prereleases=True)
        )

    def gpus_text(self) -> str:
        if self.compute_capability is None:
            return "every GPU"
        return f"compute capability {self.compute_capability}"


@dataclass(frozen=True)
class LibraryMatrix:
    """All of libraries.toml, validated."""

    schema_version: int
    data_version: str
    sources: tuple[tuple[str, str], ...]
    caps: tuple[LibraryCap, ...]

    def urls(self, cap: LibraryCap) -> tuple[str, ...]:
        """The URL each of the entry's sources starts with."""
        text = dict(self.sources)
        return tuple(text[key].split()[0] for key in cap.sources)


@dataclass(frozen=True)
class AppliedCap:
    """An entry that applies to a lock, and the GPUs (labels) it applies to."""

    cap: LibraryCap
    gpus: tuple[str, ...]
    urls: tuple[str, ...]

    def reason(self) -> str:
        on = ", ".join(self.gpus)
        return (
            f"{self.cap.constraint} for {on}: {self.cap.effect} "
            f"({self.cap.kind}, {self.cap.path}{CAP_MARK}{', '.join(self.urls)})"
        )


CAP_MARK = " path; source: "  # in every why line of a cap, and in no other


def cap_reasons(reasons: Sequence[str]) -> tuple[str, ...]:
    """The why lines of a lock file's resolution that say which library cap the lock
    met (a lock records its reasons as text; a resolution just locked carries them
    as ``Resolution.cap_reasons``)."""
    return tuple(r for r in reasons if CAP_MARK in r)


def _clause(c: Checker, text: str, where: str) -> tuple[str, str]:
    """(operator, version) of one specifier clause whose complement is one clause."""
    spec = c.specifier(text, where)
    clauses = list(spec)
    if len(clauses) != 1:
        raise c.fail(
            where,
            f"expected one clause (>=V, >V, <V, <=V, ==V or ==V.*), got {len(clauses)}: "
            f"the cap given to the resolver is its complement, and a range has none in one clause",
        )
    op = clauses[0].operator
    if op not in _COMPLEMENT:
        raise c.fail(where, f"the operator {op} has no one-clause complement")
    return op, clauses[0].version


def _cap(c: Checker, raw: Any, path: str) -> LibraryCap:
    row = c.table(raw, path, _FIELDS)
    package = c.string(row, "package", path)
    if canonicalize_name(package) != package:
        raise c.fail(f"{path}.package", f"write the normalized name {canonicalize_name(package)!r}")
    versions = c.string(row, "versions", path)
    op, version = _clause(c, versions, f"{path}.versions")
    capability = None
    if "compute_capability" in row:
        capability = c.string(row, "compute_capability", path)
        spec = c.specifier(capability, f"{path}.compute_capability")
        if not list(spec):
            raise c.fail(f"{path}.compute_capability", "must not be empty")
    framework = None
    if "framework" in row:
        framework = c.string(row, "framework", path)
        c.requirement(framework, f"{path}.framework")
    kind = c.choice(row, "kind", path, KINDS)
    works_from = None
    if "works_from" in row:
        if kind != "broken":
            raise c.fail(f"{path}.works_from", 'only a "broken" entry has a verified version')
        works_from = str(c.version(row, "works_from", path))
        if SpecifierSet(versions).contains(works_from, prereleases=True):
            raise c.fail(f"{path}.works_from", f"{works_from} is inside versions {versions!r}")
    sources = c.strings(row, "from", path, non_empty=True)
    for i, key in enumerate(sources):
        if key not in c.source_keys:
            raise c.fail(f"{path}.from[{i}]", f"{key!r} is not a key of [sources]")
    return LibraryCap(
        package=package,
        versions=versions,
        cap=f"{_COMPLEMENT[op]}{version}",
        compute_capability=capability,
        framework=framework,
        kind=kind,
        path=c.choice(row, "path", path, PATHS),
        effect=c.string(row, "effect", path).strip(),
        works_from=works_from,
        sources=sources,
    )


def parse(doc: Mapping[str, Any], filename: str) -> LibraryMatrix:
    """Validate a loaded ``libraries.toml`` document."""
    from envlock.matrix.schema import Checker

    c = Checker(filename, HINT)
    c.table(doc, "", ("schema_version", "data_version", "sources", "caps"))
    schema, data_version = c.header(doc, SCHEMA_VERSION)
    sources = c.sources(doc)
    for key, text in sources:
        if not text.startswith("https://"):
            raise c.fail(f"sources.{key}", "must start with the source's https:// URL")
    caps = tuple(_cap(c, raw, f"caps[{i}]") for i, raw in enumerate(c.rows(doc, "caps")))
    return LibraryMatrix(schema, data_version, sources, caps)


def load_file(path: Path | None = None) -> LibraryMatrix:
    from envlock.matrix import read_toml

    doc, _digest, shown = read_toml(FILENAME, path)
    return parse(doc, shown)


@functools.lru_cache(maxsize=1)
def load() -> LibraryMatrix:
    """The packaged libraries.toml, validated; cached per process."""
    return load_file()


def _admits(requirement: str, cap: LibraryCap) -> bool:
    """Whether a requirement's range may admit a version in the entry's range:
    the clause's boundary version (or the requirement's own pin) is tested."""
    req = Requirement(requirement)
    boundary = next(s.version for s in SpecifierSet(cap.versions))
    probes = [boundary.removesuffix(".*")]
    probes += [s.version for s in req.specifier if s.operator in ("==", "===", ">=", "<=")]
    for probe in probes:
        try:
            Version(probe)
        except InvalidVersion:
            continue
        if req.specifier.contains(probe, prereleases=True) and cap.affects(probe):
            return True
    return not list(req.specifier)  # no range: any version


def caps_for(
    matrix: LibraryMatrix,
    framework: str,
    version: str,
    and_cuda: Sequence[str],
    gpus: Sequence[tuple[str, str]],
) -> tuple[AppliedCap, ...]:
    """The entries a lock of ``framework`` ``version`` for ``gpus`` ((label,
    compute capability) pairs) must meet: those whose package is one of the
    ``and_cuda`` requirements with a range that admits the affected versions,
    whose framework matches, and that apply to at least one of the GPUs."""
    wanted: dict[str, str] = {canonicalize_name(Requirement(r).name): r for r in and_cuda}
    out: list[AppliedCap] = []
    for cap in matrix.caps:
        req = wanted.get(cap.package)
        if req is None or not cap.for_release(framework, version) or not _admits(req, cap):
            continue
        on = tuple(dict.fromkeys(label for label, cc in gpus if cap.on_gpu(cc)))
        if on:
            out.append(AppliedCap(cap, on, matrix.urls(cap)))
    return tuple(out)


def constraints_of(applied: Sequence[AppliedCap]) -> tuple[str, ...]:
    """The resolver constraints, one per entry, in the file's order, without repeats."""
    return tuple(dict.fromkeys(a.cap.constraint for a in applied))


def unverified(applied: Sequence[AppliedCap], locked: Mapping[str, str]) -> tuple[str, ...]:
    """Where two entries pull apart: a "broken" entry's verified version is
    excluded by another entry's cap, and the locked version, outside the broken
    range, is below the verified one: no source says it works on that path."""
    out: list[str] = []
    for a in applied:
        cap = a.cap
        got = locked.get(cap.package)
        if cap.works_from is None or got is None or Version(got) >= Version(cap.works_from):
            continue
        blockers = [
            b
            for b in applied
            if b is not a
            and b.cap.package == cap.package
            and not SpecifierSet(b.cap.cap).contains(cap.works_from, prereleases=True)
        ]
        by = "; ".join(f"{b.cap.constraint} for {', '.join(b.gpus)}" for b in blockers)
        why = f", which {by} excludes" if by else ""
        out.append(
            f"unverified: {cap.package} {got} is outside the known-bad {cap.versions} "
            f"({cap.path} path) but below {cap.works_from}, the version the source verified"
            f"{why}; no source says {got} works there ({', '.join(a.urls)})"
        )
    return tuple(out)


def affected_gpu_names(cap: LibraryCap, gpus: GpuMatrix) -> tuple[str, ...]:
    """The names gpus.toml knows for the GPUs the entry applies to, oldest first."""
    names = [n for n in gpus.names if cap.on_gpu(n.compute_capability)]
    names.sort(key=lambda n: (Version(n.compute_capability), n.name))
    return tuple(n.name for n in names)


def warnings_without_gpu(
    matrix: LibraryMatrix,
    framework: str,
    version: str,
    locked: Mapping[str, str],
    gpus: GpuMatrix,
) -> tuple[str, ...]:
    """For a lock made without --gpu: each entry the locked version falls in,
    naming the GPUs affected and how to lock for one of them."""
    out: list[str] = []
    for cap in matrix.caps:
        got = locked.get(cap.package)
        if got is None or not cap.for_release(framework, version) or not cap.affects(got):
            continue
        names = affected_gpu_names(cap, gpus) if cap.compute_capability else ()
        on = f"{', '.join(names)} ({cap.gpus_text()})" if names else cap.gpus_text()
        example = shlex.quote(names[-1]) if names else "NAME"
        out.append(
            f"{cap.package} {got} is in {cap.versions}, which does not work on {on}: "
            f"{cap.effect} (source: {', '.join(matrix.urls(cap))}); for such a GPU add "
            f"--gpu {example} (or --gpu auto on it) to the lock command, which caps "
            f"{cap.constraint}"
        )
    return tuple(out)
