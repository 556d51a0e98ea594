"""The pip engine: ``pip install --dry-run --report`` for the target platform.

pip resolves with explicit platform tags, Python version and implementation,
wheels only, into a throw-away ``--target`` so nothing on this machine is
looked at. Its configuration files and PIP_* variables are kept out; the one
index and the CA bundle are passed explicitly. pip's report names one wheel
per package; the full list of the target's wheels, with url, size and sha256,
comes from the index's PEP 691 JSON.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envlock.errors import DataError, EnvironmentFailure, UsageError
from envlock.lock.pip_files import fetch_files, wheels_for
from envlock.lock.uv import ResolverFailed
from envlock.lockplatform import Target
from envlock.model import LockedPackage, LockedWheel

_NETWORK_HINTS = (
    "newconnectionerror",
    "failed to establish a new connection",
    "connecttimeouterror",
    "readtimeouterror",
    "max retries exceeded",
    "sslerror",
    "proxyerror",
    "connection refused",
    "temporary failure in name resolution",
)


# pip's urllib3 warns before its last try of a page; when that one fails too,
# pip skips the page without a word and reports "from versions: none".
_LAST_RETRY = re.compile(
    r"Retrying \(Retry\(total=0\b.*?\)\) after connection broken by '(?P<cause>.*)': "
    r"(?P<path>\S+)\s*$",
    re.MULTILINE,
)
_HASH_MISMATCH = "these packages do not match the hashes"
_MISMATCH_LINE = re.compile(r"^\s*(?P<req>.+?) from (?P<url>\S+)", re.MULTILINE)
_EXPECTED = re.compile(r"Expected sha256 (?P<sha>[0-9a-f]{64})")
_GOT = re.compile(r"Got\s+(?P<sha>[0-9a-f]{64})")


def _network_failure(raw: str, index: str) -> EnvironmentFailure | None:
    """A network failure in pip's whole output (its retry warnings included), or None."""
    from envlock.index.http import reason_of, unreachable

    low = raw.lower()
    gave_up = list(_LAST_RETRY.finditer(raw))
    if gave_up and "from versions: none" in low:
        last = gave_up[-1]
        cause = reason_of(last.group("cause"))
        return unreachable(
            index, f"pip gave up on {last.group('path')} after its retries ({cause})"
        )
    if "incompleteread" in low or "connection broken" in low:
        return unreachable(index, "an answer broke off in the middle (pip)")
    if any(h in _explanation(raw).lower() for h in _NETWORK_HINTS):
        return unreachable(index, "pip could not connect")
    return None


def _hash_mismatch(raw: str, index: str) -> EnvironmentFailure | None:
    """pip's HashMismatch: a downloaded file is not the one the index lists (exit 3)."""
    if _HASH_MISMATCH not in raw.lower():
        return None
    block = raw[raw.lower().index(_HASH_MISMATCH) :]
    where = _MISMATCH_LINE.search(block.split("\n", 1)[-1])
    expected, got = _EXPECTED.search(block), _GOT.search(block)
    url = where.group("url").split("#")[0].rstrip(":") if where else ""
    name = url.rsplit("/", 1)[-1] or "a file"
    detail = (
        f" (listed sha256 {expected.group('sha')}, got {got.group('sha')})"
        if expected and got
        else ""
    )
    return EnvironmentFailure(
        f"the package index at {index} served {name} with other bytes than the file it "
        f"lists{detail}; it was refused and nothing was locked",
        hint="try again; if it persists, the index or a proxy in between serves damaged or "
        "altered files: report it",
    )


def _crash(stderr: str) -> str | None:
    """The exception line of a pip traceback (on its stderr), or None."""
    if "Traceback (most recent call last)" not in stderr:
        return None
    tail = stderr[stderr.rindex("Traceback (most recent call last)") :]
    lines = [ln for ln in tail.splitlines() if ln.strip() and not ln.startswith((" ", "\t"))]
    return lines[-1].strip()[:300] if len(lines) > 1 else None


_NOISE = re.compile(
    r"^\s*(Collecting|Downloading|Using cached|Obtaining|Requirement already|Would install|"
    r"INFO:|WARNING: Retrying|\d\. |To fix this)"
)


def _explanation(text: str) -> str:
    """pip's output without the progress lines: the errors and the conflict block."""
    return "\n".join(ln for ln in text.splitlines() if ln.strip() and not _NOISE.match(ln)) + "\n"


@functools.lru_cache(maxsize=1)
def pip_version() -> str:
    try:
        out = subprocess.run(
            [sys.executable, "-m", "pip", "--version"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env=pip_env(),
        )
    except (OSError, subprocess.SubprocessError) as e:
        raise EnvironmentFailure(f"cannot run pip: {e}", hint="use --resolver uv") from e
    m = re.match(r"pip (\S+)", out.stdout)
    if out.returncode != 0 or not m:
        raise EnvironmentFailure(
            f"pip is not available to {sys.executable}",
            hint="install pip into envlock's environment, or use --resolver uv",
        )
    return m.group(1)


def pip_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PYTHONIOENCODING"] = "utf-8"
    return env


def dry_run_command(report: str, workdir: str, target: Target, index: str) -> list[str]:
    from envlock.index.http import HttpSettings, ca_bundle

    http = HttpSettings.from_env()  # ENVLOCK_HTTP_RETRIES / _TIMEOUT reach pip too

    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--dry-run",
        "--ignore-installed",
        "--no-input",
        "--report",
        report,
        "--only-binary=:all:",
        "--python-version",
        target.python,
        "--implementation",
        "cp",
        "--abi",
        target.cp,
        "--target",
        str(Path(workdir, "target")),
        "--index-url",
        index,
        "--retries",
        str(http.retries),
        "--timeout",
        f"{http.timeout[1]:g}",
        "--progress-bar",
        "off",
    ]
    for plat in target.platforms():
        cmd += ["--platform", plat]
    cert = ca_bundle()
    if isinstance(cert, str):
        cmd += ["--cert", cert]
    return cmd


def _sdist_only(index: str, text: str, target: Target) -> tuple[str, ...]:
    """The projects pip found no version of that the index offers the target only as sdists.

    pip (--only-binary) says "from versions: none" whether a project has no file
    at all or source distributions only; the index's listing tells them apart.
    Best effort: any failure to look means none is named.
    """
    from envlock.errors import EnvlockError
    from envlock.lock.conflicts import pip_no_versions

    names = pip_no_versions(text)
    if not names or not index.startswith(("http://", "https://")):
        return ()
    found = []
    for name in names:
        try:
            files = fetch_files(index, [name])[name]
        except EnvlockError:
            continue
        fits = any(f.filename.endswith(".whl") and target.wheel_ok(f.filename) for f in files)
        if not fits and any(f.filename.endswith((".tar.gz", ".zip")) for f in files):
            found.append(name)
    return tuple(found)


# pip learned --uploaded-prior-to in 26.0
UPLOADED_PRIOR_TO = Version("26.0")


def check_exclude_newer(version: str) -> None:
    """--exclude-newer with the pip resolver needs a pip that has --uploaded-prior-to."""
    try:
        ok = Version(version) >= UPLOADED_PRIOR_TO
    except InvalidVersion:
        ok = False
    if not ok:
        raise UsageError(
            f"--exclude-newer with --resolver pip needs pip {UPLOADED_PRIOR_TO} or newer "
            f"(its --uploaded-prior-to option); the pip here is {version}",
            hint=f"pip install 'pip>={UPLOADED_PRIOR_TO}' into envlock's environment, "
            "or use --resolver uv",
        )


def dependency_graph(
    install: Sequence[dict[str, Any]], target: Target
) -> dict[str, tuple[str, ...]]:
    """{name: the installed packages it requires} from pip's report: each
    Requires-Dist whose marker holds for the target (with the extras asked of it)."""
    from packaging.requirements import InvalidRequirement, Requirement

    names = {canonicalize_name((i.get("metadata") or {}).get("name", "")) for i in install}
    asked: dict[str, set[str]] = {}
    reqs: dict[str, list[Requirement]] = {}
    for item in install:
        meta = item.get("metadata") or {}
        name = canonicalize_name(meta.get("name", ""))
        asked.setdefault(name, set()).update(item.get("requested_extras") or ())
        parsed = []
        for line in meta.get("requires_dist") or ():
            try:
                parsed.append(Requirement(line))
            except InvalidRequirement:
                continue
        reqs[name] = parsed
        for r in parsed:  # an extra one package asks of another
            asked.setdefault(canonicalize_name(r.name), set()).update(r.extras)
    env = target.marker_environment()
    out: dict[str, tuple[str, ...]] = {}
    for parent, parsed in reqs.items():
        kids = set()
        for r in parsed:
            dep = canonicalize_name(r.name)
            if dep not in names or dep == parent:
                continue
            extras = [""] + sorted(asked.get(parent, ()))
            if r.marker is None or any(r.marker.evaluate({**env, "extra": e}) for e in extras):
                kids.add(dep)
        out[parent] = tuple(sorted(kids))
    return out


def compile_lock(
    requirements: Sequence[str],
    target: Target,
    index: str,
    *,
    offline: bool = False,
    exclude_newer: str | None = None,
    preferences: Sequence[tuple[str, str]] = (),
    upgrade: Sequence[str] = (),
    constraints: Sequence[str] = (),
) -> tuple[LockedPackage, ...]:
    """pip's resolution for ``target``. ``exclude_newer``: --uploaded-prior-to (pip
    26.0+). ``preferences``: an earlier lock's pins, given to pip as constraints,
    except the ``upgrade`` names. ``constraints``: more constraint lines (the
    library caps of a lock for named GPUs)."""
    if offline:
        raise UsageError(
            "--offline works with the uv resolver only (pip has no metadata cache to lock from)",
            hint="drop --resolver pip, or drop --offline",
        )
    if exclude_newer:
        check_exclude_newer(pip_version())
    freed = {canonicalize_name(n) for n in upgrade}
    with tempfile.TemporaryDirectory(prefix="envlock-pip-") as tmp:
        report = str(Path(tmp, "report.json"))
        cmd = dry_run_command(report, tmp, target, index)
        if exclude_newer:
            cmd += ["--uploaded-prior-to", exclude_newer]
        kept = [(n, v) for n, v in preferences if canonicalize_name(n) not in freed]
        if kept or constraints:
            pins = Path(tmp, "constraints.txt")
            lines = [f"{n}=={v}" for n, v in kept] + list(constraints)
            pins.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
            cmd += ["--constraint", str(pins)]
        cmd += list(requirements)
        try:
            proc = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                env=pip_env(),
                cwd=tmp,
                timeout=3600,
                check=False,
            )
        except subprocess.TimeoutExpired as e:
            raise EnvironmentFailure("pip did not finish within an hour") from e
        except OSError as e:
            raise EnvironmentFailure(f"cannot run pip: {e}") from e
        raw = (proc.stderr or "") + (proc.stdout or "")
        text = _explanation(raw)
        if proc.returncode != 0:
            low = text.lower()
            failure = _hash_mismatch(raw, index) or _network_failure(raw, index)
            if failure is not None:
                raise failure
            crash = _crash(proc.stderr or "")
            if crash is not None:  # pip reads a truncated page without noticing, then fails
                raise EnvironmentFailure(
                    f"pip crashed reading the package index at {index}: {crash}",
                    hint="a truncated or damaged answer from the index or a proxy; "
                    "run the lock again",
                )
            if (
                "resolutionimpossible" in low
                or "conflicting dependencies" in low
                or "no matching distribution" in low
                or "could not find a version" in low
            ):
                raise ResolverFailed(text, _sdist_only(index, text, target))
            if "invalid requirement" in low:
                raise UsageError(
                    f"pip rejected the input: {text.strip()}", hint="check --with / -r lines"
                )
            raise EnvironmentFailure(f"pip failed (exit {proc.returncode}): {text.strip()[-2000:]}")
        try:
            data = json.loads(Path(report).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise EnvironmentFailure(f"pip wrote no readable report: {e}") from e

    chosen: dict[str, tuple[str, str]] = {}
    name: str
    for item in data.get("install", []):
        meta = item.get("metadata", {})
        name = canonicalize_name(meta.get("name", ""))
        sha = (
            ((item.get("download_info") or {}).get("archive_info") or {})
            .get("hashes", {})
            .get("sha256", "")
        )
        chosen[name] = (str(meta.get("version")), sha.lower())
    graph = dependency_graph(data.get("install", []), target)
    files = fetch_files(index, chosen)
    out: list[LockedPackage] = []
    for name, (version, sha) in sorted(chosen.items()):
        wheels = [
            LockedWheel(filename=f.filename, url=f.url, size=f.size or 0, sha256=f.sha256)
            for f in wheels_for(files[name], version)
            if target.wheel_ok(f.filename)
        ]
        missing_size = [w.filename for w in wheels if not w.size]
        if missing_size:
            raise DataError(
                f"the index gave no size for {missing_size[0]}",
                hint="use an index that serves PEP 691 JSON v1.1 (with file sizes)",
            )
        if sha and sha not in {w.sha256 for w in wheels}:
            raise DataError(
                f"pip chose a wheel of {name} {version} (sha256 {sha}) the index does not list "
                f"for {target.describe()}",
                hint="the index changed during the run; run the lock again",
            )
        if not wheels:
            raise DataError(f"{name} {version} has no wheel for {target.describe()}")
        wheels.sort(key=lambda w: w.filename)
        out.append(
            LockedPackage(
                name=name,
                version=version,
                wheels=tuple(wheels),
                dependencies=graph.get(name, ()),
            )
        )
    return tuple(out)
