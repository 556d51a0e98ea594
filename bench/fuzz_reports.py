"""Fuzz the signed-report inputs through the command line (issue #11).

Three kinds, each through ``envlock.cli.main`` in-process with its files in a
temp folder, the checks of tests/test_report_fuzz.py (never a traceback, no
exception escapes, exit 0-2; whatever ``report sign`` writes, its own
``verify`` accepts):

- result: result JSON given to ``report sign`` (with and without --lock),
- envelope: a report given to ``verify`` (with --lock, and --json) and
  ``report show`` (table and --json),
- key: a key file given to ``verify --key`` and ``report sign --key``.

Usage: python bench/fuzz_reports.py [--examples N] [--kind result|envelope|key]
Prints, per kind, the number of examples and the exit codes seen.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from report_support import (  # noqa: E402
    FuzzBench,
    envelope_strategy,
    key_strategy,
    result_strategy,
)


def run_kind(kind: str, bench: FuzzBench, examples: int) -> tuple[Counter[str], float]:
    seen: Counter[str] = Counter()
    config = settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    if kind == "result":

        @config
        @given(data=result_strategy(bench), with_lock=st.booleans())
        def check(data: bytes, with_lock: bool) -> None:
            codes = bench.result(data, with_lock)
            seen["examples"] += 1
            seen[f"sign exit {codes[0]}"] += 1
            if len(codes) > 1:
                seen[f"verify of the signed report exit {codes[1]}"] += 1

    elif kind == "envelope":

        @config
        @given(data=envelope_strategy(bench))
        def check(data: bytes) -> None:
            codes = bench.envelope_file(data)
            seen["examples"] += 1
            seen[f"verify --lock exit {codes[0]}"] += 1
            seen[f"show exit {codes[2]}"] += 1

    else:

        @config
        @given(data=key_strategy(bench))
        def check(data: bytes) -> None:
            codes = bench.key_file(data)
            seen["examples"] += 1
            seen[f"verify --key exit {codes[0]}"] += 1
            seen[f"sign --key exit {codes[1]}"] += 1

    start = time.monotonic()
    check()
    return seen, time.monotonic() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=10_000)
    parser.add_argument("--kind", choices=("result", "envelope", "key"), action="append")
    args = parser.parse_args()
    failed = 0
    with tempfile.TemporaryDirectory(prefix="envlock-fuzz-") as root:
        bench = FuzzBench(Path(root))
        for kind in args.kind or ["result", "envelope", "key"]:
            try:
                seen, seconds = run_kind(kind, bench, args.examples)
            except Exception as e:  # a falsifying example: hypothesis printed it
                print(f"{kind}: FAILED: {type(e).__name__}: {e}", flush=True)
                failed += 1
                continue
            counts = ", ".join(f"{k}: {v}" for k, v in sorted(seen.items()) if k != "examples")
            print(
                f"{kind}: {seen['examples']} examples in {seconds:.0f} s, 0 tracebacks; {counts}",
                flush=True,
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
