"""``envlock matrix refresh``: regenerate tensorflow.toml from the package index.

1. The project page through the simple API with JSON (PEP 691) lists every
   file with its URL, sha256, size, upload time and yanked flag.
2. Releases: every 2.x version (final, post and pre-release: release
   candidates are recorded, flagged ``prerelease``; dev-releases are not) with a
   Linux x86_64 wheel; its Python
   minors are the ``cp3X`` tags of those wheels (Python 2 wheels are left out:
   envlock targets CPython 3).
3. Facts: from ONE wheel per release (not yanked if possible, the newest
   CPython tag, then the greatest file name) read by the standard zipfile
   over HTTP range requests (``envlock.matrix.wheel_members``): the zip
   directory, ``*.dist-info/METADATA`` (Requires-Python, the
   ``and-cuda`` extra) and ``.../python/platform/build_info.py`` (CUDA, cuDNN,
   compute capabilities; parsed with ``ast``, never executed), and the CUDA and
   cuDNN headers where the wheel has them (``envlock.matrix.headers``): from
   2.22.0rc0 on build_info holds none of those facts and the headers are read
   instead (``cuda_from = "cuda_config.h"``, ``cudnn_from = "cudnn_version.h"``,
   ``compute_capabilities_from`` saying whether the header's ``sm_``/``compute_``
   split was stated or inferred). Where build_info and a header both state a fact
   (CUDA major.minor, the cuDNN major, the capability numbers) they must agree,
   or the refresh stops naming both.
4. Where the wheel says too little (2.0/2.1 have no CUDA details, 2.2 states
   CUDA "10", build_info gives only the cuDNN major before the and-cuda extra
   existed), the tested-configurations table completes it; each row records
   the source of CUDA and cuDNN.
5. The ``and-cuda`` extra's Pythons (``envlock.matrix.and_cuda``): each
   requirement's project page (PEP 691, fetched once per project across
   releases, in the same pool) gives the versions its specifier allows and
   their wheels; a minor of the release's ``python`` stays in
   ``and_cuda_python`` when every requirement that applies to it (markers
   evaluated for Linux x86_64 and that minor) has an allowed version with a
   Linux x86_64 wheel for it. ``and_cuda_python_note`` says which requirement
   removed which minor (TensorFlow 2.14's tensorrt==8.5.3.1 has no cp311
   wheel, so ``tensorflow[and-cuda]==2.14.1`` cannot be installed on 3.11).
6. Notes come from matrices/tf-notes.toml (see envlock.matrix.check).

Same index state, same bytes: rows sorted by version, ``data_version`` is the
date of the newest upload among the rows, nothing depends on the clock.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from email.parser import BytesHeaderParser
from typing import TYPE_CHECKING, Any

from packaging.requirements import Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from envlock.errors import DataError, EnvironmentFailure, UsageError
from envlock.index.pep691 import IndexFile
from envlock.lockplatform import newest_linux
from envlock.matrix import headers as headers_mod
from envlock.matrix.and_cuda import and_cuda_python, and_cuda_requirements
from envlock.matrix.build_info import parse_build_info
from envlock.matrix.tensorflow import (
    GENERATED_BY,
    SCHEMA_VERSION,
    TFMatrix,
    TFRelease,
    major_minor,
)
from envlock.matrix.tested import TestedConfig, TestedConfigs
from envlock.matrix.wheel_members import read_members

if TYPE_CHECKING:
    import requests

    from envlock.matrix.check import Note

PROJECT = "tensorflow"
DEFAULT_JOBS = 16

_CUDNN_PACKAGE = re.compile(r"^nvidia-cudnn-cu[0-9]+$")


@dataclass(frozen=True)
class Candidate:
    """A release with its Linux x86_64 wheels."""

    version: Version
    files: tuple[IndexFile, ...]
    python: tuple[str, ...]  # "3.X" minors with a wheel
    chosen: IndexFile


@dataclass(frozen=True)
class WheelFacts:
    requires_python: str
    requires_dist: tuple[str, ...]
    build_info: dict[str, Any]  # {} when the wheel has no build_info.py
    build_info_path: str
    requests: int
    bytes_read: int
    headers: headers_mod.HeaderFacts = field(default_factory=headers_mod.HeaderFacts)


@dataclass
class Stats:
    releases: int = 0
    requests: int = 0
    bytes_read: int = 0
    seconds: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, facts: WheelFacts) -> None:
        with self.lock:
            self.releases += 1
            self.requests += facts.requests
            self.bytes_read += facts.bytes_read


# -- the index page --------------------------------------------------------


def project_files(sess: requests.Session, index: str, project: str = PROJECT) -> list[IndexFile]:
    """Every file of ``project`` as the PEP 691 JSON page lists it."""
    from envlock.index import pep691

    if not index.startswith(("http://", "https://")):
        raise UsageError(
            f"envlock matrix refresh needs an http(s) index, got {index}",
            hint="pass --index-url https://your.index/simple",
        )
    files = pep691.project_files(sess, index, project)
    if files is None:
        raise UsageError(
            f"the package index at {index} has no project {project!r}",
            hint="check --index-url / pip's index-url",
        )
    return files


def _cpython3_minors(filename: str) -> tuple[str, ...]:
    """The CPython 3 minors a Linux x86_64 wheel installs on and is built for
    (its ``cp3X`` interpreter tags); () for other files."""
    try:
        tags = parse_wheel_filename(filename)[3] if filename.endswith(".whl") else ()
    except InvalidWheelFilename:
        return ()
    named = {f"3.{t.interpreter[3:]}" for t in tags if t.interpreter[:3] == "cp3"}
    minors = [m for m in named if m[2:].isdigit() and newest_linux(m).wheel_ok(filename)]
    return tuple(sorted(minors, key=Version))


def candidates(files: Iterable[IndexFile]) -> list[Candidate]:
    """2.x releases (final, post, pre) with Linux x86_64 CPython 3 wheels, sorted by
    version; dev-releases are left out."""
    by_version: dict[Version, list[tuple[IndexFile, tuple[str, ...]]]] = {}
    for f in files:
        minors = _cpython3_minors(f.filename)
        if not minors:
            continue
        version = parse_wheel_filename(f.filename)[1]
        if version.major != 2 or version.is_devrelease:
            continue
        if version.local or version.epoch:
            continue  # the matrix holds neither (envlock.matrix.tensorflow.parse refuses them)
        by_version.setdefault(version, []).append((f, minors))
    out: list[Candidate] = []
    for version in sorted(by_version):
        entries = by_version[version]
        python = sorted({m for _f, ms in entries for m in ms}, key=Version)

        def rank(entry: tuple[IndexFile, tuple[str, ...]]) -> tuple[bool, Version, str]:
            f, ms = entry
            return (not f.yanked, max(Version(m) for m in ms), f.filename)

        chosen = max(entries, key=rank)[0]
        out.append(
            Candidate(
                version=version,
                files=tuple(sorted((f for f, _ in entries), key=lambda f: f.filename)),
                python=tuple(python),
                chosen=chosen,
            )
        )
    return out


# -- reading one wheel -----------------------------------------------------


def range_fetcher(
    sess: requests.Session, url: str, index: str, size: int | None = None
) -> Callable[[int, int | None], tuple[bytes, int]]:
    """Range reads of one wheel through ``envlock.index.body.get_range`` (its retries
    and refusals); a file whose size is not the one the index lists is refused."""
    from envlock.index.body import get_range

    def fetch(start: int, end: int | None) -> tuple[bytes, int]:
        data, total = get_range(sess, url, start, end, index=index)
        if size is not None and total != size:
            raise EnvironmentFailure(
                f"the file server of {index} serves {total} bytes for {url}, "
                f"the index lists {size}",
                hint="the file changed on the server or a proxy altered it; try again",
            )
        return data, total

    return fetch


def read_wheel(sess: requests.Session, index: str, f: IndexFile) -> WheelFacts:
    """METADATA and build_info.py of one remote wheel, by range requests."""
    members = read_members(range_fetcher(sess, f.url, index, f.size), f.filename)
    build_info: dict[str, Any] = {}
    if members.build_info is not None:
        text = members.build_info.decode("utf-8", errors="replace")
        build_info = parse_build_info(text, f"{f.filename}:{members.build_info_path}")
    msg = BytesHeaderParser().parsebytes(members.metadata)
    found = headers_mod.read(
        members.headers.get("cuda_config.h"), members.headers.get("cudnn_version.h"), f.filename
    )
    return WheelFacts(
        requires_python=str(msg.get("Requires-Python", "") or "").strip(),
        requires_dist=tuple(str(v).strip() for v in msg.get_all("Requires-Dist", [])),
        build_info=build_info,
        build_info_path=members.build_info_path,
        requests=members.requests,
        bytes_read=members.bytes_read,
        headers=found,
    )


# -- facts -> row ------------------------------------------------------------


def _cudnn_from_and_cuda(and_cuda: Iterable[str]) -> str | None:
    """major.minor of the nvidia-cudnn pin's lower bound (==, ===, ~= or >=)."""
    for line in and_cuda:
        req = Requirement(line.split(";")[0])
        if not _CUDNN_PACKAGE.match(canonicalize_name(req.name)):
            continue
        for spec in sorted(req.specifier, key=str):
            if spec.operator in ("==", "===", "~=", ">="):
                try:
                    v = Version(spec.version.rstrip(".*"))
                except InvalidVersion:
                    continue
                if len(v.release) >= 2:
                    return f"{v.release[0]}.{v.release[1]}"
    return None


def _major(value: str) -> str:
    return value.split(".")[0]


def agree(where: str, bi: Mapping[str, Any], hdr: headers_mod.HeaderFacts) -> tuple[str, ...]:
    """Where build_info.py and a header both state a fact, they must say the same:
    CUDA major.minor (the major where one gives only that), the cuDNN major, the
    capability numbers. A DataError names both files and both values; else the
    facts compared ("cuda", "cudnn", "compute_capabilities")."""
    compared: list[str] = []
    info = "build_info.py"

    def differ(what: str, ours: str, path: str, theirs: str) -> DataError:
        return DataError(
            f"{where}: {info} says {what} {ours}, {path} says {theirs}",
            hint="the wheel contradicts itself; keep the shipped matrix and report it",
        )

    raw_cuda = str(bi.get("cuda_version") or "").strip()
    if raw_cuda and hdr.cuda_version:
        both = "." in raw_cuda and "." in hdr.cuda_version
        mine = major_minor(raw_cuda) if both else _major(raw_cuda)
        theirs = major_minor(hdr.cuda_version) if both else _major(hdr.cuda_version)
        if mine != theirs:
            raise differ("CUDA", raw_cuda, hdr.cuda_config_path, hdr.cuda_version)
        compared.append("cuda")
    raw_cudnn = str(bi.get("cudnn_version") or "").strip()
    stated = [
        (hdr.cuda_config_path, hdr.cudnn_major),
        (hdr.cudnn_version_path, hdr.cudnn_version),
    ]
    for path, value in stated:
        if raw_cudnn and value and _major(raw_cudnn) != _major(value):
            raise differ("cuDNN", raw_cudnn, path, value)
        if raw_cudnn and value and "cudnn" not in compared:
            compared.append("cudnn")
    if hdr.cudnn_major and hdr.cudnn_version and hdr.cudnn_major != _major(hdr.cudnn_version):
        raise DataError(
            f"{where}: {hdr.cuda_config_path} says cuDNN {hdr.cudnn_major}, "
            f"{hdr.cudnn_version_path} says {hdr.cudnn_version}",
            hint="the wheel contradicts itself; keep the shipped matrix and report it",
        )
    caps = bi.get("cuda_compute_capabilities") or []
    if caps and hdr.capabilities and isinstance(caps, list):
        mine_n = headers_mod.numbers(tuple(str(c) for c in caps))
        if mine_n != headers_mod.numbers(hdr.capabilities):
            raise differ(
                "compute capabilities",
                ", ".join(str(c) for c in caps),
                hdr.cuda_config_path,
                ", ".join(hdr.capabilities),
            )
        compared.append("compute_capabilities")
    return tuple(compared)


def make_row(cand: Candidate, facts: WheelFacts, cfg: TestedConfig | None) -> TFRelease:
    """One tensorflow.toml row from the wheel's facts, completed from the table.

    build_info.py first; what it does not state, the headers (2.22.0rc0 and later);
    what neither states, the tested-configurations table."""
    where = f"tensorflow {cand.version} ({cand.chosen.filename})"

    def need_table(what: str) -> TestedConfig:
        if cfg is None:
            raise DataError(
                f"{where}: {what}, and the tested-configurations table has no row for its series",
                hint="add the series to envlock/data/matrices/tf-tested-configs.toml from upstream",
            )
        return cfg

    bi = facts.build_info
    hdr = facts.headers
    agree(where, bi, hdr)
    cuda_build = bool(bi.get("is_cuda_build", bool(bi.get("cuda_version"))))
    and_cuda = and_cuda_requirements(facts.requires_dist, cand.python[-1])

    raw_cuda = str(bi.get("cuda_version") or "").strip()
    if raw_cuda and "." in raw_cuda:
        cuda, cuda_full, cuda_from = major_minor(raw_cuda), raw_cuda, "build_info"
    elif raw_cuda:
        table = need_table(f"build_info gives only CUDA {raw_cuda}")
        if _major(table.cuda) != raw_cuda:
            raise DataError(f"{where}: build_info says CUDA {raw_cuda}, the table {table.cuda}")
        cuda, cuda_full, cuda_from = table.cuda, raw_cuda, "build_info+tested-configs"
    elif "." in hdr.cuda_version:
        cuda, cuda_full = major_minor(hdr.cuda_version), hdr.cuda_version
        cuda_from = "cuda_config.h"
    else:
        table = need_table("the wheel states no CUDA version")
        cuda, cuda_full, cuda_from = table.cuda, table.cuda, "tested-configs"

    raw_cudnn = str(bi.get("cudnn_version") or "").strip()
    pinned = _cudnn_from_and_cuda(and_cuda)
    header_major = hdr.cudnn_major or _major(hdr.cudnn_version)
    if raw_cudnn and "." in raw_cudnn:
        cudnn, cudnn_from = major_minor(raw_cudnn), "build_info"
    elif raw_cudnn and pinned and _major(pinned) == raw_cudnn:
        cudnn, cudnn_from = pinned, "build_info+and-cuda"
    elif raw_cudnn:
        table = need_table(f"build_info gives only cuDNN {raw_cudnn}")
        if _major(table.cudnn) != raw_cudnn:
            raise DataError(
                f"{where}: build_info says cuDNN {raw_cudnn}, the table {table.cudnn}",
                hint="the minor cannot be completed; "
                "check envlock/data/matrices/tf-tested-configs.toml",
            )
        cudnn, cudnn_from = table.cudnn, "build_info+tested-configs"
    elif hdr.cudnn_version:
        cudnn, cudnn_from = major_minor(hdr.cudnn_version), "cudnn_version.h"
    elif header_major and pinned and _major(pinned) == header_major:
        cudnn, cudnn_from = pinned, "cuda_config.h+and-cuda"
    else:
        cudnn, cudnn_from = need_table("the wheel states no cuDNN version").cudnn, "tested-configs"

    caps = bi.get("cuda_compute_capabilities") or []
    if not isinstance(caps, list) or not all(isinstance(c, str) for c in caps):
        raise DataError(f"{where}: build_info's cuda_compute_capabilities is not a list of names")
    caps_from = "build_info"
    if not caps and hdr.capabilities:
        try:
            named, caps_from = headers_mod.split(hdr.capabilities)
        except DataError as e:
            raise DataError(f"{where}:{hdr.cuda_config_path}: {e.message}") from None
        caps = list(named)
    return TFRelease(
        version=cand.version,
        python=cand.python,
        requires_python=facts.requires_python,
        cuda=cuda,
        cuda_full=cuda_full,
        cuda_from=cuda_from,
        cudnn=cudnn,
        cudnn_from=cudnn_from,
        compute_capabilities=tuple(caps),
        compute_capabilities_from=caps_from,
        and_cuda=and_cuda,
        wheel=cand.chosen.filename,
        sha256=cand.chosen.sha256,
        yanked=all(f.yanked for f in cand.files),
        note="",
        cuda_build=cuda_build,
        uploaded=first_upload(cand.files),
        prerelease=cand.version.is_prerelease,
    )


def first_upload(files: Iterable[IndexFile]) -> str:
    """The earliest PEP 691 upload-time among ``files``, RFC 3339 in UTC; "" when none says.

    A release is on the index from its first Linux x86_64 wheel on: what
    ``--exclude-newer`` compares with (envlock.resolve's UploadedBefore stage).
    """
    from envlock.instant import format_utc, upload_instant

    times = [t for t in (upload_instant(f.upload_time) for f in files) if t is not None]
    return format_utc(min(times)) if times else ""


def and_cuda_projects(requires_dist: Iterable[str], python: tuple[str, ...]) -> set[str]:
    """Canonical names of the and-cuda extra's requirements, for any of ``python``."""
    names: set[str] = set()
    for minor in python:
        for line in and_cuda_requirements(requires_dist, minor):
            names.add(canonicalize_name(Requirement(line).name))
    return names


def dependency_files(sess: requests.Session, index: str, project: str) -> list[IndexFile] | None:
    """The files of an and-cuda requirement's project; None when the index has none."""
    from envlock.index import pep691

    return pep691.project_files(sess, index, project)


# -- the whole refresh ---------------------------------------------------------


def _with_and_cuda_python(row: TFRelease, pages: Mapping[str, list[IndexFile] | None]) -> TFRelease:
    if not row.and_cuda:
        return row
    minors, note = and_cuda_python(row.and_cuda, row.python, pages)
    return replace(row, and_cuda_python=minors, and_cuda_python_note=note)


@dataclass(frozen=True)
class RefreshResult:
    matrix: TFMatrix
    releases: int
    requests: int
    bytes_read: int
    seconds: float
    # release -> the facts its build_info.py and its headers both state (and agree on)
    cross_checked: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def refresh(
    index: str,
    *,
    tested: TestedConfigs,
    notes: tuple[Note, ...],
    jobs: int = DEFAULT_JOBS,
    only: Iterable[Version] | None = None,
    progress: Callable[[int, int], None] | None = None,
    http_settings: Any = None,
) -> RefreshResult:
    """Read every release's facts from the index and build the matrix.

    ``only`` limits the refresh to some releases (tests, spot checks);
    ``progress(done, total)`` is called after each release.
    """
    from envlock.index import http
    from envlock.matrix.check import apply_notes

    started = time.monotonic()
    jobs = max(1, jobs)
    settings = http_settings or http.HttpSettings.from_env(pool_size=max(jobs, 4))
    sess = http.session(settings)
    try:
        files = project_files(sess, index)
        cands = candidates(files)
        if only is not None:
            wanted = set(only)
            missing = sorted(wanted - {c.version for c in cands})
            if missing:
                raise UsageError(
                    f"no Linux x86_64 wheel on the index for tensorflow "
                    f"{', '.join(str(v) for v in missing)}",
                    hint="see 'envlock matrix show' for the known releases",
                )
            cands = [c for c in cands if c.version in wanted]
        if not cands:
            raise DataError(
                f"the package index at {index} lists no tensorflow 2.x Linux x86_64 wheels",
                hint="check --index-url / pip's index-url",
            )
        stats = Stats()
        facts: dict[Version, WheelFacts] = {}
        pages: dict[str, list[IndexFile] | None] = {}
        done = 0
        if progress:
            progress(0, len(cands))
        with ThreadPoolExecutor(max_workers=min(jobs, len(cands))) as pool:
            futures: dict[Future[Any], Candidate | str] = {
                pool.submit(read_wheel, sess, index, c.chosen): c for c in cands
            }
            asked: set[str] = set()
            pending = set(futures)
            while pending:
                finished, pending = wait(pending, return_when=FIRST_EXCEPTION)
                for fut in finished:
                    exc = fut.exception()
                    if exc is not None:
                        for other in pending:
                            other.cancel()
                        raise exc
                    what = futures[fut]
                    if isinstance(what, str):  # an and-cuda requirement's project page
                        pages[what] = fut.result()
                        continue
                    cand = what
                    facts[cand.version] = fut.result()
                    stats.add(facts[cand.version])
                    # each project page once, across releases, in the same pool
                    for name in sorted(
                        and_cuda_projects(facts[cand.version].requires_dist, cand.python) - asked
                    ):
                        asked.add(name)
                        page = pool.submit(dependency_files, sess, index, name)
                        futures[page] = name
                        pending.add(page)
                    done += 1
                    if progress:
                        progress(done, len(cands))
    finally:
        sess.close()

    rows = tuple(
        _with_and_cuda_python(make_row(c, facts[c.version], tested.for_release(c.version)), pages)
        for c in cands
    )
    newest = max(f.upload_time for c in cands for f in c.files)
    matrix = TFMatrix(
        schema_version=SCHEMA_VERSION,
        data_version=newest[:10] if newest else "1970-01-01",
        generated_by=GENERATED_BY,
        releases=rows,
    )
    matrix = apply_notes(matrix, tested, notes)
    cross_checked = {
        str(c.version): both
        for c in cands
        if (both := agree(str(c.version), facts[c.version].build_info, facts[c.version].headers))
    }
    return RefreshResult(
        cross_checked=cross_checked,
        matrix=matrix,
        releases=len(rows),
        requests=stats.requests + 1 + len(pages),
        bytes_read=stats.bytes_read,
        seconds=time.monotonic() - started,
    )


def summary(result: RefreshResult, output: str) -> Mapping[str, Any]:
    return {
        "output": output,
        "releases": result.releases,
        "data_version": result.matrix.data_version,
        "requests": result.requests,
        "bytes_read": result.bytes_read,
        "cross_checked": len(result.cross_checked),
        "seconds": round(result.seconds, 2),
    }
