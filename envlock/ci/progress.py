"""The log side of ``envlock ci build``: where a cell's progress lines go.

A ``Progress`` sink takes each event of a cell (``PlainProgress`` writes one
line per event, prefixed ``[cell-id]``); ``LogWatch`` counts the lines of a
build or smoke log as they pass; ``heartbeat`` says what a cell silent for a
while is doing, so a plain CI log never goes silent past a no-output timeout;
``short_reason`` is the one short line the log and the summary table give for
an error.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from envlock.ci.summary import CellOutcome


class Progress(Protocol):
    def update(self, outcome: CellOutcome, line: str | None = None) -> None: ...


class PlainProgress:
    """One line per event on a stream: ``[cell-id] build step 3/12 RUN ...``."""

    def __init__(self, write: Callable[[str], Any] | None = None) -> None:
        self._write = write or _stderr
        self._lock = threading.Lock()

    def update(self, outcome: CellOutcome, line: str | None = None) -> None:
        if line:
            with self._lock:
                self._write(f"[{outcome.cell}] {line}\n")


def _stderr(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


def short_reason(error: BaseException) -> str:
    """One short line for the summary table: for a failed step, which step and how
    (the fields of ``BuildFailed``, never its message parsed again)."""
    from envlock.image.build import BuildFailed

    if isinstance(error, BuildFailed) and error.step is not None:
        instruction = error.instruction or ""
        if len(instruction) > 40:
            instruction = instruction[:37] + "..."
        lines = error.reason.strip().splitlines()
        how = (
            f"exit code {error.step_exit_code}"
            if error.step_exit_code is not None
            else (lines[0] if lines else "")
        )
        return f"step {error.step} {instruction}: {how}"[:200]
    lines = str(error).strip().splitlines()
    first = lines[0] if lines else type(error).__name__
    return first[:200]


class LogWatch:
    """Counts the lines of a log as they pass (and writes them on to ``sink``):
    what the heartbeat says about a long RUN step or smoke run."""

    def __init__(self, sink: Any = None) -> None:
        self._sink = sink
        self.lines = 0
        self.last = ""
        self.where = ""
        self._partial = ""

    def step(self, text: str) -> None:
        words = text.split()
        self.where = words[1] if len(words) > 1 and words[0] == "step" else self.where
        self.lines = 0

    def line(self, text: str) -> None:
        text = " ".join(text.split())
        if text and not text.startswith("Step ") and not text.startswith("---> "):
            self.lines += 1
            self.last = text

    def write(self, text: str) -> int:
        if self._sink is not None:
            self._sink.write(text)
        parts = (self._partial + text).split("\n")
        self._partial = parts.pop()
        for part in parts:
            self.line(part)
        return len(text)

    def flush(self) -> None:
        if self._sink is not None:
            self._sink.flush()

    def describe(self) -> str:
        last = self.last if len(self.last) <= 100 else self.last[:97] + "..."
        return f"{self.lines} log lines" + (f", last: {last}" if last else "")


def heartbeat(
    outcomes: list[CellOutcome], progress: Progress, interval: float, stop: threading.Event
) -> None:
    """Until ``stop``: a line for every running cell that has said nothing for
    ``interval`` seconds (what it is doing, bytes pushed, log lines), so a
    plain CI log never goes silent past a no-output timeout."""
    tick = min(1.0, interval / 4)
    while not stop.wait(tick):
        now = time.monotonic()
        for o in outcomes:
            if o.stage in ("queued", "done", "failed") or o.said is None:
                continue
            if now - o.said >= interval:
                pulse = o.pulse
                what = pulse() if pulse is not None else o.stage
                elapsed = time.perf_counter() - o.started if o.started else 0.0
                o.said = now
                progress.update(o, f"... {what} ({elapsed:.0f} s in the cell)")
