"""``resolve``: the newest release that passes the SPEC and every stage, placed
on a base image, with the reasons and warnings a ``Resolution`` carries."""

from __future__ import annotations

from collections.abc import Callable, Sequence

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
from envlock.resolve.spec import FRAMEWORK, Spec
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
    first = _resolve(constraints, matrix, python_said)
    if not constraints.gpus:
        return first
    from envlock.resolve.chooser import choose

    return choose(first, constraints, matrix, lambda c: _resolve(c, matrix, python_said))


def _resolve(
    constraints: Constraints,
    matrix: Matrix,
    python_said: Callable[[TFRelease], str] | None,
) -> Resolution:
    cuda_matrix: CudaMatrix | None = matrix.cuda
    if cuda_matrix is None:
        raise DataError("matrices/cuda.toml: not available", hint="reinstall envlock")
    checked = check(constraints, cuda_matrix, gpu_matrix=matrix.gpus)
    every = sorted(matrix.tensorflow.releases, key=lambda r: r.version, reverse=True)
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
    first = f"tensorflow {release.version}: the newest release matching {quoted(checked.spec.text)}"
    if checked.spec.widened:
        first += f" (read as {FRAMEWORK}{checked.spec.shown}: ==X.Y means the X.Y series)"
    reasons.append(first)
    if release.prerelease:
        why = "--pre was given" if constraints.prereleases else "the SPEC names a pre-release"
        reasons.append(f"tensorflow {release.version} is a pre-release, a candidate because {why}")
    for name, removed in removed_by.items():
        newer = [(r, why) for r, why in removed if r.version > release.version]
        if newer:
            releases = [r for r, _ in newer]
            why = distinct_text(why for _, why in newer)
            reasons.append(f"newer {describe(releases)} excluded by {name}: {why}")
    python = placement.python
    reasons.append(placement.python_reason)
    reasons.append(
        f"built with CUDA {release.cuda_full} ({release.cuda_from}) "
        f"and cuDNN {release.cudnn} ({release.cudnn_from})"
    )
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
            f"tensorflow {release.version} is yanked on the index; used because it is pinned "
            f"exactly"
        )
    warnings.extend(compute_warnings(release, checked.gpus, matrix.gpus))

    return Resolution(
        framework=FRAMEWORK,
        version=str(release.version),
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
        matrix_version=matrix.data_version,
        matrix_digest=matrix.digest,
        warnings=tuple(warnings),
        reasons=tuple(reasons),
        os_python=placement.os.python,
        image_end_of_life=end_of_life,
    )
