"""Before a capture of a freeze locks: the source-only pins that cannot be locked.

A freeze line with no wheel for the target is locked by its source archive
(#41). Two kinds of source archive cannot be: a stub (NVIDIA's wheel-stub
backend downloads the wheel from another index at build time) and one whose
metadata does not build here (it needs a system library: cyipopt, GDAL). The
resolver finds either only one at a time, each costing a whole resolver run
of the freeze (~700 pins); ``preflight`` finds them all first, in parallel:
each pin's build requirements (envlock's cache, else the archive, as
``envlock.lock.buildreqs`` reads them for the lock) and, for the rest, uv's
metadata of the pin alone (``uv pip compile`` of that one pin, whose
dependencies need its metadata: uv builds it once and keeps it in its cache, so
the lock's own run reads it from there; ``--no-deps`` would pin it unread).
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import Version

from envlock.bundle.left_out import LeftOut
from envlock.errors import EnvironmentFailure, SdistDoesNotBuild, UsageError
from envlock.index.pep691 import IndexFile
from envlock.lockplatform import Target
from envlock.model import LockedSdist
from envlock.venv.leftout import Commands, pin_of

_WORKERS = 4


def source_only(
    keep: Sequence[str], found: Mapping[str, Sequence[IndexFile] | None], target: Target
) -> list[tuple[str, LockedSdist]]:
    """(pin, its source archive) of each kept pin no wheel of which fits ``target``."""
    from envlock.venv.leftout import _of, _wheel_fits

    out = []
    for pin in keep:
        name, text = pin_of(pin)
        mine = [f for f in _of(found.get(name) or [], Version(text)) if not f.yanked]
        if not mine or _wheel_fits(mine, target):
            continue
        sdists = [f for f in mine if not f.filename.endswith(".whl") and f.sha256 and f.size]
        if sdists:
            f = sdists[0]
            out.append((pin, LockedSdist(f.filename, f.url, int(f.size or 0), f.sha256)))
    return out


def _metadata_builds(pin: str, target: Target, index: str) -> SdistDoesNotBuild | None:
    """uv's metadata of ``pin`` alone for ``target``: None when it builds (or needs
    nothing built), the failure when its source archive does not build here.

    uv's cache is asked first (``--offline``: milliseconds where uv built the
    metadata before, as in every capture after the first). A build whose backend
    ran and failed there is the answer: the build environment was made (from the
    cache's build requirements) and the package's own build failed, as it does
    online (a system library missing here: cyipopt, GDAL; asking again took ~0.9
    s of a capture). Any other failure there (not in the cache, a build
    requirement the cache lacks) is asked online, whose answer is the one kept."""
    from envlock.lock import uv

    with tempfile.TemporaryDirectory(prefix="envlock-sdist-check-") as tmp:
        Path(tmp, uv.REQUIREMENTS_IN).write_text(pin + "\n", encoding="utf-8")
        for offline in (True, False):
            cmd = uv.compile_command(
                uv.REQUIREMENTS_IN, "out.txt", target, index, offline=offline, only_binary=False
            )
            try:
                uv._compile(cmd, uv.uv_env(), tmp, index, offline)
                return None
            except SdistDoesNotBuild as e:
                if not offline or e.backend_ran:
                    return e
            except (UsageError, uv.ResolverFailed):
                if not offline:
                    return None  # the lock's own run says what is wrong with it
            except EnvironmentFailure:
                if not offline:
                    raise
    return None


def stub_detail(name: str) -> str:
    """Why a capture leaves out a pin whose only source archive is a stub, and the
    options that take it in (as the lock's StubSdists hint says)."""
    return (
        "the index has only a stub source archive of it (wheel-stub), whose build "
        "downloads the wheel from NVIDIA's index; add that index and route the name to "
        f"it: --index NAME=URL --route '{name}=NAME'"
    )


def preflight(
    keep: list[str],
    found: Mapping[str, Sequence[IndexFile] | None],
    target: Target,
    index: str,
    commands: Commands,
    lines: Mapping[str, str],
) -> list[LeftOut]:
    """The kept pins whose source archive is a stub or does not build here, taken
    out of ``keep`` and returned as left-out lines with their reasons."""
    from envlock.lock.buildreqs import is_stub, read_build_requirements

    pins = source_only(keep, found, target)
    if not pins:
        return []
    by_name = {pin_of(p)[0]: p for p, _ in pins}
    reqs = read_build_requirements([(pin_of(p)[0], s) for p, s in pins], index)
    left: list[LeftOut] = []
    stubs = sorted(n for n, r in reqs.items() if is_stub(r))
    for name in stubs:
        left.append(
            LeftOut(
                lines.get(name, by_name[name]),
                name,
                "other-index",
                stub_detail(name),
                None,
            )
        )
    rest = [p for p, _ in pins if pin_of(p)[0] not in stubs]
    with ThreadPoolExecutor(max_workers=min(_WORKERS, max(1, len(rest)))) as pool:
        failed = list(pool.map(lambda p: (p, _metadata_builds(p, target, index)), rest))
    for pin, err in failed:
        if err is None:
            continue
        name = canonicalize_name(err.name) if err.name else pin_of(pin)[0]
        left.append(
            LeftOut(
                lines.get(name, pin),
                name,
                "no-distribution",
                f"no wheel for this Python/platform, and its source archive does not build "
                f"here ({err.cause}); pip builds it where its build needs are",
                commands.pip_install(pin),
            )
        )
    gone = {item.name for item in left}
    keep[:] = [p for p in keep if pin_of(p)[0] not in gone]
    return left
