"""``matrices/arch-lists.toml``: the sm targets of builds whose wheels do not name them.

A torch wheel's compiled sm targets live inside ``libtorch_cuda.so``; no text member
of the wheel names them, so ``matrix refresh`` reads them as unknown. Where the built
library was run on a GPU machine, ``torch.cuda.get_arch_list()`` reports them: this
hand-edited, sourced table holds such readings, and ``matrix refresh`` writes each
into the matching row of ``torch.toml`` (``compute_capabilities_from =
"gpu-machine"``), so resolve's kernels and PTX JIT verdicts for that build are read,
not guessed. A build the table does not list stays ``unknown``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from packaging.version import Version

from envlock.errors import DataError

if TYPE_CHECKING:
    from envlock.matrix.builds import FrameworkBuild

FILE = "arch-lists.toml"
SCHEMA_VERSION = 1
FROM = "gpu-machine"
HINT = f"fix envlock/data/matrices/{FILE} (each row: project, version, build, sm targets, from)"
_TOP = ("schema_version", "data_version", "sources", "arch_lists")
_FIELDS = ("project", "version", "build", "compute_capabilities", "from")
_CAPABILITY = (r"sm_[0-9]{2,3}[a-z]?|compute_[0-9]{2,3}[a-z]?", "sm_XY or compute_XY")
_BUILD = (r"cu[0-9]{2,3}|cuda[0-9]{2}", "cuXYZ or cudaNN")


@dataclass(frozen=True)
class ArchList:
    project: str
    version: Version
    build: str
    compute_capabilities: tuple[str, ...]
    source: str  # a key of [sources]


@dataclass(frozen=True)
class ArchLists:
    data_version: str
    sources: tuple[tuple[str, str], ...]
    rows: tuple[ArchList, ...]

    def source(self, key: str) -> str:
        return dict(self.sources)[key]


def parse(doc: Mapping[str, Any], filename: str) -> ArchLists:
    """Validate a loaded arch-lists.toml document (a DataError naming the field)."""
    from envlock.matrix.builds import PROJECTS
    from envlock.matrix.schema import Checker

    c = Checker(filename, HINT)
    c.table(doc, "", _TOP)
    _schema, data_version = c.header(doc, SCHEMA_VERSION, hint=HINT)
    sources = c.sources(doc)
    rows = []
    for i, row in enumerate(c.rows(doc, "arch_lists")):
        path = f"arch_lists[{i}]"
        c.table(row, path, _FIELDS)
        project = c.choice(row, "project", path, PROJECTS)
        version = c.version(row, "version", path)
        build = c.string(row, "build", path, _BUILD)
        caps = c.strings(row, "compute_capabilities", path, _CAPABILITY)
        if not caps:
            raise c.fail(f"{path}.compute_capabilities", "name at least one sm target")
        key = c.string(row, "from", path)
        if key not in c.source_keys:
            raise c.fail(f"{path}.from", f"{key!r} is not a key of [sources]")
        rows.append(ArchList(project, version, build, caps, key))
    c.distinct(
        "arch_lists", "project+version+build", [(r.project, r.version, r.build) for r in rows]
    )
    return ArchLists(data_version, sources, tuple(rows))


def load() -> ArchLists:
    """The packaged table, validated."""
    from envlock.matrix import read_toml

    doc, _digest, shown = read_toml(FILE)
    return parse(doc, shown)


def applied(
    rows: Sequence[FrameworkBuild], table: ArchLists
) -> tuple[list[FrameworkBuild], list[tuple[str, str]]]:
    """``rows`` with each listed build's sm targets written in, and the sources used.

    A row whose wheel already named its targets keeps them; the row's note loses the
    "unknown" clause and says where the targets were read."""
    out: list[FrameworkBuild] = []
    used: dict[str, str] = {}
    for row in rows:
        match = next(
            (
                a
                for a in table.rows
                if (a.project, a.version, a.build) == (row.project, row.version, row.build)
            ),
            None,
        )
        if match is None or row.compute_capabilities:
            out.append(row)
            continue
        note = "; ".join(
            part
            for part in row.note.split("; ")
            if part and not part.startswith("compute_capabilities: unknown")
        )
        said = f"compute_capabilities: read on a GPU machine ({match.source})"
        out.append(
            replace(
                row,
                compute_capabilities=match.compute_capabilities,
                compute_capabilities_from=FROM,
                sources=(*row.sources, match.source),
                note=f"{said}; {note}" if note else said,
            )
        )
        used[match.source] = table.source(match.source)
    return out, list(used.items())


def check_known(table: ArchLists, builds: Sequence[FrameworkBuild]) -> None:
    """Every row of the builds' project names a build they hold (a typo is not a
    silent no-op)."""
    have = {(b.project, b.version, b.build) for b in builds}
    projects = {b.project for b in builds}
    for a in table.rows:
        if a.project in projects and (a.project, a.version, a.build) not in have:
            raise DataError(
                f"{FILE}: {a.project} {a.version} {a.build}: no such build in {a.project}.toml",
                hint=HINT,
            )
