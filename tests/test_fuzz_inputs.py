"""Fuzzing the user inputs of resolve, lock, render and the matrix files.

A few hundred examples per kind (tests/fuzz_support.py has the kinds); each
must end in exit 0, 1 or 2, never an escaped exception, and an exit 2 says
what was wrong on stderr without a traceback. bench/fuzz.py runs the same
kinds at 10,000 examples each.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fuzz_support import KINDS, Kind, Workspace, check, scaled
from hypothesis import HealthCheck, given, settings

EXAMPLES = {  # per kind, sized to stay under ~20 s here
    "spec": 300,
    "resolve-flags": 300,
    "lock-flags": 150,
    "render-flags": 150,
    "runtime.json": 200,
    "render.json": 200,
    "matrix-doc": 300,
    "matrix-file": 200,
}


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_no_input_gives_a_traceback(kind: Kind, tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    seen: dict[int, int] = {}

    @settings(
        max_examples=scaled(EXAMPLES[kind.name]),
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(kind.strategy)
    def one(example: Any) -> None:
        outcome = kind.run(ws, example)
        problem = check(outcome)
        assert problem is None, f"{kind.name} {example!r}: {problem}"
        seen[outcome.code] = seen.get(outcome.code, 0) + 1

    one()
    assert 2 in seen  # the generators do reach the refusals
    if kind.name != "matrix-file":
        assert 0 in seen, seen  # and the inputs that work
