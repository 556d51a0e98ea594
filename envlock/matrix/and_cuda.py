"""Which Pythons a TensorFlow release's ``and-cuda`` extra installs on.

A minor of the release's ``python`` stays when every requirement of the extra
that applies to it (markers evaluated for CPython on Linux x86_64) has an
allowed version with a Linux x86_64 wheel for it; the note says which
requirement removed which minor. Wheel tags are read through
``envlock.lockplatform`` (``packaging.tags``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from envlock.index.pep691 import IndexFile
from envlock.lockplatform import newest_linux


def wheel_python(filename: str, minors: Iterable[str]) -> set[str]:
    """The minors among ``minors`` ("3.X") a wheel installs on, on Linux x86_64.

    The tags each minor's interpreter accepts (``packaging.tags``, through
    ``envlock.lockplatform``): ``cp3X-cp3X`` / ``cp3X-none`` serve 3.X alone,
    ``cp3X-abi3`` every minor from 3.X on, ``py3`` every minor, ``py3X`` every
    minor from 3.X on; free-threaded ABIs (``cp313t``), other interpreters and
    other platforms serve none. Not a wheel (an sdist): none.
    """
    return {m for m in minors if newest_linux(m).wheel_ok(filename)}


def _cp_list(minors: Iterable[str]) -> str:
    tags = [f"cp{m.replace('.', '')}" for m in minors]
    if len(tags) <= 1:
        return "".join(tags)
    return ", ".join(tags[:-1]) + " or " + tags[-1]


def and_cuda_python(
    and_cuda: Iterable[str],
    python: tuple[str, ...],
    pages: Mapping[str, list[IndexFile] | None],
) -> tuple[tuple[str, ...], str]:
    """(minors of ``python`` every applicable and-cuda requirement has a wheel
    for, the note saying which requirement removed which minor).

    ``pages`` maps a canonical project name to its files (None: the index has
    no such project). A version counts when the requirement's specifier allows
    it (pre-releases only when the specifier names one); a yanked file only
    when the requirement pins its version with ``==`` (PEP 592).
    """
    kept = list(python)
    notes: list[str] = []
    for line in and_cuda:
        req = Requirement(line)
        label = line.split(";")[0].strip()
        applies = [
            m
            for m in python
            if req.marker is None
            or req.marker.evaluate({**newest_linux(m).marker_environment(), "extra": ""})
        ]
        if not applies:
            continue
        files = pages.get(canonicalize_name(req.name))
        pinned = any(
            s.operator in ("==", "===") and not s.version.endswith(".*") for s in req.specifier
        )
        pre = bool(req.specifier.prereleases)  # packaging 26 lets None admit them
        served: set[str] = set()
        allowed_sdist = False
        for f in files or ():
            if f.yanked and not pinned:
                continue
            if f.filename.endswith(".whl"):
                try:
                    version = parse_wheel_filename(f.filename)[1]
                except (InvalidWheelFilename, InvalidVersion):
                    continue
                if req.specifier.contains(version, prereleases=pre):
                    served |= wheel_python(f.filename, applies)
            else:
                allowed_sdist = allowed_sdist or _sdist_allowed(f.filename, req, pre)
        missing = [m for m in applies if m not in served]
        if not missing:
            continue
        kept = [m for m in kept if m not in missing]
        if files is None:
            notes.append(f"{label}: not on the index")
        elif served:
            notes.append(f"{label}: no {_cp_list(missing)} wheel")
        elif allowed_sdist:
            notes.append(f"{label}: only an sdist, no Linux x86_64 wheel")
        else:
            notes.append(f"{label}: no Linux x86_64 wheel of an allowed version")
    return tuple(kept), "; ".join(notes)


def _sdist_allowed(filename: str, req: Requirement, pre: bool) -> bool:
    """Whether an sdist (``name-version.tar.gz`` / ``.zip``) is of an allowed version."""
    for suffix in (".tar.gz", ".zip"):
        if filename.endswith(suffix):
            text = filename[: -len(suffix)].rsplit("-", 1)[-1]
            try:
                return req.specifier.contains(Version(text), prereleases=pre)
            except InvalidVersion:
                return False
    return False


_EXTRA_CLAUSE = re.compile(r"""extra\s*==\s*["']and-cuda["']""")


def and_cuda_requirements(requires_dist: Iterable[str], python: str) -> tuple[str, ...]:
    """The ``and-cuda`` extra's requirements, normalised, extra marker stripped."""
    base_env = newest_linux(python).marker_environment()
    out: list[str] = []
    for line in requires_dist:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is None:
            continue
        with_extra = req.marker.evaluate({**base_env, "extra": "and-cuda"})
        without = req.marker.evaluate({**base_env, "extra": ""})
        if not with_extra or without:
            continue
        text = f"{req.name}{'[' + ','.join(sorted(req.extras)) + ']' if req.extras else ''}"
        text += str(req.specifier)
        rest = _strip_extra(str(req.marker))
        if rest:
            text += f"; {rest}"
        out.append(text)
    return tuple(out)


def _strip_extra(marker: str) -> str:
    """``A and extra == "and-cuda"`` -> ``A``; a lone extra clause -> ``""``."""
    text = _EXTRA_CLAUSE.sub("__EXTRA__", marker)
    for pattern in (" and __EXTRA__", "__EXTRA__ and ", "__EXTRA__"):
        text = text.replace(pattern, "")
    text = text.strip()
    while text.startswith("(") and text.endswith(")"):
        text = text[1:-1].strip()
    if not text:
        return ""
    Marker(text)  # still a valid marker
    return text
