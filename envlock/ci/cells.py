"""A version range expanded into cells: one release, Python and CUDA source (or build) each.

``expand`` asks ``envlock.resolve.resolve`` for everything: which releases the
SPEC admits (the newest patch of each minor: resolve is asked for the newest
release, then again below that minor, until nothing is left), the Python and
CUDA source each release gets by default, and each cell itself. A cell is
therefore exactly what ``envlock lock <cell spec>`` resolves, with
``--python X`` and ``--cuda-source Y`` where those were listed, and the
resolve rules live in one place.

The cell id, ``tf<version>-py<python>-cuda<cuda>`` with ``-pip`` appended for
the pip CUDA source (``tf2.15.1-py3.11-cuda12.2``, ``tf2.16.2-py3.12-cuda12.3-pip``),
is stable, and safe as a folder name and an image tag (letters, digits, ``.``,
``-``). docker buildx bake refuses dots in target names, so a bake target is
the id with ``.`` replaced by ``_`` (``bake_target``).

torch and JAX (``envlock.ci.buildcells``): a cell is one release x CUDA build x
Python, ``torch<version>-py<python>-cu<XYZ>`` (``torch2.11.0-py3.12-cu130``) and
``jax<version>-py<python>-cuda<NN>`` (``jax0.11.2-py3.12-cuda13``); every build
``matrices/torch.toml`` / ``jax.toml`` holds for the release is a cell, those only
PyTorch's own index has included, marked ``"index": "pytorch"`` (their lock fails
with the hint naming that index unless the user configures it).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envlock.ci.cell import ALL as ALL
from envlock.ci.cell import Cell as Cell
from envlock.ci.cell import CellDict as CellDict
from envlock.ci.cell import Expansion as Expansion
from envlock.errors import NoResolution, UsageError
from envlock.matrix import Matrix
from envlock.model import CUDA_SOURCES, OLDEST_PYTHON, Resolution
from envlock.resolve import Constraints, resolve
from envlock.resolve.constraints import PYTHON_MINOR

# without --repo, cells are tagged with the local name `ci build` uses without --push:
# never a namespace on a registry nobody here owns
DEFAULT_REPO = "envlock-ci"
CELL_ID = re.compile(
    r"^(tf[0-9][0-9A-Za-z.]*-py3\.[0-9]{1,2}-cuda[0-9]+\.[0-9]+(-pip)?"
    r"|torch[0-9][0-9A-Za-z.]*-py3\.[0-9]{1,2}-cu[0-9]{2,3}"
    r"|jax[0-9][0-9A-Za-z.]*-py3\.[0-9]{1,2}-cuda[0-9]{2})$"
)
CELL_FIELDS = (
    "id",
    "spec",
    "version",
    "python",
    "cuda",
    "cudnn",
    "cuda_source",
    "base_image",
    "image_tag",
)
# a torch or JAX cell's too: its CUDA build (cu130, cuda13) and the index that has it
# ("default": the configured one; "pytorch": PyTorch's own)
BUILD_CELL_FIELDS = (*CELL_FIELDS, "build", "index")


def cell_id(resolution: Resolution) -> str:
    r = resolution
    suffix = "-pip" if r.cuda_source == "pip" else ""
    return f"tf{r.version}-py{r.python}-cuda{r.cuda}{suffix}"


def bake_target(cell_id_: str) -> str:
    """The bake target name of a cell: buildx allows only [a-zA-Z0-9_-]."""
    return cell_id_.replace(".", "_")


def parse_pythons(value: str | None) -> tuple[str, ...] | str | None:
    """``--python 3.10,3.11`` (checked, duplicates dropped), ``all``, or None."""
    if value is None:
        return None
    text = value.strip()
    if text.lower() == ALL:
        return ALL
    out: list[str] = []
    for part in text.split(","):
        item = part.strip()
        if not PYTHON_MINOR.fullmatch(item):
            raise UsageError(
                f"--python {value!r}: {item!r} is not a CPython minor",
                hint="e.g. --python 3.11 or --python 3.10,3.11 or --python all",
            )
        if item not in out:
            out.append(item)
    return tuple(out)


def parse_sources(value: str | None) -> tuple[str, ...] | None:
    """``--cuda-source system,pip`` (checked, duplicates dropped), or None."""
    if value is None:
        return None
    out: list[str] = []
    for part in value.split(","):
        item = part.strip()
        if item not in CUDA_SOURCES:
            raise UsageError(
                f"--cuda-source {value!r}: {item!r} is not a CUDA source",
                hint=f"one or more of {', '.join(CUDA_SOURCES)}, e.g. --cuda-source system,pip",
            )
        if item not in out:
            out.append(item)
    return tuple(out)


def check_repo(repo: str) -> str:
    """An image repository without tag or digest (``ghcr.io/owner/name``)."""
    from envlock.image.ref import HINT, match

    ref = match(repo)
    if ref is None or ref.tag or ref.digest:
        raise UsageError(
            f"--repo {repo!r} is not an image repository (no tag, no digest)",
            hint=HINT.replace(":tag][@sha256:<64 hex>]", "]").replace(":2.15.1", ""),
        )
    return ref.repository


def _below_minor(spec: str, version: str) -> str:
    """SPEC narrowed to releases older than ``version``'s minor."""
    v = Version(version)
    requirement = Requirement(spec.strip())
    requirement.specifier &= SpecifierSet(f"<{v.major}.{v.minor}")
    return str(requirement)


def releases(
    spec: str,
    matrix: Matrix | None = None,
    prereleases: bool = False,
    exclude_newer: str | None = None,
) -> list[Resolution]:
    """The default resolution of the newest patch of each minor SPEC admits, newest first
    (``prereleases``: release candidates are candidates too, as resolve's --pre;
    ``exclude_newer``: only releases on the index before that instant).

    NoResolution (exit 2) when SPEC admits nothing: resolve's own explanation."""

    def asked(text: str) -> Constraints:
        return Constraints(spec=text, prereleases=prereleases, exclude_newer=exclude_newer)

    found = [resolve(asked(spec), matrix)]
    while len(found) < 1000:
        below = _below_minor(spec, found[-1].version)
        try:
            found.append(resolve(asked(below), matrix))
        except NoResolution:
            break
    return found


def expand(
    spec: str,
    pythons: Sequence[str] | str | None = None,
    sources: Sequence[str] | None = None,
    repo: str = DEFAULT_REPO,
    matrix: Matrix | None = None,
    prereleases: bool = False,
    exclude_newer: str | None = None,
) -> Expansion:
    """The cells of SPEC x ``pythons`` x ``sources``, oldest release first.

    ``pythons``: the minors asked for, ``"all"`` (every minor the release has
    wheels for, from envlock's floor up; those resolve refuses for a CUDA
    source are left out with a note) or None (resolve's choice). ``sources``:
    the CUDA sources asked for, or None (resolve's choice). A Python or
    source that does not go with a release asked for explicitly is a
    NoResolution naming every such combination (exit 2), except where several
    CUDA sources were listed: then each combination that exists is a cell and
    those that do not are left out with a note (a release none of whose
    sources exists is still a NoResolution). ``exclude_newer``: an instant
    (envlock.instant) every cell resolves and locks with, as ``--exclude-newer``."""
    repository = check_repo(repo)
    from envlock.resolve.spec import parse_spec

    project = parse_spec(spec).project
    if project != "tensorflow":
        from envlock.ci.buildcells import expand_builds

        return expand_builds(
            spec,
            releases(spec, matrix, prereleases, exclude_newer),
            pythons,
            sources,
            repository,
            matrix,
            exclude_newer,
            prereleases,
        )
    cells: list[Cell] = []
    notes: list[str] = []
    impossible: list[str] = []
    several_sources = sources is not None and len(sources) > 1
    for default in reversed(releases(spec, matrix, prereleases, exclude_newer)):
        exact = f"tensorflow=={default.version}"
        left_out: list[str] = []
        before = len(cells)
        for source in sources or (None,):
            if pythons == ALL:
                floor = Version(OLDEST_PYTHON)
                wanted: Sequence[str | None] = [
                    p for p in default.python_supported if Version(p) >= floor
                ]
            elif pythons is None:
                wanted = [None]
            else:
                wanted = list(pythons)
            for python in wanted:
                constraints = Constraints(
                    spec=exact,
                    python=python,
                    cuda_source=source,
                    exclude_newer=exclude_newer,
                )
                try:
                    r = resolve(constraints, matrix)
                except NoResolution as e:
                    what = (
                        f"{exact} with Python {python or '(default)'}, "
                        f"CUDA source {source or '(default)'}"
                    )
                    if pythons == ALL:
                        notes.append(f"left out {what}: {e.message}")
                    elif several_sources:
                        left_out.append(f"{what}: {e.message}")
                    else:
                        impossible.append(f"{what}: {e.message}")
                    continue
                cid = cell_id(r)
                if any(c.id == cid for c in cells):
                    continue
                cells.append(Cell(cid, exact, r, f"{repository}:{cid}", constraints))
        if left_out and len(cells) > before:
            notes += [f"left out {what}" for what in left_out]
        else:
            impossible += left_out
    if impossible:
        raise NoResolution(
            "impossible cells: " + "; ".join(impossible),
            hint="drop those Pythons or CUDA sources, or use --python all for every "
            "Python each release supports",
        )
    if not cells:
        raise NoResolution(
            f"no cells for {spec!r}: " + "; ".join(notes),
            hint="widen SPEC or choose another --cuda-source",
        )
    return Expansion(tuple(cells), tuple(notes))
