"""Where one ``envlock capture -r`` of the April 2026 Colab freeze spends its wall time.

    .venv/bin/python bench/capture_phases.py [--runs N]

Runs the capture in this process (``envlock.cli.main``, a fresh output folder
each run) with four of its steps wrapped by a timer: the PEP 691 pages
(``leftout.pages``), the triage, the source-only preflight
(``sdist_check.preflight``) and the lock with its rounds (``rounds.lock_rounds``,
uv's resolve included). Prints one JSON line a run, seconds per step and in all.
bench/capture.py compares the whole against uv.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FREEZE = ROOT / "tests" / "fixtures" / "platforms" / "colab-gpu-2026-04-24-pip-freeze.txt"
OS_INFO = ROOT / "tests" / "fixtures" / "platforms" / "colab-gpu-2026-04-24-os-info.txt"


def _timed(module: Any, name: str, label: str, spent: dict[str, float]) -> None:
    inner: Callable[..., Any] = getattr(module, name)

    @functools.wraps(inner)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[label] = spent.get(label, 0.0) + time.perf_counter() - start

    setattr(module, name, wrapper)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from envlock.capture import rounds
    from envlock.cli import main as envlock
    from envlock.venv import leftout, sdist_check

    spent: dict[str, float] = {}
    _timed(leftout, "pages", "pages_s", spent)
    _timed(leftout, "triage", "triage_s", spent)
    _timed(sdist_check, "preflight", "preflight_s", spent)
    _timed(rounds, "lock_rounds", "lock_s", spent)
    argv = ["capture", "-r", str(FREEZE), "--os-info", str(OS_INFO)]
    for _ in range(args.runs):
        spent.clear()
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            quiet = io.StringIO()
            with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
                code = envlock([*argv, "-o", str(Path(tmp) / "env")])
            spent["total_s"] = time.perf_counter() - start
        print(json.dumps({"exit": code, **{k: round(v, 2) for k, v in spent.items()}}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
