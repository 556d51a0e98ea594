"""One instant for a test that locks from the real index and then checks the lock.

The real index changes while the suite runs: in CI a google-auth release appeared
between a lock and its ``lock --check`` and the check rightly named it. A test that
asserts "a fresh lock checks as current" locks with ``--exclude-newer`` at the
moment it starts, so lock and check see the same index; the check still re-reads the
index, so a file removed or replaced under the lock is still named. (A release yanked
between the two is still seen: uv leaves yanked files out at any instant.)
"""

from __future__ import annotations

from datetime import datetime, timezone

from envlock.instant import format_utc


def index_now() -> str:
    """This moment in UTC to the second, as ``--exclude-newer`` takes it."""
    return format_utc(datetime.now(timezone.utc).replace(microsecond=0))
