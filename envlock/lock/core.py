"""lock(): a Resolution plus the user's pins -> the whole closure, hash-pinned."""

from __future__ import annotations

import re
from collections.abc import Sequence

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from envlock.errors import UsageError
from envlock.index import index_url as configured_index
from envlock.lock.conflicts import explain
from envlock.lock.uv import ResolverFailed
from envlock.model import CUDA_SOURCES, Lock, LockInput, Resolution
from envlock.target import Target

RESOLVERS = ("uv", "pip")
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")


def check_requirements(lines: Sequence[str], origin: str = "--with") -> tuple[str, ...]:
    """Validate user requirement lines; return them normalized as written."""
    out: list[str] = []
    for line in lines:
        text = line.strip()
        if not text:
            continue
        try:
            req = Requirement(text)
        except InvalidRequirement as e:
            raise UsageError(
                f"{origin}: {text!r} is not a valid requirement ({e})",
                hint="write requirements like numpy==1.26.4 or 'h5py>=3.9,<3.11'",
            ) from None
        if req.url:
            raise UsageError(
                f"{origin}: {text!r} is a direct URL; a lock needs index packages with hashes",
                hint="pin a version from the index instead",
            )
        out.append(str(req))
    return tuple(out)


def top_requirements(resolution: Resolution, lock_input: LockInput) -> tuple[str, ...]:
    """What the resolver is asked for: the framework (with and-cuda for pip CUDA) + pins."""
    if resolution.cuda_source not in CUDA_SOURCES:
        raise UsageError(
            f"unknown CUDA source {resolution.cuda_source!r}",
            hint="use --cuda-source system or --cuda-source pip",
        )
    fw = canonicalize_name(resolution.framework)
    extra = "[and-cuda]" if resolution.cuda_source == "pip" else ""
    head = f"{fw}{extra}=={resolution.version}"
    pins = check_requirements(lock_input.with_requirements)
    for pin in pins:
        if canonicalize_name(Requirement(pin).name) == fw:
            raise UsageError(
                f"--with {pin}: the {fw} release comes from the resolution ({resolution.version})",
                hint=f"choose the release in SPEC instead, e.g. '{fw}=={resolution.version}'",
            )
    return (head, *pins)


def upgrade_names(
    upgrade: Sequence[str], previous: Lock | None, requirements: Sequence[str]
) -> set[str]:
    """The ``--upgrade-package`` names, normalized; each must be a package of the
    earlier lock (or of this lock's requirements): a typo is exit 2, not a no-op."""
    if not upgrade:
        return set()
    if previous is None:
        raise UsageError(
            "--upgrade-package needs the existing lock in DIR (DIR/pylock.toml)",
            hint="lock once without it: envlock lock SPEC -o DIR; then "
            "envlock lock SPEC -o DIR --upgrade-package NAME",
        )
    known = {p.name for p in previous.packages}
    known |= {canonicalize_name(Requirement(r).name) for r in requirements}
    out: set[str] = set()
    for raw in upgrade:
        if not _NAME.fullmatch(raw.strip()):
            raise UsageError(
                f"--upgrade-package {raw!r} is not a project name",
                hint="give the name only, e.g. --upgrade-package numpy",
            )
        name = canonicalize_name(raw.strip())
        if name not in known:
            raise UsageError(
                f"--upgrade-package {raw}: the lock in DIR has no package {name}",
                hint="the locked packages are listed in DIR/requirements.txt",
            )
        out.add(name)
    return out


def lock(
    resolution: Resolution,
    lock_input: LockInput,
    *,
    resolver: str = "uv",
    index_url: str | None = None,
    offline: bool = False,
    cache_dir: str | None = None,
    previous: Lock | None = None,
    upgrade: Sequence[str] = (),
) -> Lock:
    """Lock the full closure of ``resolution`` (+ the input's pins) for its target.

    ``index_url`` is the command line's value; None means the user's pip/uv
    configuration. The input's ``exclude_newer`` (a UTC instant) leaves out files
    uploaded at or after it. With ``previous`` (the lock already in DIR), every
    package keeps its locked version where it can, except the ``upgrade`` names
    (``--upgrade-package``) and what they force. Raises NoResolution (exit 2)
    when the pins conflict, EnvironmentFailure (exit 3) when the index cannot be
    reached.
    """
    if resolver not in RESOLVERS:
        raise UsageError(
            f"unknown resolver {resolver!r}", hint="use --resolver uv or --resolver pip"
        )
    target = Target.for_lock(resolution.python, resolution.os)
    index = configured_index(index_url)
    reqs = top_requirements(resolution, lock_input)
    freed = upgrade_names(upgrade, previous, reqs)
    fw = canonicalize_name(resolution.framework)
    preferences = tuple(
        (p.name, p.version)
        for p in (previous.packages if previous else ())
        if p.name != fw and p.name not in freed
    )
    when = lock_input.exclude_newer
    try:
        if resolver == "uv":
            from envlock.lock import uv

            packages = uv.compile_lock(
                reqs,
                target,
                index,
                offline=offline,
                cache_dir=cache_dir,
                exclude_newer=when,
                preferences=preferences,
                upgrade=tuple(sorted(freed)),
            )
            version = uv.uv_version()
        else:
            from envlock.lock import pip

            packages = pip.compile_lock(
                reqs,
                target,
                index,
                offline=offline,
                exclude_newer=when,
                preferences=preferences,
                upgrade=tuple(sorted(freed)),
            )
            version = pip.pip_version()
    except ResolverFailed as e:
        raise explain(
            e.output,
            resolver=resolver,
            framework=resolution.framework,
            framework_version=resolution.version,
            user_requirements=reqs[1:],
            target=target.describe(),
            sdist_only=e.sdist_only,
        ) from None
    fw = canonicalize_name(resolution.framework)
    got = {p.name: p.version for p in packages}
    if got.get(fw) != resolution.version:
        raise UsageError(
            f"the resolver locked {fw} {got.get(fw)!r}, not the resolved {resolution.version}",
            hint="check the index: it may not carry that release's wheels",
        )
    return Lock(
        resolution=resolution,
        input=lock_input,
        packages=packages,
        resolver=resolver,
        resolver_version=version,
        top_requirements=reqs,
    )
