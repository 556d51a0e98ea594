"""File listings from the index's simple API in JSON form (PEP 691).

One GET per project, run concurrently through ``envlock.http``'s session
(timeouts, retries with backoff, clear exit-3 errors). Each file comes with
url, sha256 and size as the index states them.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from envlock.errors import DataError, UsageError

ACCEPT = "application/vnd.pypi.simple.v1+json"


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    sha256: str
    size: int | None
    yanked: bool


def _parse(project: str, base: str, doc: dict[str, Any]) -> list[IndexFile]:
    out: list[IndexFile] = []
    for f in doc.get("files", []):
        filename = f.get("filename")
        url = f.get("url")
        sha = (f.get("hashes") or {}).get("sha256")
        if not filename or not url or not sha:
            continue
        size = f.get("size")
        out.append(
            IndexFile(
                filename=filename,
                url=urljoin(base, url),
                sha256=sha,
                size=int(size) if isinstance(size, int) else None,
                yanked=bool(f.get("yanked")),
            )
        )
    return out


def fetch_files(
    index: str, projects: Iterable[str], workers: int = 16
) -> dict[str, list[IndexFile]]:
    """{normalized name: files} for each project, fetched concurrently."""
    from envlock import http

    if not index.startswith(("http://", "https://")):
        raise UsageError(
            f"the pip resolver needs an http(s) index with PEP 691 JSON, not {index}",
            hint="use the uv resolver (the default) for file:// indexes",
        )
    names = sorted({canonicalize_name(p) for p in projects})
    sess = http.session(http.HttpSettings(pool_size=workers))

    def one(name: str) -> tuple[str, list[IndexFile]]:
        url = f"{index}/{name}/"
        resp = http.get(sess, url, index=index, headers={"Accept": ACCEPT}, ok=(200, 404))
        if resp.status_code == 404:
            raise DataError(
                f"the index has no project {name!r}", hint="check the requirement's name"
            )
        ctype = resp.headers.get("Content-Type", "")
        if "json" not in ctype:
            raise DataError(
                f"the index at {index} did not answer with PEP 691 JSON for {name} ({ctype})",
                hint="use the uv resolver (the default), or an index that serves PEP 691 JSON",
            )
        return name, _parse(name, resp.url, resp.json())

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
