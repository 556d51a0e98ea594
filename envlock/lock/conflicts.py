"""Turn a resolver's "no solution" output into one clear message.

Both resolvers explain a failure in prose. envlock keeps that prose as detail
and puts in front of it what the user needs: which of their pins conflict,
and what the framework itself requires of those packages.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name

from envlock.errors import NoResolution, PinsNeedPython


def _wrapped(pattern: str) -> re.Pattern[str]:
    """``pattern`` with each literal space matching any run of white space.

    uv wraps its no-solution prose to a width (0.7 to 0.12 did at 80 columns, in
    the middle of a clause: "has no wheels with a matching Python\\n          ABI
    tag"); the clauses envlock reads from it must match across those breaks. Only
    for uv's patterns: pip's are anchored to its lines. No space of these patterns
    sits inside a character class.
    """
    return re.compile(pattern.replace(" ", r"\s+"))


_NAME = r"(?P<who>[A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?"
# uv: "tensorflow==2.15.1 depends on numpy>=1.23.5,<2.0.0 and ..."
# uv also writes "all versions of fakefw depend on ..." and "tensorflow>=2.15 depends on ..."
_UV_WHO = r"(?:all versions of )?" + _NAME + r"(?:(?:==|>=|<=|~=|>|<)(?P<ver>\S+?))?"
_UV_DEPENDS = _wrapped(_UV_WHO + r" depends? on (?P<req>\S+)")
# pip: "    tensorflow 2.15.1 depends on numpy<2.0.0 and >=1.23.5"
_PIP_DEPENDS = re.compile(
    r"^\s*" + _NAME + r" (?P<ver>\S+) depends on (?P<req>.+?)\s*$", re.MULTILINE
)
_NO_VERSION = _wrapped(
    r"there is no version of (?P<req>\S+)"
    r"|versions? of (?P<req2>\S+) (?:are|is) (?:unavailable|missing)"
)
_PIP_NO_MATCH = re.compile(r"No matching distribution found for (?P<req>\S+)")
# uv: "tensorrt==8.5.3.1 has no wheels with a matching Python ABI tag (e.g., `cp311`)";
# also "... Python implementation tag" / "... Python version tag", "all versions of X have"
_UV_NO_TAG = _wrapped(
    r"(?:all versions of )?(?P<req>[A-Za-z0-9][^\s`,]*) (?:has|have) no wheels with a "
    r"matching Python (?:ABI|implementation|version) tag"
)
# pip (--only-binary, --python-version, --platform): no file of the project fits the
# target's tags, so it lists no version at all: "... the requirement x==1; extra ==
# "and-cuda" (from fw[and-cuda]) (from versions: none)"
_PIP_NO_VERSIONS = re.compile(
    r"Could not find a version that satisfies the requirement (?P<req>\S+?)"
    r"(?:;[^()\n]*)?(?: \(from (?!versions)[^)\n]*\))* \(from versions: none\)"
)
# uv, which locks with --only-binary :all: like pip: "src-only==1.2 has no usable wheels",
# "all versions of src-only have no usable wheels", with the hint "Wheels are required for
# `src-only` because building from source is disabled": no wheel of it fits the target, only
# a source distribution does
_UV_NO_USABLE = _wrapped(
    r"(?:all versions of )?(?P<req>[A-Za-z0-9][^\s`,]*) (?:has|have) no usable wheels"
)
_UV_WHEELS_REQUIRED = _wrapped(
    r"Wheels are required for `(?P<name>[^`]+)` because building from source is disabled"
)
# uv: "markdown==3.11.3 depends on Python>=3.11"; pip: "Ignored the following versions
# that require a different python version: 3.11.3 Requires-Python >=3.11; ..."
_UV_NEEDS_PYTHON = _wrapped(
    r"(?P<req>[A-Za-z0-9][A-Za-z0-9._-]*(?:==|===)[^\s,]+) depends on "
    r"Python(?P<spec>[<>=!~][^\s,]*(?:,[<>=!~][^\s,]*)*)"
)
_PIP_IGNORED = re.compile(r"require a different python version: (?P<body>[^\n]+)")
_PIP_IGNORED_ONE = re.compile(r"(?P<ver>\S+) Requires-Python (?P<spec>[^;]+)")
_OTHER_PYTHON = (
    "choose another --python ('envlock resolve' lists the Pythons the release has wheels "
    "for, and with --cuda-source pip those its and-cuda extra has wheels for), "
    "or another release"
)


def _name_of(text: str) -> str | None:
    head = re.split(r"[<>=!~;\[\s(]", text.strip(), maxsplit=1)[0]
    return canonicalize_name(head) if head else None


def _clean(req: str) -> str:
    return req.rstrip(".,;:")


def _python_mismatch(output: str, pins: dict[str, str]) -> dict[str, str]:
    """{pin as the user wrote it: the Python it needs} for pins the target Python excludes."""
    found: dict[str, str] = {}
    for m in _UV_NEEDS_PYTHON.finditer(output):
        name = _name_of(m.group("req"))
        if name in pins:
            found.setdefault(pins[name], m.group("spec").rstrip(".,;:"))
    ignored: dict[str, str] = {}
    for m in _PIP_IGNORED.finditer(output):
        for one in _PIP_IGNORED_ONE.finditer(m.group("body")):
            ignored.setdefault(one.group("ver"), one.group("spec").strip())
    if ignored:
        for name, line in pins.items():
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            pinned = [s.version for s in req.specifier if s.operator in ("==", "===")]
            if name and pinned and pinned[0] in ignored:
                found.setdefault(line, ignored[pinned[0]])
    return found


def _first_minor(spec: str) -> str | None:
    """The lowest Python 3 minor that ``spec`` allows (3.8 to 3.14), if any."""
    try:
        allowed = SpecifierSet(spec.replace(" ", ""))
    except InvalidSpecifier:
        return None
    for minor in range(8, 15):
        if allowed.contains(f"3.{minor}", prereleases=True):
            return f"3.{minor}"
    return None


def pip_no_versions(output: str) -> list[str]:
    """The projects pip lists no version of ("from versions: none"), normalized, in order."""
    names = (_name_of(_clean(m.group("req"))) for m in _PIP_NO_VERSIONS.finditer(output))
    return list(dict.fromkeys(n for n in names if n))


def _source_only(output: str, sdist_only: Sequence[str]) -> tuple[list[str], list[str]]:
    """(requirements as the resolver wrote them, project names) that only an sdist serves.

    uv says so itself; for pip, ``sdist_only`` names the projects the index was found
    to hold only source distributions of for the target.
    """
    reqs = [_clean(m.group("req")) for m in _UV_NO_USABLE.finditer(output)]
    names: list[str] = [
        canonicalize_name(m.group("name")) for m in _UV_WHEELS_REQUIRED.finditer(output)
    ]
    wanted = {canonicalize_name(n) for n in sdist_only}
    for m in _PIP_NO_VERSIONS.finditer(output):
        req = _clean(m.group("req"))
        if _name_of(req) in wanted:
            reqs.append(req)
    names += [n for r in reqs if (n := _name_of(r))]
    return list(dict.fromkeys(reqs)), list(dict.fromkeys(names))


_ONE_OF = re.compile(_UV_WHO + r" depends? on one of:\s*\n(?P<body>(?:[ \t]+\S+\n)+)")
_RANGE = re.compile(r"^(?P<name>[A-Za-z0-9._-]+)(?P<lop>>=?)(?P<lo>[^,<>=\s]+),<(?P<hi>[^,\s]+)$")


def merge_one_of(reqs: list[str]) -> str:
    """uv's "one of" list of adjacent ranges as one specifier.

    ``x>=1,<2`` + ``x>2,<3`` -> ``x>=1,!=2,<3``; anything else is joined with "or".
    """
    matches = [_RANGE.match(r) for r in reqs]
    ms = [m for m in matches if m]
    if not reqs or len(ms) != len(reqs):
        return " or ".join(reqs)
    if len({canonicalize_name(m["name"]) for m in ms}) != 1:
        return " or ".join(reqs)
    parts = [f"{ms[0]['name']}{ms[0]['lop']}{ms[0]['lo']}"]
    for prev, cur in zip(ms, ms[1:], strict=False):
        if prev["hi"] != cur["lo"] or cur["lop"] != ">":
            return " or ".join(reqs)
        parts.append(f"!={cur['lo']}")
    parts.append(f"<{ms[-1]['hi']}")
    return ",".join(parts)


def framework_requires(output: str, framework: str) -> dict[str, str]:
    """{package name: requirement} that ``framework`` states in the resolver output."""
    fw = canonicalize_name(framework)
    found: dict[str, str] = {}
    for m in _ONE_OF.finditer(output):
        if canonicalize_name(m.group("who")) != fw:
            continue
        reqs = [ln.strip() for ln in m.group("body").splitlines() if ln.strip()]
        name = _name_of(reqs[0]) if reqs else None
        if name:
            found.setdefault(name, merge_one_of(reqs))
    for rx in (_UV_DEPENDS, _PIP_DEPENDS):
        for m in rx.finditer(output):
            if canonicalize_name(m.group("who")) != fw:
                continue
            req = _clean(m.group("req"))
            name = _name_of(req)
            if name:
                found.setdefault(name, re.sub(r"\s+and\s+", ",", req))
    return found


def explain(
    output: str,
    *,
    resolver: str,
    framework: str,
    framework_version: str,
    user_requirements: Sequence[str],
    target: str,
    sdist_only: Sequence[str] = (),
    only_binary: bool = True,
) -> NoResolution:
    """The NoResolution error for a resolver failure.

    ``sdist_only``: projects the index holds only source distributions of for the
    target (the pip engine looks them up; uv's output says so itself).
    ``only_binary``: the lock was asked for wheels only (``--only-binary``);
    otherwise only the pip engine refuses a source archive (uv locks it).
    """
    detail = "\n".join("    " + line for line in output.strip().splitlines() if line.strip())
    source_reqs, source_names = _source_only(output, sdist_only)
    if source_names:
        what = ", ".join(source_reqs or source_names)
        names = ", ".join(source_names)
        build = " ".join(source_names)
        why, way = (
            (
                "--only-binary locks binary wheels only",
                "lock without --only-binary (its sdist is locked and built on install), ",
            )
            if only_binary
            else (
                "the pip resolver locks binary wheels only",
                "lock with --resolver uv (its sdist is locked and built on install), ",
            )
        )
        return NoResolution(
            f"no wheel of {what} fits {target}; the index offers {names} for it only as a "
            f"source distribution (sdist), and {why}\n"
            f"  {resolver} said:\n{detail}",
            hint=f"{way}build a wheel of {names} for this target (pip wheel --no-deps "
            f"{build}) and publish it to the index, pin a version of {names} that has one "
            f"(--with), or choose another {framework} release",
        )
    pins: dict[str, str] = {}
    for line in user_requirements:
        try:
            pins[canonicalize_name(Requirement(line).name)] = line
        except InvalidRequirement:
            continue
    low = output.lower()
    mentioned = [
        n
        for n in pins
        if re.search(rf"(?<![A-Za-z0-9._-]){re.escape(n)}(?![A-Za-z0-9_-])", low.replace("_", "-"))
    ]
    fw_needs = framework_requires(output, framework)
    fw_label = f"{framework} {framework_version}"

    wrong_python = _python_mismatch(output, pins)
    if wrong_python:
        parts = [f"{line} needs Python {spec}" for line, spec in wrong_python.items()]
        names = ", ".join(n for line in wrong_python if (n := _name_of(line)))
        minors = [m for spec in wrong_python.values() if (m := _first_minor(spec))]
        newest = max(minors, key=lambda v: int(v.split(".")[1])) if minors else None
        which = f"--python {newest}" if newest else "another --python"
        return PinsNeedPython(
            f"the lock is for {target}, and your pins need another Python: "
            + "; ".join(parts)
            + f"\n  {resolver} said:\n{detail}",
            hint=f"pass {which} (a pip freeze does not record the Python it came from; "
            f"'envlock capture --venv' does), or relax the pin on {names}",
            needs=wrong_python,
        )

    missing = [_clean(m.group("req") or m.group("req2")) for m in _NO_VERSION.finditer(output)]
    missing += [_clean(m.group("req")) for m in _PIP_NO_MATCH.finditer(output)]
    missing_user = [r for r in missing if _name_of(r) in pins]
    if missing_user and not fw_needs:
        what = ", ".join(dict.fromkeys(missing_user))
        return NoResolution(
            f"no release on the index satisfies {what} for {target}\n  {resolver} said:\n{detail}",
            hint="check the name and version of the pin; only wheels count for the target",
        )

    no_tag = [_clean(m.group("req")) for m in _UV_NO_TAG.finditer(output)]
    if no_tag:
        what = ", ".join(dict.fromkeys(no_tag))
        return NoResolution(
            f"no wheel of {what} fits {target} (wrong Python tags)\n  {resolver} said:\n{detail}",
            hint=_OTHER_PYTHON,
        )
    no_versions = [
        _clean(m.group("req"))
        for m in _PIP_NO_VERSIONS.finditer(output)
        if _name_of(m.group("req")) not in pins
    ]
    if no_versions and not mentioned:
        what = ", ".join(dict.fromkeys(no_versions))
        return NoResolution(
            f"no wheel of {what} fits {target} (pip lists no version of it for this "
            f"Python and platform)\n  {resolver} said:\n{detail}",
            hint=f"its wheels may exist for other Pythons only: {_OTHER_PYTHON}",
        )

    if mentioned:
        parts = []
        for name in mentioned:
            need = fw_needs.get(name)
            if need:
                parts.append(f"you asked for {pins[name]}, but {fw_label} requires {need}")
            else:
                parts.append(
                    f"you asked for {pins[name]}, which {fw_label} and its dependencies exclude"
                )
        names = ", ".join(mentioned)
        return NoResolution(
            f"your pins conflict with {fw_label} ({names}): " + "; ".join(parts) + "\n"
            f"  {resolver} said:\n{detail}",
            hint=f"relax or drop the pin on {names}, "
            f"or choose a {framework} release that allows it",
        )
    if missing:
        what = ", ".join(dict.fromkeys(missing))
        hint = "the target needs wheels (Linux x86_64 manylinux); check the versions asked for"
        if framework == "torch" and "+cu" in framework_version:
            series = ".".join(framework_version.split(".")[:2])
            # a build envlock resolve took from PyTorch's published table (matrices/torch.toml)
            label = "+" + framework_version.split("+", 1)[1]
            hint = (
                f"torch {framework_version} is a build on PyTorch's own index, which the "
                f"configured index does not carry: give that index, --index pytorch=URL "
                f"--route '{label}=pytorch' (docs/indexes.md), or lock for a driver that runs "
                f"the configured index's build (envlock resolve torch=={series} names its "
                "CUDA and driver floor)"
            )
        return NoResolution(
            f"no release on the index satisfies {what} for {target}\n  {resolver} said:\n{detail}",
            hint=hint,
        )
    return NoResolution(
        f"no set of packages satisfies the requirements for {fw_label} on {target}\n"
        f"  {resolver} said:\n{detail}",
        hint="relax the --with / -r pins, or choose another release",
    )
