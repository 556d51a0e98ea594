"""Reading answers' bodies: bounded, and by byte range, over ``envlock.index.http``.

``get_range(...)`` reads one byte range of a file and refuses a server that
ignores the Range header (a 200 with the whole file) without downloading it;
a body that breaks off is asked for again (the session's retries, its backoff).
``read_body(...)`` is the one bounded reader of a response body: at most the
limit of its kind (``http.LIMITS``: token answers, manifests, blobs, error bodies)
or the size a descriptor states, a stated sha256 checked as the bytes arrive;
an error body is cut at its limit, any other body past it is refused.
Every read is watched (the command's deadline). requests is imported only
inside these functions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from envlock.errors import EnvironmentFailure
from envlock.index.http import (
    LIMITS,
    MIB,
    _body_failed,
    _pause,
    _reason,
    _send,
    settings_of,
    unreachable,
    watched,
)

if TYPE_CHECKING:
    import requests


def get_range(
    sess: requests.Session, url: str, start: int, end: int | None, *, index: str
) -> tuple[bytes, int]:
    """Bytes ``start..end`` (inclusive) of ``url`` and the file's size; ``(-n, None)``: the last n.

    The answer must be a 206 whose Content-Range matches what was asked and
    whose body is as long as it says; a body that breaks off is asked for
    again (the session's retries). A 200 (the server ignored Range) is refused
    unread: it would be the whole file.
    """
    import requests

    rng = f"bytes={start}" if end is None else f"bytes={start}-{end}"
    settings = settings_of(sess)
    for attempt in range(settings.retries + 1):
        resp = _send(sess, url, index=index, headers={"Range": rng}, ok=(200, 206))
        try:
            if resp.status_code == 200:
                raise EnvironmentFailure(
                    f"the file server of {index} ignores HTTP range requests "
                    f"(it answered 200 with the whole file for {url})",
                    hint="envlock reads wheels in parts; use an index or proxy that honours Range",
                )
            first, last, total = _content_range(resp.headers.get("Content-Range", ""))
            if first is None or (start >= 0 and first != start) or (end is not None and last > end):
                raise EnvironmentFailure(
                    f"the file server of {index} sent no usable Content-Range for {url} "
                    f"(asked for {rng}, got {resp.headers.get('Content-Range', 'none')!r})",
                    hint="a proxy may be rewriting range requests",
                )
            want = last - first + 1
            buf = bytearray()
            try:
                # bounded: an answer longer than the range it names is cut off at once
                # (an endless body was joined whole before: 833 MB, issue #38)
                with watched(resp, f"while reading {url} ({rng})"):
                    for chunk in resp.iter_content(min(want + 1, 1 << 20)):
                        buf += chunk
                        if len(buf) > want:
                            raise EnvironmentFailure(
                                f"the file server of {index} sent more than the {want} bytes "
                                f"of the range it answered for {url} ({rng})",
                                hint="a proxy may be rewriting range requests",
                            )
            except requests.exceptions.RequestException as e:
                if attempt >= settings.retries:
                    raise unreachable(index, _body_failed(sess, url, e)) from None
                _pause(settings, attempt)
                continue
            data = bytes(buf)
            if len(data) != want:  # no Content-Length check held it
                if attempt >= settings.retries:
                    raise unreachable(
                        index,
                        f"the answer for {url} broke off: {len(data)} of {want} bytes ({rng})",
                    )
                _pause(settings, attempt)
                continue
            return data, total
        finally:
            resp.close()
    raise AssertionError("unreachable")  # pragma: no cover


def _content_range(value: str) -> tuple[int | None, int, int]:
    """``bytes A-B/T`` -> (A, B, T); (None, 0, 0) when it is not that."""
    unit, _, rest = value.strip().partition(" ")
    span, _, total = rest.partition("/")
    first, _, last = span.partition("-")
    try:
        a, b, t = int(first), int(last), int(total)
    except ValueError:
        return None, 0, 0
    if unit.lower() != "bytes" or not 0 <= a <= b < t:
        return None, 0, 0
    return a, b, t


class BodyError(Exception):
    """A body past its bound, shorter than stated, not the stated sha256, or broken off."""


def read_body(
    resp: requests.Response,
    kind: str,
    *,
    size: int | None = None,
    sha256: str | None = None,
) -> bytes:
    """The body of ``resp`` (then closed), read in chunks up to the bound of ``kind``.

    ``size``: the length a descriptor states (the bound then, if smaller; a
    different length is a ``BodyError``); ``sha256``: the hex digest the bytes
    must have, hashed as they arrive. An ``error`` body is cut at its limit;
    any other kind past its bound is a ``BodyError``, read no further (a
    Content-Length past it: not read at all).
    """
    import hashlib

    import requests

    limit = LIMITS[kind] if size is None else min(size, LIMITS[kind])
    cut = kind == "error"
    try:
        stated = resp.headers.get("Content-Length", "")
        if not cut and stated.isdigit() and int(stated) > limit:
            raise BodyError(_over(kind, limit, size, stated))
        digest = hashlib.sha256()
        data = bytearray()
        try:
            with watched(resp, f"while reading {getattr(resp, 'url', '') or 'an answer'}"):
                for chunk in resp.iter_content(65536):
                    room = limit - len(data)
                    if len(chunk) > room:
                        if cut:
                            data += chunk[:room]
                            break
                        raise BodyError(_over(kind, limit, size))
                    data += chunk
                    digest.update(chunk)
        except requests.RequestException as e:
            if cut:
                return bytes(data)
            raise BodyError(f"the answer broke off after {len(data)} bytes: {_reason(e)}") from e
    finally:
        resp.close()
    if size is not None and len(data) != size:
        raise BodyError(f"{len(data)} bytes, not the {size} its descriptor states")
    if sha256 is not None and digest.hexdigest() != sha256:
        raise BodyError(f"bytes whose sha256 is {digest.hexdigest()}, not {sha256}")
    return bytes(data)


def _over(kind: str, limit: int, size: int | None, stated: str = "") -> str:
    """'more than the 1 MiB bound of a token', or '... the 100 bytes its descriptor states'."""
    if size is not None and size <= LIMITS[kind]:
        bound = f"the {size} bytes its descriptor states"
    else:
        shown = f"{limit // MIB} MiB" if limit % MIB == 0 else f"{limit} bytes"
        bound = f"the {shown} bound of a {kind}"
    return f"Content-Length {stated}, more than {bound}" if stated else f"more than {bound}"
