"""The uv engine: ``uv pip compile`` for the target, in pylock.toml form.

uv resolves for the target platform (``--python-platform``, ``--python-version``,
wheels only) against exactly one index: the one envlock was given. Its own
configuration files and the UV_* index variables of this machine are kept
out, so the lock depends only on the input and the index. uv's pylock output
carries url, size and sha256 of every file as the index listed them; envlock
keeps the wheels whose tags fit the target.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from envlock.door import redact
from envlock.errors import DataError, EnvironmentFailure, SdistDoesNotBuild, UsageError
from envlock.lockplatform import Target
from envlock.model import LockedPackage, LockedWheel

if TYPE_CHECKING:
    from envlock.index.routing import ExtraIndex, Routing

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

# Variables that would add indexes, find-links or config behind envlock's back.
_UV_STRIP = (
    "UV_INDEX",
    "UV_INDEX_URL",
    "UV_DEFAULT_INDEX",
    "UV_EXTRA_INDEX_URL",
    "UV_FIND_LINKS",
    "UV_CONFIG_FILE",
    "UV_NO_INDEX",
    "UV_INDEX_STRATEGY",
    "UV_OFFLINE",
    "UV_PYTHON",
    "UV_CONSTRAINT",
    "UV_OVERRIDE",
    "UV_BUILD_CONSTRAINT",
    "UV_EXCLUDE_NEWER",
    "UV_NO_BINARY",
    "UV_NO_BUILD",
    "UV_PRERELEASE",
    "UV_RESOLUTION",
)

_NETWORK_HINTS = (
    "failed to fetch",
    "request failed after",
    "error sending request",
    "connection refused",
    "tcp connect error",
    "dns error",
    "timed out",
    "operation timed out",
    "invalid peer certificate",
    "unknownissuer",
    "network is unreachable",
    "could not connect",
)


_UV_BIN_LOCK = threading.Lock()

# The uv releases envlock is tested with: pyproject.toml requires the same (a test
# holds the two equal), and tests/test_uv_range.py runs the resolver-output parser
# (envlock/lock/conflicts.py) against the real output of the oldest of them and of
# the one installed. Older ones are not tested (uv 0.5 and 0.6 reject options
# envlock passes: 0.5 has no x86_64-manylinux_2_35 platform).
TESTED_UV = ">=0.11,<0.14"


def uv_bin() -> str:
    """The uv binary, refused (exit 3) when older than TESTED_UV; one caller at a time.

    ``envlock lock`` asks for it from two threads at once (the resolver and the
    prewarm thread), and uv's finder calls sysconfig, whose first use is not
    thread-safe on Python 3.11: a second thread can see a half-filled config and
    get None for EXE (a TypeError inside uv's finder). A uv newer than the range
    is used: an error envlock cannot read is shown in uv's own words, whole.
    """
    with _UV_BIN_LOCK:
        path = _find_uv_bin()
        _check_uv_release(_version_of(path))
        return path


def _check_uv_release(version: str) -> None:
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        older = Version(version) < min(Version(s.version) for s in SpecifierSet(TESTED_UV))
    except InvalidVersion:
        return
    if older:
        raise EnvironmentFailure(
            f"uv {version} is older than the releases envlock works with (uv{TESTED_UV})",
            hint=f"pip install 'uv{TESTED_UV}' in envlock's environment, or pass --resolver pip",
        )


@functools.lru_cache(maxsize=1)
def _find_uv_bin() -> str:
    try:
        from uv import find_uv_bin
    except ImportError as e:
        raise EnvironmentFailure(
            "the uv resolver is not installed", hint="pip install uv, or pass --resolver pip"
        ) from e
    try:
        return str(find_uv_bin())
    except FileNotFoundError as e:
        raise EnvironmentFailure(
            "the uv package is installed but its binary is missing",
            hint="reinstall uv, or pass --resolver pip",
        ) from e


def uv_version() -> str:
    """The version of the uv envlock runs (uv_bin's)."""
    with _UV_BIN_LOCK:
        return _version_of(_find_uv_bin())


@functools.lru_cache(maxsize=4)
def _version_of(path: str) -> str:
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=30, check=True
        )
    except (OSError, subprocess.SubprocessError) as e:
        raise EnvironmentFailure(f"cannot run uv: {e}", hint="reinstall uv") from e
    m = re.search(r"uv (\S+)", out.stdout)
    if not m:
        raise EnvironmentFailure(f"unexpected output from uv --version: {out.stdout.strip()!r}")
    return m.group(1)


def uv_env(cache_dir: str | None = None) -> dict[str, str]:
    """uv's environment: this one without _UV_STRIP, and envlock's HTTP settings
    where the user set them (ENVLOCK_HTTP_TIMEOUT -> UV_HTTP_TIMEOUT, whole
    seconds; ENVLOCK_HTTP_RETRIES -> UV_HTTP_RETRIES), so one setting rules every
    request of a lock."""
    import math

    from envlock.index.http import HttpSettings

    env = {k: v for k, v in os.environ.items() if k not in _UV_STRIP}
    # the system CA store (an intercepting proxy's CA is there), by uv's current
    # name: UV_NATIVE_TLS, the old one a user may still set, makes uv print a
    # deprecation warning into every message envlock shows
    native = env.pop("UV_NATIVE_TLS", None)
    env.setdefault("UV_SYSTEM_CERTS", "1" if native is None else native)
    env["NO_COLOR"] = "1"
    env["UV_NO_PROGRESS"] = "1"
    # A lock is for a target Python given by --python-version: no interpreter of
    # that version is needed (sdist metadata is built by envlock's own), and without this
    # uv tries to download one (seconds of retries where nothing can be reached).
    # restore names its interpreter itself.
    env["UV_PYTHON_DOWNLOADS"] = "never"
    http = HttpSettings.from_env()  # a bad value is exit 2 here, before uv runs
    if os.environ.get("ENVLOCK_HTTP_TIMEOUT"):
        env["UV_HTTP_TIMEOUT"] = str(max(1, math.ceil(http.timeout[1])))
    if os.environ.get("ENVLOCK_HTTP_RETRIES"):
        env["UV_HTTP_RETRIES"] = str(http.retries)
    if cache_dir:
        env["UV_CACHE_DIR"] = cache_dir
    return env


def compile_command(
    requirements_file: str,
    output: str,
    target: Target,
    index: str,
    *,
    offline: bool,
    exclude_newer: str | None = None,
    upgrade: Sequence[str] = (),
    constraints: str | None = None,
    only_binary: bool = True,
) -> list[str]:
    """``uv pip compile`` for the target (wheels only with ``only_binary``).

    ``output`` ending in ``.toml`` is the pylock form with hashes; otherwise
    requirements.txt with one-line ``# via`` annotations (the dependency graph).
    ``exclude_newer``: an RFC 3339 UTC instant, given as the flag
    (UV_EXCLUDE_NEWER stays stripped). ``upgrade``: ``--upgrade-package`` names;
    the pins already in ``output`` are uv's preferences for every other package.
    The target is ``--python-version`` and ``--python-platform``; ``--python``
    (this interpreter) only spares uv its interpreter search."""
    cmd = [
        uv_bin(),
        "pip",
        "compile",
        "--no-config",
        "--quiet",
        "--default-index",
        index,
        "--python-version",
        target.python,
        "--python-platform",
        target.uv_platform,
        # uv needs an interpreter only to build a source distribution's metadata
        # (an sdist without static metadata): naming envlock's own spares uv a
        # search of PATH in every run (a pyenv shim on PATH costs ~0.1 s a query)
        "--python",
        sys.executable,
        "--no-header",
    ]
    if only_binary:
        cmd += ["--only-binary", ":all:"]
    if output.endswith(".toml"):
        cmd.append("--generate-hashes")
    else:
        cmd += ["--annotation-style", "line"]
    if exclude_newer:
        cmd += ["--exclude-newer", exclude_newer]
    for name in upgrade:
        cmd += ["--upgrade-package", name]
    if constraints:
        cmd += ["--constraint", constraints]
    cmd += ["-o", output, requirements_file]
    if offline:
        cmd.insert(4, "--offline")
    return cmd


def _run(cmd: list[str], env: dict[str, str], cwd: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=1800, check=False
        )
    except subprocess.TimeoutExpired as e:
        raise EnvironmentFailure(
            "uv did not finish within 30 minutes", hint="check the network and the index"
        ) from e
    except OSError as e:
        raise EnvironmentFailure(f"cannot run uv: {e}", hint="reinstall uv") from e


class ResolverFailed(Exception):
    """The resolver ran and found no solution; ``output`` is its explanation.

    ``sdist_only``: projects found to have only source distributions for the target.
    """

    def __init__(self, output: str, sdist_only: tuple[str, ...] = ()) -> None:
        super().__init__(output)
        self.output = output
        self.sdist_only = sdist_only


def _network_error(text: str, index: str, offline: bool) -> EnvironmentFailure | None:
    low = text.lower()
    if offline and (
        "network was disabled" in low
        or "not found in the cache" in low
        or "no version of" in low
        or "offline" in low
    ):
        return EnvironmentFailure(
            "--offline: uv's cache lacks metadata needed for this lock",
            hint="run the same command once without --offline to fill the cache "
            "(UV_CACHE_DIR selects the cache)",
        )
    if any(h in low for h in _NETWORK_HINTS):
        causes = [ln.strip().removeprefix("cause:").strip() for ln in text.splitlines()]
        causes = [c for c in causes if c]
        reason = causes[-1] if causes else "unknown error"
        return EnvironmentFailure(
            f"cannot reach the package index at {index}: {reason}",
            hint="check the network, proxy and CA settings, or pass --index-url "
            "(pip's index-url and PIP_INDEX_URL are honoured)",
        )
    return None


REQUIREMENTS_IN = "requirements.in"


_BUILD_FAILED = re.compile(r"Failed to (?:download and )?build `([A-Za-z0-9._-]+)==([^`\s]+)`")
# uv's cause line when the backend's hook ran and failed (its build frontend's
# error, as uv 0.13.9 prints it); a uv that words it otherwise is asked online
_BACKEND = "The build backend returned an error"
_ERROR_LINE = re.compile(r"^\s*(?:[A-Za-z_.]*(?:Error|Exception)|error):\s*(?P<said>\S.*)$")


def _build_cause(text: str) -> str:
    """What a failed sdist build said last: its last exception or error line, else
    uv's first ``cause:`` line (one line, at most 300 characters)."""
    lines = [m.group(0).strip() for ln in text.splitlines() if (m := _ERROR_LINE.match(ln))]
    lines = [ln for ln in lines if not ln.startswith("error: Failed to")]
    if not lines:
        lines = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("cause:")]
    return (lines[-1] if lines else "the build failed")[:300]


def _compile(
    cmd: list[str],
    env: dict[str, str],
    tmp: str,
    index: str,
    offline: bool,
    extra: Sequence[str] = (),
) -> None:
    """Run one ``uv pip compile``; its failures as envlock errors (``extra``: the
    URLs of the extra indexes, so a failure to reach one names it)."""
    proc = _run([*cmd[:3], "--system-certs", *cmd[3:]], env, tmp)
    if proc.returncode == 2 and "--system-certs" in proc.stderr:
        # older uv: the flag was called --native-tls
        proc = _run([*cmd[:3], "--native-tls", *cmd[3:]], env, tmp)
    text = (proc.stderr or "") + (proc.stdout or "")
    if proc.returncode != 0:
        named = next((url for url in extra if url.rstrip("/") in text), index)
        net = _network_error(text, named, offline)
        if net and named != index:  # an extra index: --index gave it
            raise EnvironmentFailure(
                f"{net.message} (an extra index, from --index)",
                hint="check the network and the --index URL; routed packages come from that "
                "index only",
            )
        if net:
            raise net
        built = _BUILD_FAILED.search(text)
        if built:
            raise SdistDoesNotBuild(
                built.group(1), built.group(2), _build_cause(text), backend_ran=_BACKEND in text
            )
        if "no solution found" in text.lower() or "unsatisfiable" in text.lower():
            raise ResolverFailed(text)
        if proc.returncode == 2:
            raise UsageError(
                f"uv rejected the input: {text.strip()}", hint="check --with / -r lines"
            )
        raise EnvironmentFailure(f"uv failed (exit {proc.returncode}): {text.strip()}")


_PIN = re.compile(
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>\S+)(?:\s+#\s*via\s+(?P<via>.*))?$"
)


def parse_annotated(text: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    """uv's requirements.txt with line annotations -> {name: (version, parents)}.

    ``parents`` are the normalized names after ``# via``; uv's ``-r FILE`` and
    ``-c FILE`` entries (the input itself) are left out.
    """
    out: dict[str, tuple[str, tuple[str, ...]]] = {}
    for line in text.splitlines():
        m = _PIN.match(line.strip())
        if not m:
            continue
        via = [v.strip() for v in (m.group("via") or "").split(",")]
        parents = sorted({canonicalize_name(v) for v in via if v and not v.startswith("-")})
        out[canonicalize_name(m.group("name"))] = (m.group("version"), tuple(parents))
    return out


def dependencies_of(graph: dict[str, tuple[str, tuple[str, ...]]]) -> dict[str, tuple[str, ...]]:
    """{name: parents} turned round: {name: the locked packages it requires, sorted}."""
    children: dict[str, set[str]] = {name: set() for name in graph}
    for name, (_version, parents) in graph.items():
        for parent in parents:
            if parent in children:
                children[parent].add(name)
    return {name: tuple(sorted(kids)) for name, kids in children.items()}


def compile_lock(
    requirements: Sequence[str],
    target: Target,
    index: str,
    *,
    offline: bool = False,
    cache_dir: str | None = None,
    exclude_newer: str | None = None,
    preferences: Sequence[tuple[str, str]] = (),
    upgrade: Sequence[str] = (),
    constraints: Sequence[str] = (),
    routing: Routing | None = None,
    only_binary: bool = True,
) -> tuple[LockedPackage, ...]:
    """Resolve ``requirements`` for ``target``; raise ResolverFailed on no solution.

    ``routing`` (extra indexes and routes, envlock.index.routing): the input is a
    pyproject.toml whose ``[[tool.uv.index]]`` tables are explicit and whose
    ``[tool.uv.sources]`` send each routed project to its index (``_routed_input``);
    every routed package is marked with its index. ``only_binary``: wheels only
    (``--only-binary :all:``); without it a package with no wheel for the target is
    locked by its source archive (``LockedPackage.sdist``).

    ``constraints``: requirement lines given to uv as ``--constraint`` (the
    library caps of a lock for named GPUs, envlock.matrix.libraries).

    One resolution over the network and one read of uv's cache. uv writes the
    dependency graph (``# via``) only in requirements.txt form and url and size
    of the files only in pylock.toml form, so ``uv pip compile`` runs twice:
    the first run resolves and writes requirements.txt with ``# via``
    annotations (the versions and the graph; with ``preferences``, the earlier
    lock's pins are already in that file, the way uv and pip-compile keep an
    existing output file, and ``upgrade`` names the packages freed from them);
    the second writes pylock.toml (url, size and sha256 of every file) for
    exactly those versions, given as constraints, ``--offline``: every index
    page it needs is in uv's cache from the first run, so it asks the index
    nothing (the index's pages are revalidated on every online run, and
    the second run would cost as much as the first). Where that cache is not
    kept (UV_NO_CACHE), the second run goes to the index.
    """
    env = uv_env(cache_dir)
    routed = routing.routed(requirements) if routing else {}
    extra = [i.url for i in routing.indexes] if routing else []
    with tempfile.TemporaryDirectory(prefix="envlock-uv-") as tmp:
        source = REQUIREMENTS_IN
        if routing:
            source = _routed_input(Path(tmp), requirements, routed)
        else:
            req = Path(tmp, REQUIREMENTS_IN)
            req.write_text("".join(r + "\n" for r in requirements), encoding="utf-8")
        annotated = Path(tmp, "requirements.txt")
        if preferences:
            annotated.write_text(
                "".join(f"{name}=={version}\n" for name, version in preferences), encoding="utf-8"
            )
        capped = None
        if constraints:
            capped = Path(tmp, "caps.txt")
            capped.write_text("".join(c + "\n" for c in constraints), encoding="utf-8")
        cmd = compile_command(
            source,
            annotated.name,
            target,
            index,
            offline=offline,
            exclude_newer=exclude_newer,
            upgrade=upgrade,
            constraints=capped.name if capped else None,
            only_binary=only_binary,
        )

        def resolved() -> dict[str, tuple[str, tuple[str, ...]]]:
            _compile(cmd, env, tmp, index, offline, extra)
            return parse_annotated(annotated.read_text(encoding="utf-8"))

        graph = resolved()
        direct = {canonicalize_name(Requirement(r).name) for r in requirements}
        indirect = sorted(n for n in routed if n in graph and n not in direct)
        if indirect:
            # uv honours sources for direct requirements only: a routed package the
            # closure pulls in is made one (it is in the closure already) and resolved again
            requirements = (*requirements, *indirect)
            _routed_input(Path(tmp), requirements, routed)
            graph = resolved()
        pins = Path(tmp, "pins.txt")
        pins.write_text(
            "".join(f"{name}=={version}\n" for name, (version, _) in sorted(graph.items())),
            encoding="utf-8",
        )
        out = str(Path(tmp, "pylock.toml"))

        def pylock_pass(from_cache: bool) -> None:
            cmd = compile_command(
                source,
                out,
                target,
                index,
                offline=from_cache,
                exclude_newer=exclude_newer,
                constraints=pins.name,
                only_binary=only_binary,
            )
            _compile(cmd, env, tmp, index, from_cache, extra)

        try:
            pylock_pass(from_cache=True)
        except (EnvironmentFailure, ResolverFailed):
            if offline:
                raise
            pylock_pass(from_cache=False)
        try:
            data = tomllib.loads(Path(out).read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise EnvironmentFailure(f"uv wrote no readable pylock.toml: {e}") from e
    packages = packages_from_pylock(data, target)
    deps = dependencies_of(graph)
    kept = {p.name for p in packages}
    return tuple(
        replace(
            p,
            dependencies=tuple(d for d in deps.get(p.name, ()) if d in kept),
            index=redact(routed[p.name].url) if p.name in routed else None,
        )
        for p in packages
    )


ROUTED_INPUT = "pyproject.toml"


def _routed_input(tmp: Path, requirements: Sequence[str], routed: Mapping[str, ExtraIndex]) -> str:
    """The resolver's input when packages are routed: a pyproject.toml whose
    dependencies are ``requirements``, with every extra index explicit (looked up
    only for the projects routed to it) and each routed project sent to its index
    (uv's ``[tool.uv.sources]``). Returns its file name."""
    import tomli_w

    used = {i.name: i for i in routed.values()}
    doc = {
        "project": {"name": "envlock-lock", "version": "0", "dependencies": list(requirements)},
        "tool": {
            "uv": {
                "index": [
                    {"name": i.name, "url": i.url, "explicit": True}
                    for i in sorted(used.values(), key=lambda i: i.name)
                ],
                "sources": {name: {"index": i.name} for name, i in sorted(routed.items())},
            }
        },
    }
    Path(tmp, ROUTED_INPUT).write_text(tomli_w.dumps(doc), encoding="utf-8")
    return ROUTED_INPUT


def _filename(url: str) -> str:
    return unquote(urlsplit(url).path.rsplit("/", 1)[-1])


def packages_from_pylock(data: dict[str, Any], target: Target) -> tuple[LockedPackage, ...]:
    """The target's wheels from a pylock document written by a resolver."""
    out: list[LockedPackage] = []
    for i, pkg in enumerate(data.get("packages", [])):
        where = f"resolver pylock.toml: packages[{i}]"
        try:
            name = canonicalize_name(pkg["name"])
            version = str(pkg["version"])
        except KeyError as e:
            raise DataError(f"{where}: missing {e}") from None
        if not target.marker_ok(pkg.get("marker")):
            continue
        wheels: list[LockedWheel] = []
        for w in pkg.get("wheels", []):
            url = w.get("url")
            sha = (w.get("hashes") or {}).get("sha256")
            size = w.get("size")
            if not url or not sha:
                raise DataError(f"{where} ({name}): a wheel without url or sha256")
            filename = w.get("name") or _filename(url)
            if not target.wheel_ok(filename):
                continue
            if size is None:
                raise DataError(
                    f"{where} ({name}): the index gave no size for {filename}",
                    hint="use an index that serves PEP 691 JSON with file sizes",
                )
            wheels.append(LockedWheel(filename=filename, url=url, size=int(size), sha256=sha))
        sdist = None
        if not wheels and pkg.get("sdist") is not None:
            from envlock.lock.sdists import sdist_from_resolver

            sdist = sdist_from_resolver(pkg["sdist"], name, version, where)
        if not wheels and sdist is None:
            raise DataError(
                f"{name} {version} has no wheel for {target.describe()}",
                hint="pin another version of it with --with",
            )
        wheels.sort(key=lambda w: w.filename)
        out.append(LockedPackage(name=name, version=version, wheels=tuple(wheels), sdist=sdist))
    out.sort(key=lambda p: p.name)
    return tuple(out)
