"""A platform's published package list as the environment doctor inspects.

``envlock doctor --lock DIR --freeze FILE`` compares a lock with a ``pip freeze``
a platform publishes (Colab's, before the notebook is opened): no venv, no probe
run. ``read_freeze`` reads the file as input (bounded in bytes and lines, each
line a pinned requirement, a direct URL or ``-e``; a bad line is named by its
number, exit 2); ``probe_of`` turns its lines into the probe document the
live-venv doctor judges (``envlock.doctor.findings.judge``): the distributions
by name and version, the Python given with ``--python`` (a freeze names none),
and ``freeze`` set, so the checks that need what only a live interpreter has
(Requires-Dist, imports, libraries, this machine's GPUs) say they were not run
instead of passing.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from envlock.errors import UsageError

if TYPE_CHECKING:
    from envlock.lock.freeze import Installed
    from envlock.venv.probe import Dist, ProbeDoc

MAX_BYTES = 4 * 1024 * 1024  # Colab's 726-line freeze is ~20 KB
MAX_LINES = 20_000
PYTHON = re.compile(r"3\.[0-9]{1,2}")


def check_python(value: str | None) -> str | None:
    """--python X.Y as given (None when not given); anything else is bad input."""
    if value is None:
        return None
    text = value.strip()
    if not PYTHON.fullmatch(text):
        from envlock.readers import quoted

        raise UsageError(
            f"--python {quoted(text)} is not a Python minor version (3.X)",
            hint="give the platform's Python as X.Y, e.g. --python 3.12 "
            "(its os-info file says 'Python 3.12.13')",
        )
    return text


def read_freeze(path: str) -> list[Installed]:
    """The lines of the freeze at ``path``, each an Installed; bad input (exit 2)
    names the line by its number: a line that is not a pinned requirement, a
    name listed twice, a file over MAX_BYTES or MAX_LINES, not UTF-8, unreadable."""
    from packaging.utils import canonicalize_name

    from envlock.lock.freeze import installed_line
    from envlock.readers import read_text
    from envlock.venv.leftout import duplicates

    hint = "give the platform's published package list (the output of pip freeze)"
    text = read_text(path, "--freeze", limit=MAX_BYTES, hint=hint)
    raw_lines = text.replace("\\\n", " ").splitlines()
    if len(raw_lines) > MAX_LINES:
        raise UsageError(
            f"--freeze {path}: {len(raw_lines)} lines, more than a package list has "
            f"(at most {MAX_LINES})",
            hint=hint,
        )
    rows: list[Installed] = []
    for number, raw in enumerate(raw_lines, start=1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        try:
            rows.append(installed_line(line, f"--freeze {path}"))
        except UsageError as e:
            raise UsageError(
                f"--freeze {path}: line {number}: {e.message.split(': ', 1)[-1]}",
                hint=e.hint or hint,
            ) from None
    if not rows:
        raise UsageError(f"--freeze {path}: no package lines in it", hint=hint)
    duplicates(
        [(canonicalize_name(r.name) if r.name else "", r.describe()) for r in rows],
        f"--freeze {path}",
    )
    return rows


def probe_of(rows: list[Installed], python: str | None, path: str) -> ProbeDoc:
    """The probe document of a freeze: what the live-venv doctor's checks read."""
    dists: list[Dist] = []
    for r in rows:
        if not r.name:
            continue
        dist: Dist = {"name": r.name, "version": r.version or "", "location": path}
        if r.direct is not None:
            dist["direct"] = r.direct
            dist["direct_url"] = r.url
        dists.append(dist)
    return {
        "schema": "envlock.probe/v1",
        "python": {
            "executable": "",
            "version": python or "",
            "prefix": "",
            "base_prefix": "",
            "libc": [],
        },
        "distributions": dists,
        "freeze": path,
    }
