"""lock(): a Resolution plus the user's pins -> the whole closure, hash-pinned."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from envlock.errors import NoResolution, PinsNeedPython, UsageError
from envlock.index.config import index_url as configured_index
from envlock.lock.conflicts import explain
from envlock.lock.uv import ResolverFailed
from envlock.lockplatform import Target
from envlock.model import CUDA_SOURCES, Lock, LockedPackage, LockInput, Resolution

if TYPE_CHECKING:
    from envlock.index.routing import Routing
    from envlock.lock import gpufacts
    from envlock.matrix import TFRelease, libraries

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
    # pip CUDA: tensorflow's and-cuda extra; torch's wheel names its CUDA wheels itself;
    # JAX's are the with-cuda extra of the plugin whose version the matrix row has
    extra = "[and-cuda]" if resolution.cuda_source == "pip" and fw not in ("torch", "jax") else ""
    head = f"{fw}{extra}=={resolution.version}"
    if fw == "jax":
        major = resolution.cuda.split(".")[0]
        plugin = f"jax-cuda{major}-plugin[with-cuda]=={resolution.version}"
        head = f"jax[cuda{major}]"
        return (head, plugin, *check_requirements(lock_input.with_requirements))
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


def python_for_pins(resolution: Resolution, needs: dict[str, str]) -> str | None:
    """The newest Python minor the release has wheels for that every pin's
    Requires-Python allows, or None."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        allowed = [SpecifierSet(spec.replace(" ", "")) for spec in needs.values()]
    except InvalidSpecifier:
        return None
    fits = [
        p
        for p in resolution.python_supported
        if all(a.contains(f"{p}.0", prereleases=True) for a in allowed)
    ]
    return max(fits, key=Version) if fits else None


def _chosen_for_pins(
    resolution: Resolution, lock_input: LockInput, err: PinsNeedPython
) -> Resolution | None:
    """Resolve again for the newest Python both the release and the pins allow,
    when the user named no Python (an explicit --python wins); the why line says
    the pins chose it. None when no Python fits."""
    from envlock.resolve import resolve

    if lock_input.constraints.python is not None:
        return None
    python = python_for_pins(resolution, err.needs)
    if python is None or python == resolution.python:
        return None
    pins = "; ".join(f"{pin} needs Python {spec}" for pin, spec in err.needs.items())
    framework = resolution.framework

    def why(release: TFRelease) -> str:
        return f": the newest that {framework} {release.version} and your pins allow ({pins})"

    try:
        return resolve(replace(lock_input.constraints, python=python), python_said=why)
    except NoResolution:
        return None


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
    indexes: Sequence[tuple[str, str]] | None = None,
) -> Lock:
    """Lock the full closure of ``resolution`` (+ the input's pins) for its target.

    ``index_url`` is the command line's value; None means the user's pip/uv
    configuration. The input's ``exclude_newer`` (a UTC instant) leaves out files
    uploaded at or after it. With ``previous`` (the lock already in DIR), every
    package keeps its locked version where it can, except the ``upgrade`` names
    (``--upgrade-package``) and what they force. When no Python was asked for
    and the pins need a newer one than resolve chose (a ``pip freeze`` made
    under a newer Python), the lock is for the newest Python the release and
    the pins both allow, and its why line says so. Raises NoResolution (exit 2)
    when the pins conflict, EnvironmentFailure (exit 3) when the index cannot be
    reached. ``indexes``: the extra indexes as given (URLs with their credentials);
    None: the ones the input records (``lock --check``); the input's routes say which
    packages come from each (envlock.index.routing).
    """
    from envlock.index.routing import from_pairs

    routing = from_pairs(
        lock_input.indexes if indexes is None else tuple(indexes), lock_input.routes
    )
    args = (resolver, index_url, offline, cache_dir, previous, upgrade, routing)
    try:
        return _lock(resolution, lock_input, *args)
    except PinsNeedPython as err:
        chosen = _chosen_for_pins(resolution, lock_input, err)
        if chosen is None:
            raise
        return _lock(chosen, lock_input, *args)


def _lock(
    resolution: Resolution,
    lock_input: LockInput,
    resolver: str,
    index_url: str | None,
    offline: bool,
    cache_dir: str | None,
    previous: Lock | None,
    upgrade: Sequence[str],
    routing: Routing,
) -> Lock:
    if resolver not in RESOLVERS:
        raise UsageError(
            f"unknown resolver {resolver!r}", hint="use --resolver uv or --resolver pip"
        )
    if routing and resolver != "uv":
        raise UsageError(
            "--route needs --resolver uv: pip merges its indexes and cannot take a package "
            "from one index only",
            hint="leave --resolver pip out (uv is the default)",
        )
    target = Target.for_lock(resolution.python, resolution.os)
    index = configured_index(index_url)
    reqs = top_requirements(resolution, lock_input)
    freed = upgrade_names(upgrade, previous, reqs)
    fw = canonicalize_name(resolution.framework)
    from envlock.matrix import libraries

    applied = library_caps(resolution, lock_input)
    caps = libraries.constraints_of(applied)
    preferences = tuple(
        (p.name, p.version)
        for p in (previous.packages if previous else ())
        if p.name != fw and p.name not in freed and _meets(p.name, p.version, caps)
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
                constraints=caps,
                routing=routing,
                only_binary=lock_input.constraints.only_binary,
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
                constraints=caps,
            )
            version = pip.pip_version()
    except ResolverFailed as e:
        if routing:
            from envlock.index.routing import not_served

            unserved = not_served(e.output, routing.routed(reqs))
            if unserved is not None:
                raise unserved from None
        capped = _cap_conflict(applied, reqs[1:], e.output)
        if capped is not None:
            raise capped from None
        raise explain(
            e.output,
            resolver=resolver,
            framework=resolution.framework,
            framework_version=resolution.version,
            user_requirements=reqs[1:],
            target=target.describe(),
            sdist_only=e.sdist_only,
            only_binary=lock_input.constraints.only_binary,
        ) from None
    fw = canonicalize_name(resolution.framework)
    got = {p.name: p.version for p in packages}
    if got.get(fw) != resolution.version:
        raise UsageError(
            f"the resolver locked {fw} {got.get(fw)!r}, not the resolved {resolution.version}",
            hint="check the index: it may not carry that release's wheels",
        )
    resolution = with_cap_notes(resolution, lock_input, applied, got)
    locked = Lock(
        resolution=resolution,
        input=lock_input,
        packages=packages,
        resolver=resolver,
        resolver_version=version,
        top_requirements=reqs,
    )
    # the build requirements' lock (a uv run) beside the wheels' file lists (range
    # requests): neither reads the other's answer; its failure is said first, as
    # when it ran first
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        built = pool.submit(_build_constraints, packages, target, index, offline, cache_dir, when)
        try:
            with_facts = with_gpu_facts(locked, index, offline=offline)
        except Exception:
            built.result()
            raise
        return replace(with_facts, build_constraints=built.result())


def _build_constraints(
    packages: Sequence[LockedPackage],
    target: Target,
    index: str,
    offline: bool,
    cache_dir: str | None,
    when: str | None,
) -> tuple[str, ...]:
    """The locked build requirements of the packages locked by an sdist (none: ())."""
    from envlock.lock import buildreqs

    sources = [p.name for p in packages if p.sdist is not None]
    if not sources:
        return ()
    if offline:
        raise UsageError(
            f"--offline: {', '.join(sources)} are locked by their source archives, whose "
            "build requirements are read from the archives themselves",
            hint="lock once without --offline, or with --only-binary to refuse source archives",
        )
    needs = buildreqs.build_requirements(packages, index)
    return buildreqs.lock_build_requirements(
        needs, target, index, cache_dir=cache_dir, exclude_newer=when, prefer=packages
    )


def with_gpu_facts(locked: Lock, index: str, *, offline: bool) -> Lock:
    """``locked`` with the CUDA facts of its closure (envlock.lock.gpufacts): the
    wheels' file lists are read unless ``offline``; files two wheels would both
    install are a NoResolution (exit 2) naming them and the ways out."""
    from envlock.lock import gpufacts
    from envlock.matrix import cudawheels, load_cuda

    rules = cudawheels.load()
    listings = None if offline else gpufacts.read_listings(locked, rules, index)
    if listings:
        clash = gpufacts.collisions(locked, listings)
        if clash:
            raise _collide(locked, clash)
    return replace(locked, gpu=gpufacts.derive(locked, rules, load_cuda(), listings))


def _collide(locked: Lock, clash: Sequence[gpufacts.Collision]) -> NoResolution:
    """The error of a closure whose wheels overwrite each other's files."""
    from envlock.lock.pylock import regenerate_command

    lines = [
        "the locked wheels install the same files with different contents: whichever "
        "installs last wins, and one package loads the other's library:",
        *(f"  {c.describe()}" for c in clash),
        "ways out:",
    ]
    res = locked.resolution
    if res.cuda_source == "pip":
        c = locked.input.constraints
        spec = c.spec.replace("[and-cuda]", "")
        system = replace(
            locked,
            input=replace(locked.input, constraints=replace(c, spec=spec, cuda_source="system")),
        )
        lines.append(
            f"  - {res.framework} on the base image's CUDA (no nvidia-* wheels of its own): "
            + regenerate_command(system, "DIR")
        )
    lines += [
        "  - a build of one framework for the other's CUDA major (pin it with --with, "
        "from an index that serves it)",
        "  - two environments: lock each framework in its own bundle",
    ]
    return NoResolution("\n".join(lines), hint="choose one of the ways out above")


def _gpu_labels(lock_input: LockInput) -> tuple[tuple[str, str], ...]:
    """(label, compute capability) of each GPU the input names: a name gpus.toml
    knows (resolve has refused an unknown one), else the capability as given."""
    out: list[tuple[str, str]] = []
    names = None
    for gpu in lock_input.constraints.gpus:
        cc = gpu.compute_capability
        if cc is None:
            if names is None:
                from envlock.matrix import load_gpus

                names = load_gpus()
            entry = names.lookup(gpu.name)
            if entry is None:
                continue
            cc = entry.compute_capability
        label = f"{gpu.name} (compute capability {cc})" if gpu.name else f"compute capability {cc}"
        out.append((label, cc))
    return tuple(out)


def library_caps(resolution: Resolution, lock_input: LockInput) -> tuple[libraries.AppliedCap, ...]:
    """The matrices/libraries.toml entries a lock for the input's GPUs must meet
    (none without --gpu, or where CUDA is not from pip's nvidia-* wheels). They
    come from the recorded constraints, so ``lock --check`` derives them again."""
    from envlock.matrix import libraries

    if resolution.cuda_source != "pip" or not lock_input.constraints.gpus:
        return ()
    gpus = _gpu_labels(lock_input)
    if not gpus:
        return ()
    return libraries.caps_for(
        libraries.load(), resolution.framework, resolution.version, resolution.and_cuda, gpus
    )


def _cap_conflict(
    applied: Sequence[libraries.AppliedCap], pins: Sequence[str], output: str
) -> NoResolution | None:
    """A pin the resolver could not meet together with a library cap: the error
    names the cap and why it is there, not the framework."""
    for a in applied:
        cap = a.cap
        if cap.cap not in output:
            continue
        for pin in pins:
            req = Requirement(pin)
            if canonicalize_name(req.name) != cap.package:
                continue
            return NoResolution(
                f"your pin {pin} conflicts with the library cap {cap.constraint} of this "
                f"lock for {', '.join(a.gpus)}: {cap.effect} (source: {', '.join(a.urls)})",
                hint=f"drop the pin on {cap.package}, or pin one the cap allows: "
                f"--with '{cap.constraint}'",
            )
    return None


def _meets(name: str, version: str, caps: Sequence[str]) -> bool:
    for cap in caps:
        req = Requirement(cap)
        if canonicalize_name(req.name) == name and not req.specifier.contains(
            version, prereleases=True
        ):
            return False
    return True


def with_cap_notes(
    resolution: Resolution,
    lock_input: LockInput,
    applied: Sequence[libraries.AppliedCap],
    locked: dict[str, str],
) -> Resolution:
    """The resolution with a why line per cap the lock met, a warning where the
    capped result is unverified, and, for a lock without --gpu whose locked
    nvidia-* version does not work on some GPUs, a warning naming them."""
    from envlock.matrix import libraries

    if resolution.cuda_source != "pip":
        return resolution
    reasons = tuple(a.reason() for a in applied)
    warnings = libraries.unverified(applied, locked)
    if not lock_input.constraints.gpus:
        from envlock.matrix import load_gpus

        warnings += libraries.warnings_without_gpu(
            libraries.load(), resolution.framework, resolution.version, locked, load_gpus()
        )
    if not reasons and not warnings:
        return resolution
    return replace(
        resolution,
        reasons=resolution.reasons + reasons,
        warnings=resolution.warnings + warnings,
        cap_reasons=reasons,
    )
