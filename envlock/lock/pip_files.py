"""The files the pip engine locks from: every project's PEP 691 listing at once.

One page per project (read by ``envlock.index.pep691``), fetched concurrently through
one ``envlock.index.http`` session. Files the index lists without a sha256 are left
out: a lock needs the hash.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from envlock.errors import DataError, UsageError
from envlock.index.pep691 import IndexFile

__all__ = ["IndexFile", "fetch_files", "wheels_for"]


def fetch_files(
    index: str, projects: Iterable[str], workers: int = 16
) -> dict[str, list[IndexFile]]:
    """{normalized name: files} for each project, fetched concurrently."""
    from envlock.index import http, pep691

    if not index.startswith(("http://", "https://")):
        raise UsageError(
            f"the pip resolver needs an http(s) index with PEP 691 JSON, not {index}",
            hint="use the uv resolver (the default) for file:// indexes",
        )
    names = sorted({canonicalize_name(p) for p in projects})
    sess = http.session(http.HttpSettings.from_env(pool_size=workers))

    def one(name: str) -> tuple[str, list[IndexFile]]:
        files = pep691.project_files(
            sess,
            index,
            name,
            hint="use the uv resolver (the default), or an index that serves PEP 691 JSON",
        )
        if files is None:
            raise DataError(
                f"the index has no project {name!r}", hint="check the requirement's name"
            )
        return name, [f for f in files if f.sha256]

    try:
        with ThreadPoolExecutor(max_workers=min(workers, max(1, len(names)))) as pool:
            return dict(pool.map(one, names))
    finally:
        sess.close()


def wheels_for(files: list[IndexFile], version: str) -> list[IndexFile]:
    """The wheels of exactly ``version`` among ``files``."""
    want = Version(version)
    out = []
    for f in files:
        if not f.filename.endswith(".whl"):
            continue
        try:
            _, ver, _, _ = parse_wheel_filename(f.filename)
        except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
            continue
        if ver == want:
            out.append(f)
    return out
