"""``envlock capture``: lock a working environment that was never locked.

One call, ``capture(CaptureRequest) -> CaptureResult``; the command only parses
its options into the request and prints the result.

``--venv PATH`` (``envlock.capture.interpreter``) probes the interpreter PATH
names (a venv folder or any interpreter file; envlock.venv.capture), then locks
``tensorflow==<installed>`` with every other installed distribution pinned at
its installed version, for that interpreter's Python minor: the same path as
``envlock lock``, so DIR is a normal bundle with hashes from the index. Then it
writes DIR/captured.json (envlock.bundle.origin): the interpreter and venv it
inspected.

``-r FREEZE.txt`` (``envlock.capture.freeze``) does the same from a ``pip
freeze`` and writes no captured.json (it inspected no interpreter; an earlier
one is removed). A partial capture is a result: the lock holds every line that
can be locked, each other line is listed once with its reason
(DIR/left-out.json); with ``strict`` a line left out refuses the capture,
writing nothing (``Refused``, exit 1).

Every result has ``written`` (the bundle: envlock.bundle.folder.LockedFolder,
None when refused), ``notes`` and ``warnings`` (stderr lines), ``text()`` (what
follows the lock's own table on stdout), ``to_dict()`` (``--json``) and
``exit_code``.
"""

from __future__ import annotations

from envlock.capture.result import (
    CapturedFreeze,
    CapturedInterpreter,
    CaptureRequest,
    CaptureResult,
    Refused,
)

__all__ = [
    "CaptureRequest",
    "CaptureResult",
    "CapturedFreeze",
    "CapturedInterpreter",
    "Refused",
    "capture",
]


def capture(request: CaptureRequest) -> CaptureResult:
    """Capture what ``request`` names into ``request.output`` (a bundle folder)."""
    from pathlib import Path

    from envlock.bundle.guard import check_output_folder

    check_output_folder(Path(request.output), "-o")
    if request.venv:
        from envlock.capture.interpreter import from_interpreter

        return from_interpreter(request)
    from envlock.capture.freeze import from_freeze

    return from_freeze(request)
