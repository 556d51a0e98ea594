"""Lock the whole dependency closure of a Resolution, with hashes.

``lock()`` runs a resolver engine (uv by default, pip as the fallback) for
the target (Linux x86_64 manylinux, the resolved CPython minor) and returns a
``Lock``; ``pylock_text`` and ``requirements_text`` write it;
``read_lock(DIR)`` reads it back from ``DIR/pylock.toml``. The bundle folder
(``envlock lock -o DIR``, ``envlock render DIR``) is written by
``envlock.bundle.folder``; ``envlock lock --check DIR`` is ``envlock.bundle.check``.
"""

from __future__ import annotations

from envlock.lock.core import RESOLVERS, check_requirements, lock, top_requirements
from envlock.lock.pylock import PYLOCK, parse_pylock, pylock_text, read_lock
from envlock.lock.requirements import REQUIREMENTS, requirements_text
from envlock.lockplatform import Target

__all__ = [
    "PYLOCK",
    "REQUIREMENTS",
    "RESOLVERS",
    "Target",
    "check_requirements",
    "lock",
    "parse_pylock",
    "pylock_text",
    "read_lock",
    "requirements_text",
    "top_requirements",
]
