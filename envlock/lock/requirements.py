"""requirements.txt with hashes: the same closure as pylock.toml, for pip.

Each package says what pulled it in, as pip-compile and ``uv pip compile``
write it: ``# via tensorflow`` under its hashes, or a ``# via`` block with one
name a line when several did. The names come from the lock's dependency graph
(pylock.toml's PEP 751 ``dependencies``); ``SPEC`` marks the framework the lock
was made for and ``--with`` a pin the lock was given (``--with`` and ``-r``
lines alike: the regenerate line repeats them all as ``--with``).
"""

from __future__ import annotations

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from envlock.door import redact
from envlock.lock.pylock import comment, describe, driver_line, regenerate_command
from envlock.lock.sdists import source_header
from envlock.model import Lock, LockedPackage, LockedWheel

REQUIREMENTS = "requirements.txt"


def via(lock: Lock) -> dict[str, list[str]]:
    """What requires each locked package: ``SPEC`` / ``--with`` first, then names, sorted."""
    parents: dict[str, set[str]] = {p.name: set() for p in lock.packages}
    for pkg in lock.packages:
        for dep in pkg.dependencies:
            if dep in parents and dep != pkg.name:
                parents[dep].add(pkg.name)
    origins: dict[str, list[str]] = {name: [] for name in parents}
    for i, line in enumerate(lock.top_requirements):
        try:
            name = canonicalize_name(Requirement(line).name)
        except InvalidRequirement:  # the header shows it escaped; it names no package
            continue
        label = "SPEC" if i == 0 else "--with"
        if name in origins and label not in origins[name]:
            origins[name].append(label)
    return {name: origins[name] + sorted(parents[name]) for name in parents}


def _via_lines(sources: list[str]) -> list[str]:
    if not sources:
        return []
    if len(sources) == 1:
        return [f"    # via {sources[0]}"]
    return ["    # via", *(f"    #   {s}" for s in sources)]


def routed_wheel(pkg: LockedPackage) -> LockedWheel:
    """The one wheel a routed package's ``name @ URL`` line names: the first by
    file name where the target has several (a line carries one URL)."""
    return min(pkg.wheels, key=lambda w: w.filename)


def routed_lines(pkg: LockedPackage) -> list[str]:
    """A package from an extra index (``--route``) as ``name @ URL --hash``: pip
    merges its indexes, so the line names the very file that was locked, where it
    was locked from (the URL without user and password)."""
    wheel = routed_wheel(pkg)
    return [f"{pkg.name} @ {redact(wheel.url)} \\", f"    --hash=sha256:{wheel.sha256}"]


def requirements_text(lock: Lock) -> str:
    header = [
        f"Made by envlock: {describe(lock)}.",
        *([driver_line(lock)] if lock.gpu else []),
        f"Resolved with {lock.resolver} {lock.resolver_version} from: "
        + " ".join(lock.top_requirements),
    ]
    if lock.input.exclude_newer:
        header.append(f"Only files uploaded before {lock.input.exclude_newer} were considered.")
    header += source_header(lock)
    header += [
        "Every package is pinned and every file checked against its sha256.",
        "",
        *(
            ["Packages from an extra index (--route) are named by the URL they were locked from."]
            if any(p.index for p in lock.packages)
            else []
        ),
        "Install into a fresh venv (nothing else is pulled in):",
        "  pip install --require-hashes --no-deps -r requirements.txt",
        "Regenerate (in this folder):",
        f"  {regenerate_command(lock)}",
        "Check it is current:",
        "  envlock lock --check .",
    ]
    lines = [comment(line) for line in header] + [""]
    sources = via(lock)
    for pkg in sorted(lock.packages, key=lambda p: p.name):
        if pkg.index and pkg.wheels:  # routed (--route): name @ the file it was locked from
            lines += routed_lines(pkg)
            lines += _via_lines(sources[pkg.name])
            continue
        hashes = pkg.hashes  # a wheel's, or the source archive's (#41)
        lines.append(f"{pkg.name}=={pkg.version} \\")
        for i, h in enumerate(hashes):
            end = " \\" if i < len(hashes) - 1 else ""
            lines.append(f"    --hash=sha256:{h}{end}")
        lines += _via_lines(sources[pkg.name])
    return "\n".join(lines) + "\n"
