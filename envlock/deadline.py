"""One deadline per command for the network: ``ENVLOCK_HTTP_DEADLINE`` seconds.

``ENVLOCK_HTTP_TIMEOUT`` bounds each read, so a server that stalls is caught;
a server that sends one byte a second never stalls, and held a command for as
long as it liked (issue #38: ``verify --from-registry`` past 60 s with a 3 s
read timeout). ``cli.main`` starts the clock (``start``) at each command;
``envlock.index.http`` gives every request and body read only the time left
(``remaining``) and cuts a read off when it runs out: exit 3 naming the limit.
Library calls outside a command have no deadline (``remaining`` is None).
The default, 1800 s, is far above any single command's network work here (a
TensorFlow wheelhouse, ~1 GB, downloads in minutes); set the variable higher
on slow links, or to 0 for none.
"""

from __future__ import annotations

import os
import time

DEFAULT_SECONDS = 1800.0
_ends: float | None = None
_limit: float | None = None


def start(environ: os._Environ[str] | dict[str, str] = os.environ) -> None:
    """Start the clock of one command (a bad value: the default, said by ``limit``)."""
    global _ends, _limit
    _limit = seconds(environ)
    _ends = None if _limit is None else time.monotonic() + _limit


def seconds(environ: os._Environ[str] | dict[str, str] = os.environ) -> float | None:
    """The limit ``ENVLOCK_HTTP_DEADLINE`` sets (None: 0, no deadline)."""
    raw = environ.get("ENVLOCK_HTTP_DEADLINE", "").strip()
    try:
        value = float(raw) if raw else DEFAULT_SECONDS
    except ValueError:
        value = DEFAULT_SECONDS
    if value != value or value < 0:  # NaN or negative: the default
        value = DEFAULT_SECONDS
    return None if value == 0 else value


def remaining() -> float | None:
    """Seconds left for this command's network work; None when no deadline runs."""
    return None if _ends is None else _ends - time.monotonic()


def limit() -> float | None:
    return _limit


def stop() -> None:
    """No deadline any more (the command ended)."""
    global _ends, _limit
    _ends = _limit = None
