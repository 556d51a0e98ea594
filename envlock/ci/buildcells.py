"""The cells of a torch or JAX range: release x CUDA build x Python.

TensorFlow has one CUDA build per release, so its cells vary the Python and the
CUDA source (``envlock.ci.cells``). torch and JAX have several builds per release
(``matrices/torch.toml``: the one on the configured index and those only PyTorch's
own index has; ``matrices/jax.toml``: one per CUDA major the SPEC's extra admits),
each bringing its CUDA as nvidia-* wheels: a cell is one build, resolved as
``envlock lock 'torch==2.11.0' --cuda 12.8`` (torch: the build's CUDA picks it)
or ``envlock lock 'jax[cuda13]==0.11.2'`` (JAX: the extra does), so its lock is
exactly that command's. A build only PyTorch's own index has is a cell too,
marked ``index: pytorch``: its lock says so (and how to configure that index).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envlock.errors import NoResolution, UsageError
from envlock.matrix import Matrix
from envlock.model import OLDEST_PYTHON, Resolution
from envlock.resolve import Constraints, resolve

if TYPE_CHECKING:
    from envlock.ci.cell import Expansion
    from envlock.matrix.builds import FrameworkBuild


def _cell_spec(project: str, build: str, version: str) -> str:
    if project == "jax":
        return f"jax[{build}]=={version}"
    return f"{project}=={version}"


def _cuda_of(project: str, build: FrameworkBuild) -> str | None:
    """The --cuda that picks a torch build (its CUDA); JAX's extra picks its build."""
    return build.cuda if project == "torch" else None


def _newest(
    spec: str,
    project: str,
    build: FrameworkBuild,
    minor: tuple[int, int],
    matrix: Matrix | None,
    prereleases: bool,
    exclude_newer: str | None,
) -> Resolution | None:
    """resolve's answer for SPEC narrowed to the minor and to ``build``; None when nothing
    of that build is left (its files newer than --exclude-newer, pre-releases only)."""
    requirement = Requirement(spec.strip())
    requirement.specifier &= SpecifierSet(f"=={minor[0]}.{minor[1]}.*")
    if project == "jax":
        requirement.extras = {build.build}
    asked = Constraints(
        spec=str(requirement),
        cuda=_cuda_of(project, build),
        prereleases=prereleases,
        exclude_newer=exclude_newer,
    )
    try:
        found = resolve(asked, matrix)
    except NoResolution:
        return None
    if project == "torch" and found.cuda != build.cuda:
        return None
    return found


def expand_builds(
    spec: str,
    found: Sequence[Resolution],
    pythons: Sequence[str] | str | None,
    sources: Sequence[str] | None,
    repository: str,
    matrix: Matrix | None,
    exclude_newer: str | None,
    prereleases: bool = False,
) -> Expansion:
    """The cells of a torch/JAX SPEC, oldest release first, each build of a release
    (configured index first, then newer CUDA first) x the Pythons asked for.
    ``found``: resolve's answer for the newest patch of each minor (``cells.releases``);
    each build of a minor is the newest patch of it SPEC admits.
    Returns an ``envlock.ci.cells.Expansion``; NoResolution (exit 2) as ``expand``."""
    from envlock.ci.cell import ALL, Cell, Expansion, cell_id_of_build
    from envlock.matrix import builds
    from envlock.resolve.spec import parse_spec

    parsed = parse_spec(spec)
    if sources is not None and tuple(sources) != ("pip",):
        raise UsageError(
            f"--cuda-source {','.join(sources)}: {parsed.project} builds bring their CUDA as "
            "nvidia-* wheels (the pip source), one cell per CUDA build",
            hint="drop --cuda-source",
        )
    rows = [b for b in builds.load(parsed.project).builds if parsed.admits(b.version)]
    if parsed.project == "jax":
        rows = [b for b in rows if b.build in parsed.jax_builds]
    cells: list[Cell] = []
    notes: list[str] = []
    impossible: list[str] = []
    for default in reversed(found):
        release = Version(default.version)
        minor = (release.major, release.minor)
        # each build of the minor: its newest patch SPEC admits (jax 0.12.1 has a cuda13
        # build only, 0.12.0.1 the cuda12 one); the configured index's first, newer CUDA next
        names = sorted(
            {b.build: b for b in rows if (b.version.major, b.version.minor) == minor}.values(),
            key=lambda b: (b.index == "default", Version(b.cuda)),
            reverse=True,
        )
        for named in names:
            newest = _newest(spec, parsed.project, named, minor, matrix, prereleases, exclude_newer)
            if newest is None:
                continue
            version = Version(newest.version).public
            build = next(b for b in rows if (str(b.version), b.build) == (version, named.build))
            exact = _cell_spec(parsed.project, build.build, version)
            if pythons == ALL:
                floor = Version(OLDEST_PYTHON)
                wanted: Sequence[str | None] = [p for p in build.python if Version(p) >= floor]
            elif pythons is None:
                wanted = [None]
            else:
                wanted = list(pythons)
            for python in wanted:
                constraints = Constraints(
                    spec=exact,
                    python=python,
                    cuda=_cuda_of(parsed.project, build),
                    exclude_newer=exclude_newer,
                )
                try:
                    r = resolve(constraints, matrix)
                except NoResolution as e:
                    what = f"{exact} ({build.build}) with Python {python or '(default)'}"
                    if pythons == ALL:
                        notes.append(f"left out {what}: {e.message}")
                    else:
                        impossible.append(f"{what}: {e.message}")
                    continue
                cid = cell_id_of_build(parsed.project, version, r.python, build.build)
                if any(c.id == cid for c in cells):
                    continue
                cells.append(
                    Cell(
                        cid,
                        exact,
                        r,
                        f"{repository}:{cid}",
                        constraints,
                        build=build.build,
                        index=build.index,
                    )
                )
    if impossible:
        raise NoResolution(
            "impossible cells: " + "; ".join(impossible),
            hint="drop those Pythons, or use --python all for every Python each build supports",
        )
    if not cells:
        raise NoResolution(
            f"no cells for {spec!r}: " + "; ".join(notes), hint="widen SPEC or the Pythons"
        )
    return Expansion(tuple(cells), tuple(notes))
