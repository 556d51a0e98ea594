"""Smoke tests: the stdlib-only harness and the runners (in an image, on the host).

``harness.py`` is the file copied into every bundle as ``envlock_smoke.py``;
``runner.py`` starts it inside a container or in the current interpreter.
"""

from __future__ import annotations

from pathlib import Path

HARNESS_PATH = Path(__file__).resolve().parent / "harness.py"

# The oldest CPython harness.py runs on (its tests run under it). Resolve and
# lock refuse an older Python: a bundle whose harness cannot run proves nothing.
OLDEST_PYTHON = "3.8"


def harness_text() -> str:
    """The harness source, as render copies it into a bundle."""
    return HARNESS_PATH.read_text(encoding="utf-8")
