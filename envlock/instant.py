"""``--exclude-newer DATE``: one instant in UTC, and upload times compared with it.

DATE is ``YYYY-MM-DD`` or an RFC 3339 timestamp with a zone
(``2024-03-10T12:00:00Z``, ``2024-03-10T14:00:00+02:00``). envlock reads a bare
date as the start of that day in UTC: ``--exclude-newer 2024-03-10`` keeps files
uploaded before 2024-03-10T00:00:00Z. uv reads a bare date differently (uv
0.13: the end of that day in the machine's own time zone, so the day itself is
included and the instant moves with the machine's zone); envlock always hands uv
and pip the full UTC timestamp, so the same lock comes out on every machine.

A file is kept when its upload time is strictly before the instant (uv's
``--exclude-newer`` and pip's ``--uploaded-prior-to`` both compare that way).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from envlock.door import shown
from envlock.errors import UsageError

_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_STAMP = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
    r"(?:([Zz])|([+-])(\d{2}):(\d{2}))"
)


def _parse(text: str) -> datetime | None:
    """``text`` as an aware datetime in UTC, or None when it has neither shape."""
    try:
        m = _DATE.fullmatch(text)
        if m:
            y, mo, d = (int(g) for g in m.groups())
            return datetime(y, mo, d, tzinfo=timezone.utc)
        m = _STAMP.fullmatch(text)
        if not m:
            return None
        y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
        frac = (m.group(7) or "").ljust(6, "0")[:6]
        when = datetime(y, mo, d, h, mi, s, int(frac), tzinfo=timezone.utc)
        if m.group(9):
            offset = timedelta(hours=int(m.group(10)), minutes=int(m.group(11)))
            when = when - offset if m.group(9) == "+" else when + offset
        return when
    except ValueError:  # a month 13, a day 31 in April, an hour 25
        return None


def format_utc(when: datetime) -> str:
    """``2024-03-10T00:00:00Z``; microseconds only when there are any."""
    when = when.astimezone(timezone.utc)
    text = when.strftime("%Y-%m-%dT%H:%M:%S")
    if when.microsecond:
        text += f".{when.microsecond:06d}"
    return text + "Z"


def exclude_newer(text: str, flag: str = "--exclude-newer") -> str:
    """The instant of ``--exclude-newer TEXT`` in UTC (RFC 3339, ``Z``); exit 2 on bad input."""
    when = _parse(text.strip())
    if when is None:
        raise UsageError(
            f"{flag} {shown(text)} is not a date (YYYY-MM-DD) or an RFC 3339 timestamp",
            hint=f"e.g. {flag} 2024-03-10 (the start of that day in UTC) or "
            f"{flag} 2024-03-10T12:00:00Z",
        )
    return format_utc(when)


def upload_instant(upload_time: str) -> datetime | None:
    """An index's ``upload-time`` (PEP 691: RFC 3339 in UTC) as a datetime; None if unreadable."""
    return _parse(upload_time.strip()) if upload_time else None


def uploaded_before(upload_time: str, instant: str) -> bool:
    """Whether a file uploaded at ``upload_time`` is before ``instant`` (both RFC 3339).

    An unknown upload time counts as not before: the file cannot be shown to be older.
    """
    when, limit = upload_instant(upload_time), _parse(instant)
    if when is None or limit is None:
        return False
    return when < limit
