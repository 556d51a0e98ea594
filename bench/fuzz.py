"""Fuzz every user input of resolve, lock, render and the matrix files at scale.

    .venv/bin/python bench/fuzz.py                  # 10,000 examples per kind
    .venv/bin/python bench/fuzz.py -n 500 -k spec   # fewer, one kind
    .venv/bin/python bench/fuzz.py --json

The kinds and their generators are in tests/fuzz_support.py (the test suite
runs a few hundred of each). Per kind it prints the examples run, the exit
codes seen, the tracebacks (an exception that escaped, an exit outside
{0, 1, 2}, an exit 2 without a message: must be 0) and the time. Exit 1 when
any kind had a traceback; the first few are printed on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fuzz_support import KINDS, Kind, Workspace, check  # noqa: E402
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402


def fuzz(kind: Kind, examples: int, root: Path) -> dict[str, Any]:
    ws = Workspace(root)
    codes: Counter[int] = Counter()
    problems: list[str] = []

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=[Phase.generate],  # count every example; no shrinking
        suppress_health_check=list(HealthCheck),
    )
    @given(kind.strategy)
    def one(example: Any) -> None:
        outcome = kind.run(ws, example)
        codes[outcome.code] += 1
        problem = check(outcome)
        if problem:
            problems.append(f"{kind.name} {example!r}: {problem}")

    start = time.perf_counter()
    one()
    seconds = time.perf_counter() - start
    return {
        "kind": kind.name,
        "examples": sum(codes.values()),
        "exit_codes": {str(code): n for code, n in sorted(codes.items())},
        "tracebacks": len(problems),
        "seconds": round(seconds, 1),
        "first_problems": problems[:3],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--examples", type=int, default=10_000, help="per kind")
    parser.add_argument(
        "-k", "--kind", action="append", choices=[k.name for k in KINDS], help="only these"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per kind")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="envlock-fuzz-") as tmp:
        for i, kind in enumerate(KINDS):
            if args.kind and kind.name not in args.kind:
                continue
            root = Path(tmp) / str(i)
            root.mkdir()
            row = fuzz(kind, args.examples, root)
            rows.append(row)
            if args.json:
                print(json.dumps(row), flush=True)
            else:
                codes = ", ".join(f"{c}: {n}" for c, n in row["exit_codes"].items())
                print(
                    f"{row['kind']:<14} examples {row['examples']:>6}  exit codes {{{codes}}}  "
                    f"tracebacks {row['tracebacks']}  {row['seconds']:.1f} s",
                    flush=True,
                )
            for problem in row["first_problems"]:
                sys.stderr.write(problem + "\n")
    return 1 if any(row["tracebacks"] for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
