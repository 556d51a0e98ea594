"""One way to talk HTTP: a requests session with timeouts, retries and clear errors.

``session()`` gives a ``requests.Session`` that
- has a default (connect, read) timeout on every request,
- retries connection errors, 429 and 5xx answers with exponential backoff
  (honouring ``Retry-After``), through urllib3's ``Retry``,
- verifies TLS against the system's CA bundle (or the one the user configured
  for requests, curl, pip or OpenSSL), so networks that intercept TLS work.

``get(...)`` does one request and maps every failure to ``EnvironmentFailure``
(exit 3): "cannot reach the package index at <url>: ..." plus a hint.
urllib3 retries what fails before the answer's headers (refused or reset
connections, a server that stalls past the read timeout, 429 and 5xx); a body
that breaks off after its headers (a truncated answer, a reset or a stall in
the middle) is outside urllib3's retries, so ``get`` (and
``envlock.index.body.get_range``) ask again themselves, as often and with the
same backoff.
``LIMITS`` bounds each kind of body that ``envlock.index.body.read_body`` reads.
A ``Retry-After`` is obeyed up to the backoff maximum and the read timeout
(``ENVLOCK_HTTP_TIMEOUT``), never longer.
requests is imported only inside these functions.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from envlock.errors import EnvironmentFailure, UsageError

if TYPE_CHECKING:
    import requests

DEFAULT_TIMEOUT = (10.0, 60.0)  # connect, read (seconds)
DEFAULT_RETRIES = 4
DEFAULT_BACKOFF = 0.5  # seconds; doubled each retry
RETRY_STATUS = (429, 500, 502, 503, 504)
BACKOFF_MAX = 120.0  # seconds: the longest wait between two tries (urllib3's default too)

MIB = 1024 * 1024
# the most a body of each kind may be (bytes); a blob is also held to its descriptor's size
LIMITS = {
    "token": 1 * MIB,  # a token service's JSON answer
    "manifest": 4 * MIB,  # an image manifest (distribution's own limit)
    "blob": 17 * MIB,  # an attestation layer: a DSSE envelope (envlock.report.strict's bound)
    "error": 64 * 1024,  # an error answer: cut here, the rest never read
}

_SYSTEM_BUNDLES = (
    "/etc/ssl/certs/ca-certificates.crt",  # Debian, Ubuntu, Alpine
    "/etc/pki/tls/certs/ca-bundle.crt",  # Fedora, RHEL
    "/etc/ssl/ca-bundle.pem",  # openSUSE
    "/etc/ssl/cert.pem",  # macOS, BSD
)


@dataclass(frozen=True)
class HttpSettings:
    timeout: tuple[float, float] = DEFAULT_TIMEOUT
    retries: int = DEFAULT_RETRIES
    backoff: float = DEFAULT_BACKOFF
    pool_size: int = 16

    @classmethod
    def from_env(cls, pool_size: int = 16) -> HttpSettings:
        """Defaults, overridden by ENVLOCK_HTTP_TIMEOUT / _RETRIES / _BACKOFF."""
        timeout = DEFAULT_TIMEOUT
        retries = DEFAULT_RETRIES
        backoff = DEFAULT_BACKOFF
        raw = os.environ.get("ENVLOCK_HTTP_TIMEOUT")
        if raw:
            t = _number("ENVLOCK_HTTP_TIMEOUT", raw)
            timeout = (t, t)
        raw = os.environ.get("ENVLOCK_HTTP_RETRIES")
        if raw:
            retries = int(_number("ENVLOCK_HTTP_RETRIES", raw))
        raw = os.environ.get("ENVLOCK_HTTP_BACKOFF")
        if raw:
            backoff = _number("ENVLOCK_HTTP_BACKOFF", raw)
        return cls(timeout=timeout, retries=retries, backoff=backoff, pool_size=pool_size)


def _number(name: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise UsageError(f"{name}={raw!r} is not a non-negative number", hint=f"unset {name}")
    return value


def ca_bundle() -> str | bool:
    """The CA bundle to verify TLS with; True means requests' own default.

    requests' and OpenSSL's variables first, then pip's ``cert`` setting as pip
    itself would resolve it (PIP_CERT, then pip's configuration files in pip's
    order, through envlock.index.config.pip_setting), then the system's bundle.
    """
    for var in ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE"):
        value = os.environ.get(var)
        if value and os.path.isfile(value):
            return value
    from envlock.index.config import pip_setting

    pip_cert = pip_setting("cert")
    if pip_cert is not None and os.path.isfile(pip_cert.value):
        return pip_cert.value
    for path in _SYSTEM_BUNDLES:
        if os.path.isfile(path):
            return path
    return True


def session(settings: HttpSettings | None = None) -> requests.Session:
    """A pooled session with timeouts, retries with backoff, and the system CAs."""
    import requests
    from requests.adapters import HTTPAdapter
    from urllib3.util.retry import Retry

    s = settings or HttpSettings.from_env()

    class _Adapter(HTTPAdapter):
        """Pooled connections, retries, a timeout on every read, and the command's
        deadline on the wait for the status line and headers (``_headers_watched``)."""

        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = _watched_pools()

        def proxy_manager_for(self, proxy: str, **kwargs: Any) -> Any:
            manager = super().proxy_manager_for(proxy, **kwargs)
            if not proxy.lower().startswith("socks"):  # SOCKS pools are urllib3's own
                manager.pool_classes_by_scheme = _watched_pools()
            return manager

        def send(self, request: Any, *args: Any, **kwargs: Any) -> Any:
            if kwargs.get("timeout") is None:
                kwargs["timeout"] = s.timeout
            with _headers_watched(str(request.url)) as taken:
                resp = super().send(request, *args, **kwargs)
                taken.answer = resp
            return resp

    class _Retry(Retry):
        """urllib3's retries, with a server's Retry-After cut to ``longest_wait``, and
        the body of an answer that is asked again closed unread (urllib3 would read
        it to the end to reuse the connection: an endless body, for ever)."""

        def get_retry_after(self, response: Any) -> float | None:
            after = super().get_retry_after(response)
            return None if after is None else min(after, longest_wait(s))

        def increment(  # type: ignore[override]  # urllib3 types it Self
            self,
            method: str | None = None,
            url: str | None = None,
            response: Any = None,
            error: Exception | None = None,
            _pool: Any = None,
            _stacktrace: Any = None,
        ) -> Retry:
            from envlock import deadline

            left = deadline.remaining()
            if left is not None and left <= 0:  # no new try once the command's time is up
                if response is not None:
                    response.close()
                raise past_deadline(f"while waiting for the answer of {url or 'a request'}")
            new = super().increment(method, url, response, error, _pool, _stacktrace)
            if response is not None:  # raised above when no try is left
                response.close()  # its headers stay readable for the Retry-After
            return new

    retry = _Retry(
        total=s.retries,
        connect=s.retries,
        read=s.retries,
        status=s.retries,
        backoff_factor=s.backoff,
        backoff_max=longest_wait(s),
        status_forcelist=RETRY_STATUS,
        allowed_methods=frozenset({"GET", "HEAD"}),
        respect_retry_after_header=True,
        raise_on_status=False,
    )
    adapter = _Adapter(max_retries=retry, pool_connections=s.pool_size, pool_maxsize=s.pool_size)
    sess = requests.Session()
    sess.mount("https://", adapter)
    sess.mount("http://", adapter)
    sess.verify = ca_bundle()
    sess.headers["User-Agent"] = _user_agent()
    sess.envlock_settings = s  # type: ignore[attr-defined]  # for get()'s body retries
    return sess


def settings_of(sess: requests.Session) -> HttpSettings:
    """The settings ``session()`` made ``sess`` with (from the environment otherwise)."""
    found = getattr(sess, "envlock_settings", None)
    return found if isinstance(found, HttpSettings) else HttpSettings.from_env()


def _user_agent() -> str:
    from envlock import __version__

    return f"envlock/{__version__}"


def unreachable(url: str, reason: str) -> EnvironmentFailure:
    return EnvironmentFailure(
        f"cannot reach the package index at {url}: {reason}",
        hint="check the network, proxy and CA settings, or pass --index-url "
        "(pip's index-url and PIP_INDEX_URL are honoured)",
    )


def _reason(exc: Exception) -> str:
    """A short reason from a requests/urllib3 exception chain."""
    text = str(exc)
    low = text.lower()
    if "connection refused" in low:
        return "connection refused"
    if "incompleteread" in low or "connection broken" in low:
        return "the connection broke off in the middle of the answer"
    if "reset by peer" in low or "connectionreseterror" in low:
        return "the connection was reset"
    if "remotedisconnected" in low or "closed connection without response" in low:
        return "the server closed the connection without answering"
    if "name or service not known" in low or "nodename nor servname" in low:
        return "host name not found"
    if "certificate verify failed" in low:
        return "TLS certificate verification failed"
    if "max retries exceeded" in low and "too many" in low and "error responses" in low:
        return "the server kept answering with errors"
    if "timed out" in low or "timeout" in low:
        return "timed out"
    return text.splitlines()[0][:200] if text else type(exc).__name__


def reason_of(text: str) -> str:
    """The short reason ``_reason`` gives, from an error's text (another tool's output)."""
    return _reason(Exception(text))


def _timed_out(sess: requests.Session, url: str) -> str:
    s = settings_of(sess)
    tries = f"{s.retries + 1} {'try' if s.retries == 0 else 'tries'}"
    return (
        f"timed out after {s.timeout[1]:g} s for {url} ({tries}; "
        "ENVLOCK_HTTP_TIMEOUT and ENVLOCK_HTTP_RETRIES set these)"
    )


def longest_wait(settings: HttpSettings) -> float:
    """The longest envlock waits before asking again: the backoff maximum, and never
    longer than the read timeout (a server's Retry-After is cut to this)."""
    return min(BACKOFF_MAX, settings.timeout[1])


def past_deadline(what: str) -> EnvironmentFailure:
    """The command's network deadline ran out (``envlock.deadline``): exit 3."""
    from envlock import deadline

    return EnvironmentFailure(
        f"the command's network deadline of {deadline.limit() or 0:g} s ran out {what}",
        hint="on a slow link, allow more: ENVLOCK_HTTP_DEADLINE=SECONDS (0 for none), "
        "then run the same command again",
    )


@contextlib.contextmanager
def watched(resp: requests.Response, what: str) -> Iterator[None]:
    """Read ``resp``'s body inside this block: when the command's deadline runs out
    first, its socket is shut down (a read that never stalls, one byte a second,
    ends at once) and the block ends in ``past_deadline`` instead of whatever the
    read raised or returned. No deadline running: nothing is watched."""
    from envlock import deadline

    left = deadline.remaining()
    if left is None:
        yield
        return
    fired = threading.Event()

    def cut() -> None:
        fired.set()
        sock = getattr(getattr(resp.raw, "connection", None), "sock", None)
        with contextlib.suppress(OSError, AttributeError):
            sock.shutdown(socket.SHUT_RDWR)  # type: ignore[union-attr]

    if left <= 0:
        resp.close()
        raise past_deadline(what)
    timer = threading.Timer(left, cut)
    timer.daemon = True
    timer.start()
    try:
        yield
    except Exception:
        if fired.is_set():
            raise past_deadline(what) from None
        raise
    finally:
        timer.cancel()
    if fired.is_set():
        raise past_deadline(what)


_taking = threading.local()  # .box: the connections the current request took (or None)


class _Taken:
    """The connections one request took from its pools, and its answer."""

    def __init__(self) -> None:
        self.connections: list[Any] = []
        self.answer: Any = None


def _watched_pools() -> dict[str, type]:
    """urllib3's pools, noting each connection a watched request takes (``_taking``),
    so that ``_headers_watched`` can shut its socket down."""
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

    def note(conn: Any) -> Any:
        taken = getattr(_taking, "box", None)
        if taken is not None:
            taken.connections.append(conn)
        return conn

    class _Pool(HTTPConnectionPool):
        def _get_conn(self, timeout: float | None = None) -> Any:
            return note(super()._get_conn(timeout))

    class _SecurePool(HTTPSConnectionPool):
        def _get_conn(self, timeout: float | None = None) -> Any:
            return note(super()._get_conn(timeout))

    return {"http": _Pool, "https": _SecurePool}


@contextlib.contextmanager
def _headers_watched(url: str) -> Iterator[_Taken]:
    """The wait for a status line and headers, bounded by the command's deadline:
    a server that sends its headers one byte a second never trips the read
    timeout (each byte resets it), so when the time is up the socket of every
    connection this request took is shut down and the request ends in
    ``past_deadline``. No deadline running: nothing is watched."""
    from envlock import deadline

    left = deadline.remaining()
    taken = _Taken()
    if left is None:
        yield taken
        return
    if left <= 0:
        raise past_deadline(f"before asking {url}")
    fired = threading.Event()

    def cut() -> None:
        fired.set()
        for conn in list(taken.connections):
            sock = getattr(conn, "sock", None)
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(left, cut)
    timer.daemon = True
    _taking.box = taken
    timer.start()
    try:
        yield taken
    except Exception:
        if fired.is_set():
            raise past_deadline(f"while waiting for the answer of {url}") from None
        raise
    finally:
        _taking.box = None
        timer.cancel()
    if fired.is_set():
        if taken.answer is not None:
            taken.answer.close()
        raise past_deadline(f"while waiting for the answer of {url}")


def _pause(settings: HttpSettings, attempt: int) -> None:
    """The backoff before asking again (as urllib3's: backoff * 2**attempt, capped)."""
    time.sleep(min(longest_wait(settings), settings.backoff * (2**attempt)))


def _send(
    sess: requests.Session,
    url: str,
    *,
    index: str,
    headers: dict[str, str] | None,
    ok: tuple[int, ...],
) -> requests.Response:
    """One request through urllib3's retries; the body not read yet."""
    import requests

    from envlock import deadline

    left = deadline.remaining()
    if left is not None and left <= 0:
        raise past_deadline(f"before asking {url}")

    try:
        resp = sess.get(url, headers=headers, stream=True)
    except requests.exceptions.SSLError as e:
        raise unreachable(index, f"TLS failed ({_reason(e)})") from None
    except requests.exceptions.RetryError as e:
        raise unreachable(index, f"{_reason(e)} for {url}") from None
    except requests.exceptions.Timeout:
        raise unreachable(index, _timed_out(sess, url)) from None
    except requests.exceptions.ConnectionError as e:
        reason = _reason(e)
        if reason == "timed out":
            raise unreachable(index, _timed_out(sess, url)) from None
        if reason in ("connection refused", "host name not found"):
            raise unreachable(index, reason) from None
        raise unreachable(index, f"{reason} for {url}") from None
    except requests.exceptions.RequestException as e:
        raise unreachable(index, _reason(e)) from None
    if resp.status_code not in ok:
        resp.close()
        raise unreachable(index, f"HTTP {resp.status_code} {resp.reason or ''} for {url}".strip())
    return resp


def _body_failed(sess: requests.Session, url: str, exc: Exception) -> str:
    reason = _reason(exc)
    if reason == "timed out":
        return _timed_out(sess, url)
    return f"{reason} while reading {url}"


def get(
    sess: requests.Session,
    url: str,
    *,
    index: str,
    headers: dict[str, str] | None = None,
    ok: tuple[int, ...] = (200,),
    stream: bool = False,
) -> requests.Response:
    """GET ``url``; any network failure or an unexpected status -> EnvironmentFailure.

    ``index`` is the index URL named in the message. Without ``stream`` the
    body is read here, and a body that breaks off (truncated, reset, stalled)
    is asked for again, up to the session's retries. With ``stream`` the body
    is not read before the status is checked (a response with another status
    is closed unread); reading it, and retrying, is the caller's.
    """
    import requests

    settings = settings_of(sess)
    for attempt in range(settings.retries + 1):
        resp = _send(sess, url, index=index, headers=headers, ok=ok)
        if stream:
            return resp
        try:
            with watched(resp, f"while reading {url}"):
                _ = resp.content
        except requests.exceptions.RequestException as e:
            resp.close()
            if attempt >= settings.retries:
                raise unreachable(index, _body_failed(sess, url, e)) from None
            _pause(settings, attempt)
            continue
        return resp
    raise AssertionError("unreachable")  # pragma: no cover
