"""Smoke tests: the stdlib-only harness and the runners (in an image, on the host).

``harness.py`` is the file copied into every bundle as ``envlock_smoke.py``;
``runner.py`` starts it inside a container or in the current interpreter.
``OLDEST_PYTHON``, the oldest CPython the harness runs on, lives in
``envlock.model`` so that resolve need not import this package (and pathlib).
"""

from __future__ import annotations

from pathlib import Path

from envlock.model import OLDEST_PYTHON

__all__ = ["HARNESS_PATH", "OLDEST_PYTHON", "harness_text"]

HARNESS_PATH = Path(__file__).resolve().parent / "harness.py"


def harness_text() -> str:
    """The harness source, as render copies it into a bundle."""
    return HARNESS_PATH.read_text(encoding="utf-8")
