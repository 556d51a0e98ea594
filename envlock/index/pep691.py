"""One reader of the index's simple API in JSON form (PEP 691).

``project_files(sess, index, project)`` asks for one project's page with
``Accept: application/vnd.pypi.simple.v1+json`` through ``envlock.index.http`` (its
timeouts, retries and exit-3 network errors), and returns every file with
url (made absolute against the page's own URL), sha256, size, upload time,
yanked flag and Requires-Python, as the index states them.

Every failure becomes an EnvlockError here, in one wording: the network
(through ``envlock.index.http``, exit 3), a page that is not PEP 691 JSON (bad
input, exit 2: the index URL is the user's; the caller may give the hint), a
JSON page without a file list (a broken index or proxy, exit 3). A project the
index does not have is an answer, not a failure (``None``): what it means
depends on the command.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload
from urllib.parse import urljoin

from envlock.errors import EnvironmentFailure, UsageError

if TYPE_CHECKING:
    import requests

ACCEPT = "application/vnd.pypi.simple.v1+json"
NOT_JSON_HINT = f"use an index that serves {ACCEPT}"


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    sha256: str  # lower-case hex; "" when the index states none
    size: int | None
    upload_time: str  # "" when the index states none
    yanked: bool
    requires_python: str = ""  # the file's Requires-Python as the index states it; "" when none


def decode_json(body: bytes) -> Any:
    """A PEP 691 page's JSON (UTF-8, RFC 8259), by orjson where it is installed,
    else by the standard library's json, made to read as orjson does (no NaN; an
    integer past 64 bits a float); a body that is not JSON is ValueError either
    way (orjson's error is one).

    A capture reads ~720 pages, ~160 MB of JSON, on the one core Python's
    threads share: json took about a third of that reading's CPU, orjson half
    as long (BENCHMARKS.md, #41). envlock depends on orjson; the fallback is for
    envlock run from its source tree where orjson is not installed (the GPU
    machines' Python), and a test checks both give the same values."""
    global _LOADS
    if _LOADS is None:
        try:
            import orjson

            _LOADS = orjson.loads
        except ImportError:
            import functools
            import json

            _LOADS = functools.partial(json.loads, parse_constant=_not_json, parse_int=_int64)
    return _LOADS(body)


def _not_json(token: str) -> Any:
    """NaN and Infinity: json reads them, JSON (and orjson) has none."""
    raise ValueError(f"{token} is not JSON")


def _int64(text: str) -> int | float:
    """An integer as orjson reads one: an int within 64 bits, a float past them."""
    value = int(text)
    return value if -(2**63) <= value < 2**64 else float(text)


_LOADS: Callable[[bytes], Any] | None = None


def page_url(index: str, project: str) -> str:
    return f"{index.rstrip('/')}/{project}/"


def project_files(
    sess: requests.Session, index: str, project: str, *, hint: str = NOT_JSON_HINT
) -> list[IndexFile] | None:
    """Every file of ``project`` on its PEP 691 page; None when the index has no such project.

    ``hint`` goes with the error for an index that does not answer in PEP 691 JSON.
    """
    page = project_page(sess, index, project, hint=hint)
    return None if page is None else list(page)


def project_page(
    sess: requests.Session, index: str, project: str, *, hint: str = NOT_JSON_HINT
) -> LazyFiles | None:
    """``project_files``, read as lazily as it is used (``LazyFiles``)."""
    from envlock.index import http

    page = page_url(index, project)
    resp = http.get(sess, page, index=index, headers={"Accept": ACCEPT}, ok=(200, 404))
    if resp.status_code == 404:
        resp.close()
        return None
    ctype = resp.headers.get("Content-Type", "").split(";")[0].strip()
    if ctype != ACCEPT:
        resp.close()
        raise UsageError(
            f"the package index at {index} does not answer the JSON simple API (PEP 691); "
            f"it sent {ctype or 'no content type'} for {project}",
            hint=hint,
        )
    try:
        entries = decode_json(resp.content)["files"]
        if not isinstance(entries, list):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        raise EnvironmentFailure(
            f"the package index at {index} sent a broken project page for {project}",
            hint="try again; if it persists, the index or a proxy is at fault",
        ) from None
    return LazyFiles(entries, resp.url or page)


class LazyFiles(Sequence[IndexFile]):
    """A PEP 691 page's files (``parse_files`` of its entries), made into
    ``IndexFile`` objects only when they are used: every one on the first
    ``len``, index or iteration, or, through ``select``, only those whose file
    name gives a key (a capture asks ~720 pages for one version each; making
    all ~370,000 files took half the time of reading the pages)."""

    def __init__(self, entries: list[Any], base: str) -> None:
        self._entries = entries
        self._base = base
        self._all: list[IndexFile] | None = None
        self._groups: dict[Any, tuple[Callable[[str], Any], dict[Any, list[Any]]]] = {}
        self._selected: dict[tuple[Any, Any], list[IndexFile]] = {}

    def _files(self) -> list[IndexFile]:
        if self._all is None:
            self._all = parse_files(self._entries, self._base)
        return self._all

    def __len__(self) -> int:
        return len(self._files())

    def __bool__(self) -> bool:
        return any(_usable(e) for e in self._entries)

    @overload
    def __getitem__(self, i: int) -> IndexFile: ...
    @overload
    def __getitem__(self, i: slice) -> list[IndexFile]: ...
    def __getitem__(self, i: int | slice) -> IndexFile | list[IndexFile]:
        return self._files()[i]

    def __iter__(self) -> Iterator[IndexFile]:
        return iter(self._files())

    def select(self, key: Callable[[str], Any], value: Any) -> list[IndexFile]:
        """The files (in page order) whose ``key(filename)`` is ``value``: what
        ``[f for f in self if key(f.filename) == value]`` gives, the entries grouped
        by ``key`` once and only the group asked for made into files."""
        found = self._groups.get(id(key))
        if found is None or found[0] is not key:
            groups: dict[Any, list[Any]] = {}
            for e in self._entries:
                if isinstance(e, dict) and e.get("filename") and e.get("url"):  # _usable
                    groups.setdefault(key(str(e["filename"])), []).append(e)
            found = self._groups[id(key)] = (key, groups)
        cached = self._selected.get((id(key), value))
        if cached is None:
            cached = parse_files(found[1].get(value, []), self._base)
            self._selected[(id(key), value)] = cached
        return list(cached)


def _usable(e: Any) -> bool:
    """An entry ``parse_files`` makes a file of: a mapping with a file name and a URL."""
    return isinstance(e, dict) and bool(e.get("filename")) and bool(e.get("url"))


_PLAIN_ABSOLUTE = re.compile(r"https?://[^/?#;\[\]\\\s\x00-\x1f\x7f]+/[^?#;\[\]\\\s\x00-\x1f\x7f]*")


def _absolute(base: str, url: str) -> str:
    """``urljoin(base, url)``; an absolute http(s) URL with a host, a path and no
    query, fragment, parameters, brackets or white space is returned as it is,
    which is what ``urljoin`` returns for it (a large project's page has thousands
    of files: ``urljoin`` was most of the time spent reading the pages)."""
    if _PLAIN_ABSOLUTE.fullmatch(url):
        return url
    return urljoin(base, url)


def parse_files(entries: list[Any], base: str) -> list[IndexFile]:
    """The ``files`` of a PEP 691 page; entries without a file name or URL are left out."""
    out: list[IndexFile] = []
    for e in entries:
        if not isinstance(e, dict):
            continue
        filename = e.get("filename")
        url = e.get("url")
        if not filename or not url:
            continue
        hashes = e.get("hashes")
        sha = hashes.get("sha256") if isinstance(hashes, dict) else None
        size = e.get("size")
        out.append(
            IndexFile(
                filename=str(filename),
                url=_absolute(base, str(url)),
                sha256=str(sha or "").lower(),
                size=int(size) if isinstance(size, int) else None,
                upload_time=str(e.get("upload-time") or ""),
                yanked=bool(e.get("yanked", False)),
                requires_python=str(e.get("requires-python") or ""),
            )
        )
    return out
