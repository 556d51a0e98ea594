"""``resolve``: the newest release that passes the SPEC and every stage, placed
on a base image, with the reasons and warnings a ``Resolution`` carries."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from packaging.version import Version

from envlock.errors import DataError, NoResolution
from envlock.matrix import Matrix, TFRelease
from envlock.matrix.cache import load_matrix
from envlock.matrix.cuda import CudaMatrix
from envlock.model import Constraints, Resolution
from envlock.readers import quoted
from envlock.resolve.constraints import Checked, check
from envlock.resolve.explain import (
    compute_warnings,
    describe,
    distinct_text,
    image_warnings,
    nearest,
    no_match,
)
from envlock.resolve.floors import floors
from envlock.resolve.placement import Placement
from envlock.resolve.spec import Spec
from envlock.resolve.stages import Stage, stages_for


def resolve(
    constraints: Constraints,
    matrix: Matrix | None = None,
    *,
    python_said: Callable[[TFRelease], str] | None = None,
) -> Resolution:
    """The newest release (and Python, image, ...) satisfying every constraint.
    ``python_said``: why the given Python is the one, per release, in the words after
    "Python 3.X" of the reasons (None: as asked; ``envlock.lock.core`` chose it for
    the pins and says so).

    With GPUs named and no CUDA source asked for, the placement is the one on which
    every execution path works for every named GPU (``envlock.resolve.chooser``):
    the base image's CUDA where it does, else the nvidia-* wheels where they do."""
    if matrix is None:
        matrix = load_matrix()
    constraints = _cuda_from_wheels(constraints)
    try:
        first = _resolve(constraints, matrix, python_said)
    except NoResolution as e:
        raise _other_jax_build(e, constraints, matrix) from None
    if not constraints.gpus:
        return first
    from envlock.resolve.chooser import choose

    return choose(first, constraints, matrix, lambda c: _resolve(c, matrix, python_said))


def _other_jax_build(error: NoResolution, constraints: Constraints, matrix: Matrix) -> NoResolution:
    """``error``, with a hint naming the other JAX CUDA major when it fits (``jax[cuda13]``
    on a driver that runs CUDA 12 only: ``jax[cuda12]`` does)."""
    from envlock.errors import EnvlockError
    from envlock.resolve.spec import parse_spec

    spec = parse_spec(constraints.spec)
    if spec.project != "jax" or len(spec.jax_builds) != 1:
        return error
    other = "cuda12" if spec.jax_builds[0] == "cuda13" else "cuda13"
    text = spec.text.replace(f"[{spec.jax_builds[0]}]", f"[{other}]", 1)
    try:
        res = _resolve(replace(constraints, spec=text), matrix, None)
    except EnvlockError:
        return error
    hint = f"{text} fits: jax {res.version}, CUDA {res.cuda}"
    return NoResolution(error.message, hint=f"{error.hint}; or {hint}" if error.hint else hint)


def _cuda_from_wheels(constraints: Constraints) -> Constraints:
    """torch and JAX builds bring their CUDA as nvidia-* wheels (torch's Requires-Dist,
    jax[cudaNN]'s plugin extra): the pip CUDA source, always."""

    from envlock.errors import UsageError
    from envlock.resolve.spec import parse_spec

    if not constraints.spec:
        return constraints
    spec = parse_spec(constraints.spec)
    if spec.project == "tensorflow" or constraints.cuda_source == "pip":
        return constraints
    if constraints.cuda_source == "system":
        raise UsageError(
            f"--cuda-source system does not apply to {spec.project}: its CUDA builds bring "
            "their CUDA and cuDNN as nvidia-* wheels",
            hint="drop --cuda-source",
        )
    return replace(constraints, cuda_source="pip")


def candidates(matrix: Matrix, spec: Spec) -> list[TFRelease]:
    """Every row of the SPEC's project, newest first: for torch and JAX one per release
    and CUDA build (the build on the configured index first, then newer CUDA first)."""
    if spec.project == "tensorflow":
        return sorted(matrix.tensorflow.releases, key=lambda r: r.version, reverse=True)
    from envlock.matrix import builds

    rows = [builds.as_release(b) for b in builds.load(spec.project).builds]
    if spec.project == "jax":
        rows = [r for r in rows if r.build in spec.jax_builds]
    return sorted(
        rows,
        key=lambda r: (r.version, r.index == "default", Version(r.cuda)),
        reverse=True,
    )


def shown_version(release: TFRelease) -> str:
    """The version a requirement pins: ``2.11.0``; a build from PyTorch's own index with
    its local label, as that index lists it (``2.11.0+cu128``)."""
    if release.project == "torch" and release.index == "pytorch":
        return f"{release.version}+{release.build}"
    return str(release.version)


def _resolve(
    constraints: Constraints,
    matrix: Matrix,
    python_said: Callable[[TFRelease], str] | None,
) -> Resolution:
    cuda_matrix: CudaMatrix | None = matrix.cuda
    if cuda_matrix is None:
        raise DataError("matrices/cuda.toml: not available", hint="reinstall envlock")
    checked = check(constraints, cuda_matrix, gpu_matrix=matrix.gpus)
    every = candidates(matrix, checked.spec)
    # pre-releases only with --pre or a SPEC naming one, as pip and uv (PEP 440)
    pre = prereleases_allowed(checked.spec, constraints)
    newest_first = [r for r in every if pre or not r.prerelease]

    # 1. the SPEC itself; yanked releases only when pinned exactly (PEP 592)
    matched = [
        r
        for r in newest_first
        if checked.spec.admits(r.version) and not (r.yanked and r.version != checked.spec.exact)
    ]
    if not matched:
        raise no_match(checked.spec, every, pre)

    # 2. the other constraints, in the order they are reported
    stages, image = stages_for(checked, constraints, cuda_matrix, python_said)
    removed_by: dict[str, list[tuple[TFRelease, str]]] = {}
    remaining = matched
    for index, stage in enumerate(stages):
        kept: list[TFRelease] = []
        for release in remaining:
            why = stage.why_not(release)
            if why is None:
                kept.append(release)
            else:
                removed_by.setdefault(stage.name, []).append((release, why))
        if not kept:
            raise _nothing_fits(stage, stages[:index], remaining, newest_first, stages)
        remaining = kept
    chosen = remaining[0]
    placement = image.place(chosen)
    assert isinstance(placement, Placement)
    return _resolution(chosen, placement, checked, constraints, matrix, cuda_matrix, removed_by)


def prereleases_allowed(spec: Spec, constraints: Constraints) -> bool:
    """Whether pre-releases are candidates: --pre, or a SPEC naming one
    (``==2.22.0rc0``, ``>=2.22.0rc0``, ``===2.22.0rc0``), as pip and uv decide."""
    exact_pre = spec.exact is not None and spec.exact.is_prerelease
    return constraints.prereleases or spec.prereleases or exact_pre


def _nothing_fits(
    stage: Stage,
    before: Sequence[Stage],
    blocked: Sequence[TFRelease],
    newest_first: Sequence[TFRelease],
    stages: Sequence[Stage],
) -> NoResolution:
    """The failing stage's explanation, with the stages that ran before it."""
    passing = [
        r for r in newest_first if not r.yanked and all(s.why_not(r) is None for s in stages)
    ]
    failure = stage.explain(blocked, nearest(blocked, passing))
    message = failure.message
    shown = [s.name for s in before if s.reported]
    if shown:
        message += f" (after {', '.join(shown)})"
    return NoResolution(f"nothing fits: {message}", hint="; or ".join(failure.hints) or None)


def _resolution(
    release: TFRelease,
    placement: Placement,
    checked: Checked,
    constraints: Constraints,
    matrix: Matrix,
    cuda_matrix: CudaMatrix,
    removed_by: dict[str, list[tuple[TFRelease, str]]],
) -> Resolution:
    reasons: list[str] = []
    project = release.project
    newest = "release" if project == "tensorflow" else "release and CUDA build"
    first = f"{release.label}: the newest {newest} matching {quoted(checked.spec.text)}"
    if checked.spec.widened:
        first += f" (read as {project}{checked.spec.shown}: ==X.Y means the X.Y series)"
    reasons.append(first)
    if project != "tensorflow":
        reasons.append(_where_from(release))
    if release.prerelease:
        why = "--pre was given" if constraints.prereleases else "the SPEC names a pre-release"
        reasons.append(f"{release.label} is a pre-release, a candidate because {why}")
    order = candidates(matrix, checked.spec)
    rank = {(r.version, r.build): i for i, r in enumerate(order)}
    mine = next(
        (
            i
            for i, r in enumerate(order)
            if (r.version, r.build) == (release.version, release.build)
        ),
        0,
    )
    for name, removed in removed_by.items():
        newer = [
            (r, why)
            for r, why in removed
            if (
                r.version > release.version
                if project == "tensorflow"
                else rank.get((r.version, r.build), 0) < mine
            )
        ]
        if newer:
            releases = [r for r, _ in newer]
            why = distinct_text(why for _, why in newer)
            word = "newer" if project == "tensorflow" else "preferred"  # a build, or newer
            reasons.append(f"{word} {describe(releases)} excluded by {name}: {why}")
    python = placement.python
    reasons.append(placement.python_reason)
    reasons.append(
        f"built with CUDA {release.cuda_full} ({release.cuda_from}) "
        f"and cuDNN {release.cudnn} ({release.cudnn_from})"
    )
    if project != "tensorflow":
        reasons.append(_capabilities_said(release))
    floor = floors(
        release,
        placement.image,
        placement.tag,
        cuda_matrix,
        matrix.gpus,
        checked.gpus,
        checked.driver,
        str(constraints.driver),
        constraints.driver_from,
        constraints.driver_cuda,
    )
    driver_min = floor.driver_min
    reasons.extend(floor.reasons[:1])  # the minor-version floor, then where it runs
    reasons.extend(placement.reasons)
    reasons.extend(floor.reasons[1:])

    warnings: list[str] = list(placement.warnings)
    warnings.extend(floor.warnings)
    end_of_life = cuda_matrix.end_of_life(placement.image.cuda)
    warnings.extend(image_warnings(end_of_life, f"nvidia/cuda:{placement.tag}"))
    if release.yanked:
        warnings.append(
            f"{release.label} is yanked on the index; used because it is pinned exactly"
        )
    warnings.extend(compute_warnings(release, checked.gpus, matrix.gpus))

    return Resolution(
        framework=project,
        version=shown_version(release),
        python=python,
        python_supported=tuple(release.python),
        cuda=release.cuda,
        cudnn=release.cudnn,
        driver_min=driver_min,
        compute_capabilities=tuple(release.compute_capabilities),
        cuda_source=placement.source,
        os=placement.os.name,
        base_image=f"nvidia/cuda:{placement.tag}",
        base_image_digest=placement.image.digest(placement.tag),
        cuda_image_version=placement.image.version,
        image_cudnn=placement.image.cudnn if placement.source == "system" else None,
        and_cuda=tuple(release.and_cuda),
        requires_python=release.requires_python,
        matrix_version=_matrix_of(release, matrix)[0],
        matrix_digest=_matrix_of(release, matrix)[1],
        warnings=tuple(warnings),
        reasons=tuple(reasons),
        os_python=placement.os.python,
        image_end_of_life=end_of_life,
    )


def _where_from(release: TFRelease) -> str:
    """Where the build is and what its facts rest on."""
    from envlock.matrix import builds

    matrix = builds.load(release.project)
    row = next(
        (b for b in matrix.builds if (b.version, b.build) == (release.version, release.build)),
        None,
    )
    keys = ", ".join(row.sources) if row else ""
    if release.index == "pytorch":
        where = (
            f"the {release.build} build is on PyTorch's own index, not on the configured one "
            f"(configure that index to install {release.project}=={shown_version(release)})"
        )
    else:
        where = f"the {release.build} build is the one on the configured index ({release.wheel})"
    if keys:
        where += f"; its facts: matrices/{release.project}.toml, source {keys}"
    return where


def _capabilities_said(release: TFRelease) -> str:
    if release.compute_capabilities:
        caps = ", ".join(release.compute_capabilities)
        return f"compute capabilities {caps} ({release.compute_capabilities_from})"
    return (
        "compute capabilities: unknown: the wheel does not say which sm targets it carries, "
        "so the kernels and PTX JIT verdicts are unknown, not guessed"
    )


def _matrix_of(release: TFRelease, matrix: Matrix) -> tuple[str, str]:
    """(data_version, sha256) of the matrix file the release's row is in."""
    if release.project == "tensorflow":
        return matrix.data_version, matrix.digest
    from envlock.matrix import builds

    built = builds.load(release.project)
    return built.data_version, built.digest
