"""Answers that follow their own verdicts: among the placements a release has (the
base image's CUDA, or the nvidia-* wheels of its and-cuda extra, each with the
cuDNN caps a lock for the named GPUs takes), the one on which every execution
path (envlock.resolve.paths) works for every named GPU.

``choose`` is called by ``resolve`` with its first answer and a way to resolve
again with another CUDA source. It keeps the first answer when no GPU is named,
the CUDA source was asked for (``--cuda-source``, ``[and-cuda]``), or every path
already works; else it takes the other source where fewer paths fail there, and
says in a why line what the other placement lost on. ``needs`` with a fix stays
for what no placement avoids. ``runs`` says whether a GPU runs the release's
code at all (compiled kernels or the PTX JIT, and cuDNN not refused): the
``resolve`` command exits 1 when a named GPU does not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from packaging.version import Version

from envlock.errors import CheckFailed, NoResolution
from envlock.matrix import Matrix
from envlock.model import Constraints, Resolution
from envlock.resolve.paths import GpuPaths, for_resolution

GOOD = ("works", "unused", "unknown")


def runs(gpu: GpuPaths, *, unknown: bool = True) -> bool:
    """Whether the release's code can run on the GPU at all: compiled kernels or the
    PTX JIT work, or work once their fix is made (``needs``: a newer driver), and
    cuDNN is not refused. Both unknown (the wheel does not say its sm targets) is not a
    failure: exit 1 only for what the facts show."""
    code = {gpu.status("kernels"), gpu.status("ptx-jit")}
    # both unknown (a torch or JAX wheel does not say its sm targets): not shown to fail
    # (``unknown=False``: only what the facts show runs, for naming another release)
    serves = bool(code & {"works", "needs"}) or (unknown and code == {"unknown"})
    return serves and gpu.status("cudnn") != "cannot"


def failing(gpu: GpuPaths) -> list[str]:
    """The paths that do not work ("xla (needs)"), kernels and PTX JIT counted as one."""
    out = []
    if gpu.status("kernels") != "works" and gpu.status("ptx-jit") != "works":
        out.append(f"kernels and ptx-jit ({gpu.status('ptx-jit')})")
    out += [f"{p} ({gpu.status(p)})" for p in ("xla", "cudnn") if gpu.status(p) not in GOOD]
    return out


def score(gpus: Sequence[GpuPaths]) -> tuple[int, int]:
    """(GPUs the code cannot run on, paths that do not work as they stand): lower is better."""
    return sum(not runs(g) for g in gpus), sum(len(failing(g)) for g in gpus)


def _where(res: Resolution) -> str:
    if res.cuda_source == "system":
        return f"the base image {res.base_image}"
    return f"the nvidia-* wheels of {res.framework}[and-cuda]"


def _losses(gpus: Sequence[GpuPaths]) -> str:
    """ "on H100 xla (needs) and cudnn (needs)": what does not work, per GPU."""
    return "; ".join(f"on {g.gpu} {' and '.join(failing(g))}" for g in gpus if failing(g))


def choose(
    first: Resolution,
    constraints: Constraints,
    matrix: Matrix,
    again: Callable[[Constraints], Resolution],
) -> Resolution:
    """``first``, or the answer for the other CUDA source when it does better for the
    named GPUs; the why lines say which lost and on what."""
    from envlock.resolve.constraints import check

    if matrix.cuda is None:
        return first
    checked = check(constraints, matrix.cuda, gpu_matrix=matrix.gpus)
    if checked.source is not None:
        return first
    mine = for_resolution(first, constraints, matrix)
    if not mine or score(mine) == (0, 0):
        return first
    other_source = "pip" if first.cuda_source == "system" else "system"
    try:
        other = again(replace(constraints, cuda_source=other_source))
    except NoResolution as e:
        why = f"CUDA source {first.cuda_source}; {other_source} has no placement: {e.message}"
        return replace(first, reasons=(*first.reasons, why))
    if other.version != first.version:  # a placement of this release, not another release
        why = (
            f"CUDA source {first.cuda_source}; {other_source} places {first.framework} "
            f"{other.version}, not {first.version}"
        )
        return replace(first, reasons=(*first.reasons, why))
    theirs = for_resolution(other, constraints, matrix)
    if score(theirs) < score(mine):
        after = (
            "every path works"
            if score(theirs) == (0, 0)
            else f"only these do not: {_losses(theirs)}"
        )
        why = (
            f"CUDA source {other.cuda_source}, not {first.cuda_source}: with "
            f"{_where(first)}, {_losses(mine)} do not work; with {_where(other)} {after}"
        )
        return replace(other, reasons=(*other.reasons, why))
    why = f"CUDA source {first.cuda_source}: with {_where(other)}, " + (
        f"{_losses(theirs)} do not work either" if score(theirs) != (0, 0) else "no more works"
    )
    return replace(first, reasons=(*first.reasons, why))


def gpu_args(constraints: Constraints) -> list[str]:
    """The named GPUs as ``--gpu`` arguments, as a printed command gives them."""
    return [a for g in constraints.gpus for a in ("--gpu", g.name or str(g.compute_capability))]


def runs_nowhere(
    res: Resolution,
    constraints: Constraints,
    paths: Sequence[GpuPaths],
    matrix: Matrix,
    resolve: Callable[[Constraints, Matrix], Resolution],
    where: str = "the paths above",
) -> CheckFailed | None:
    """Exit 1 for ``resolve`` and ``lock``: a named GPU runs none of the release's code
    on any placement (``choose`` has already taken the better one). The hint is the
    newest release that runs on every named GPU (pre-releases with --pre, as pip
    offers them), as a command that runs as printed; else how to look for newer."""
    import shlex

    from envlock.errors import EnvlockError

    stuck = [g for g in paths if not runs(g)]
    if not stuck:
        return None
    names = ", ".join(
        g.gpu if "compute capability" in g.gpu else f"{g.gpu} ({g.compute_capability})"
        for g in stuck
    )
    message = (
        f"{res.framework} {res.version} runs on no placement on {names}: neither compiled "
        f"kernels nor the PTX JIT can serve it ({where})"
    )
    candidates, matrix_file, refresh = _other_releases(res.framework, matrix)
    spec_of = _spec_maker(res.framework, constraints.spec)
    for version, prerelease in candidates:
        if str(version) == res.version.split("+")[0] or (
            prerelease and not constraints.prereleases
        ):
            continue
        asked = replace(constraints, spec=spec_of(version))
        try:
            other = resolve(asked, matrix)
        except EnvlockError:
            continue
        if all(runs(g, unknown=False) for g in for_resolution(other, asked, matrix)):
            command = shlex.join(["envlock", "resolve", asked.spec, *gpu_args(constraints)])
            return CheckFailed(message, hint=f"{res.framework} {version} runs there: {command}")
    return CheckFailed(
        message + f"; no {res.framework} release in {matrix_file} does",
        hint=f"{refresh} says whether the index has releases the matrix lacks",
    )


def _other_releases(framework: str, matrix: Matrix) -> tuple[list[tuple[Version, bool]], str, str]:
    """The releases to try instead, newest first, the matrix file they are in, and
    the refresh that says what the index has beyond it."""
    if framework == "tensorflow":
        found = {(r.version, r.prerelease) for r in matrix.tensorflow.releases}
        return (
            sorted(found, reverse=True),
            "matrices/tensorflow.toml",
            "envlock matrix refresh --check",
        )
    from envlock.matrix import builds

    found = {(b.version, b.version.is_prerelease) for b in builds.load(framework).builds}
    return (
        sorted(found, reverse=True),
        f"matrices/{framework}.toml",
        f"envlock matrix refresh --project {framework} --check",
    )


def _spec_maker(framework: str, spec: str) -> Callable[[Version], str]:
    """``framework==V`` for another release, with the extras the user asked for
    (``jax[cuda13]``)."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        extras = sorted(Requirement(spec).extras)
    except InvalidRequirement:
        extras = []
    named = f"{framework}[{','.join(extras)}]" if extras else framework
    return lambda version: f"{named}=={version}"
