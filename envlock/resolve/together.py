"""One answer for an environment of several frameworks: ``resolve tensorflow==2.20 torch==2.9``.

The frameworks share one process's libraries: one CUDA major (nvidia-cudnn-cu12 and
-cu13 both install nvidia/cudnn/lib/libcudnn.so.9; whichever installs last wins, and
one framework loads the other's library, as ``envlock.lock.gpufacts`` reports for a
lock), one Python and one base image. The SPEC with the fewest builds goes first
(tensorflow: one per release), and each other SPEC is resolved on its CUDA major and
Python, with the CUDA of every framework from the nvidia-* wheels (the pip source:
torch and JAX bring them anyway, and one cuDNN serves all). A requirement both name
must admit one version (``nvidia-cudnn-cu12==9.10.2.21`` of torch inside tensorflow's
``>=9.3.0.75,<10``). What does not fit is a ``NoResolution`` naming the SPEC, the
shared fact it lacks and the ways out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from envlock.errors import EnvlockError, NoResolution, UsageError
from envlock.model import Constraints, Resolution
from envlock.readers import quoted
from envlock.resolve.spec import parse_spec

ORDER = {"tensorflow": 0, "torch": 1, "jax": 2}


def _pins(res: Resolution) -> dict[str, Requirement]:
    out: dict[str, Requirement] = {}
    for line in res.and_cuda:
        req = Requirement(line)
        out[str(canonicalize_name(req.name))] = req
    return out


def clashes(a: Resolution, b: Resolution) -> list[str]:
    """Requirements both name that no one version satisfies (checked where one pins
    exactly; two ranges are left to the lock's resolver)."""
    out = []
    pa, pb = _pins(a), _pins(b)
    for name in sorted(set(pa) & set(pb)):
        ra, rb = pa[name], pb[name]
        for x, y in ((ra, rb), (rb, ra)):
            exact = [s.version for s in x.specifier if s.operator in ("==", "===")]
            if exact and not y.specifier.contains(exact[0], prereleases=True):
                out.append(
                    f"{a.framework} {a.version} needs {ra}, {b.framework} {b.version} needs {rb}"
                )
                break
    return out


def resolve_together(
    constraints: Constraints,
    specs: Sequence[str],
    resolve: Callable[[Constraints], Resolution],
) -> Resolution:
    """The first framework's Resolution with the others in ``together``."""
    parsed = [(text, parse_spec(text)) for text in specs]
    projects = [p.project for _, p in parsed]
    if len(set(projects)) != len(projects):
        raise UsageError(
            f"SPECs {', '.join(quoted(t) for t, _ in parsed)} name one project twice",
            hint="give each of tensorflow, torch and jax once",
        )
    if constraints.cuda_source == "system":
        raise UsageError(
            "--cuda-source system does not apply to an environment with torch or jax: their "
            "CUDA comes as nvidia-* wheels, which every framework then shares",
            hint="drop --cuda-source",
        )
    parsed.sort(key=lambda tp: ORDER[tp[1].project])
    base = replace(constraints, cuda_source="pip")
    first_text = parsed[0][0]
    first = resolve(replace(base, spec=first_text))
    if constraints.python is None:
        first = _on_a_common_python(first, parsed, base, resolve)
    major = first.cuda.split(".")[0]
    others: list[Resolution] = []
    for text, spec in parsed[1:]:
        asked = replace(base, spec=text, python=first.python, cuda=major)
        try:
            other = resolve(asked)
        except NoResolution as e:
            raise _no_fit(first, text, major, e, base, resolve) from None
        for clash in clashes(first, other) + [c for o in others for c in clashes(o, other)]:
            raise NoResolution(
                f"nothing fits: {first.framework} {first.version} with {text}: {clash}",
                hint=f"another release of {spec.project} whose pin the other admits, or "
                f"resolve {quoted(first_text)} and {quoted(text)} as separate environments",
            )
        others.append(other)
    why = (
        f"one environment for {', '.join(quoted(t) for t, _ in parsed)}: "
        f"CUDA {major}.x and Python {first.python} for all "
        f"({', '.join(f'{r.framework} {r.version}: CUDA {r.cuda}' for r in (first, *others))}); "
        "every framework's CUDA from the nvidia-* wheels (one cuDNN for all)"
    )
    floor = max((first, *others), key=lambda r: tuple(int(x) for x in r.driver_min.split(".")))
    reasons = (*first.reasons, why)
    if floor is not first:
        reasons += (
            f"driver >= {floor.driver_min} for the environment: {floor.framework} "
            f"{floor.version} needs it",
        )
    image = max((first, *others), key=lambda r: Version(r.cuda_image_version))
    if image is not first:
        reasons += (
            f"one base image for the environment, {image.base_image}: the newest CUDA any of "
            f"them was built with ({image.framework} {image.version}: CUDA {image.cuda}); the "
            f"others run on it by minor-version compatibility",
        )
        first = replace(
            first,
            base_image=image.base_image,
            base_image_digest=image.base_image_digest,
            cuda_image_version=image.cuda_image_version,
            os=image.os,
            os_python=image.os_python,
            image_end_of_life=image.image_end_of_life,
        )
        others = [
            replace(
                o,
                base_image=image.base_image,
                base_image_digest=image.base_image_digest,
                cuda_image_version=image.cuda_image_version,
                os=image.os,
                os_python=image.os_python,
            )
            for o in others
        ]
    return replace(
        first,
        reasons=reasons,
        driver_min=floor.driver_min,
        together=tuple(others),
    )


def _on_a_common_python(
    first: Resolution,
    parsed: Sequence[tuple[str, object]],
    base: Constraints,
    resolve: Callable[[Constraints], Resolution],
) -> Resolution:
    """``first`` again on a Python every SPEC's own answer has wheels for, when its
    Python is not one (its own pick stays when it is)."""
    supported = set(first.python_supported)
    for text, _ in parsed[1:]:
        try:
            supported &= set(resolve(replace(base, spec=text)).python_supported)
        except EnvlockError:
            return first  # the SPEC's own failure is reported with the shared facts
    if first.python in supported or not supported:
        return first
    python = max(supported, key=Version)
    return resolve(replace(base, spec=parsed[0][0], python=python))


def _no_fit(
    first: Resolution,
    text: str,
    major: str,
    error: NoResolution,
    base: Constraints,
    resolve: Callable[[Constraints], Resolution],
) -> NoResolution:
    """Why ``text`` has no build on ``first``'s CUDA major and Python, with the ways out:
    the SPEC's own answer alone (its CUDA), and the newest release of its project that
    has a build for CUDA ``major``."""
    spec = parse_spec(text)
    hints = []
    try:
        alone = resolve(replace(base, spec=text))
        hints.append(
            f"alone, {text} resolves to {alone.framework} {alone.version} (CUDA {alone.cuda}, "
            f"Python {alone.python}): a separate environment"
        )
    except EnvlockError:
        pass
    try:
        fits = resolve(
            replace(
                base,
                spec=spec.project if spec.project != "jax" else "jax[cuda]",
                python=first.python,
                cuda=major,
            )
        )
        name = f"jax[cuda{major}]" if fits.framework == "jax" else fits.framework
        hints.append(f"{name}=={fits.version} has a CUDA {major} build for Python {first.python}")
    except EnvlockError:
        pass
    return NoResolution(
        f"nothing fits: {first.framework} {first.version} is a CUDA {major} build on Python "
        f"{first.python}, and {text} has no build for both: "
        f"{error.message.removeprefix('nothing fits: ')}",
        hint="; or ".join(hints) or None,
    )


def spec_of(res: Resolution) -> str:
    """A SPEC that names ``res`` exactly: ``torch==2.11.0+cu128``, ``jax[cuda12]==0.11.2``."""
    if res.framework == "jax":
        return f"jax[cuda{res.cuda.split('.')[0]}]=={res.version}"
    return f"{res.framework}=={res.version}"
