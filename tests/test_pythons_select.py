"""The CPython 3.10/3.13 runs' test selection (tests/pythons_select.py and its list)."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from pythons_select import OUT, ROOT, cover, unit_markers

# the list and the tool that makes it: nothing of envlock runs here, so nothing
# that differs by Python (and pythons_select.py leaves its own tests aside)
pytestmark = pytest.mark.main_python


def left_out() -> list[str]:
    lines = OUT.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line and not line.startswith("#")]


def test_each_left_out_test_is_a_collected_unit_test_named_once_in_order(
    request: pytest.FixtureRequest,
) -> None:
    tests = left_out()
    assert tests, "the list is empty: tests/pythons_select.py writes one node id a line"
    assert tests == sorted(set(tests))
    config = request.config
    selects = ("markexpr", "keyword", "deselect", "fast")  # fast: tests/conftest.py's tier
    if any(config.getoption(name) for name in selects):
        pytest.skip("a run that selects tests cannot tell a stale node id from a deselected one")
    collected = {item.nodeid: item for item in request.session.items}
    here = {nodeid.split("::", 1)[0] for nodeid in collected}
    for nodeid in tests:
        module = nodeid.split("::", 1)[0]
        assert re.fullmatch(r"tests/test_\w+\.py", module), nodeid
        if module in here:  # this run collected the module: the test must be in it
            assert nodeid in collected, f"{nodeid} is gone: run tests/pythons_select.py"
            marks = {mark.name for mark in collected[nodeid].iter_markers()}
            assert not marks & {"docker", "network", "slow", "main_python"}, nodeid


def test_the_list_says_how_much_it_keeps() -> None:
    header = [line for line in OUT.read_text(encoding="utf-8").splitlines() if line[:3] == "# {"]
    summary = json.loads(header[0][2:])
    assert summary["tests"] == summary["kept"] + len(left_out())
    assert 0 < summary["cpu_s_kept"] < summary["cpu_s_all"]


def test_the_marker_selection_is_the_one_pythons_sh_runs() -> None:
    assert unit_markers() == "not docker and not network and not slow and not main_python"


def pythons_sh_arguments(all_of_them: bool) -> list[str]:
    """The --deselect arguments tests/pythons.sh's loop makes of the list."""
    script = (ROOT / "tests" / "pythons.sh").read_text(encoding="utf-8")
    loop = script[script.index("left_out=()") : script.index("failed=()")]
    env = {"PATH": "/usr/bin:/bin", **({"ENVLOCK_PYTHONS_ALL": "1"} if all_of_them else {})}
    done = subprocess.run(
        ["bash", "-c", f'set -euo pipefail\n{loop}\nprintf "%s\\n" "${{left_out[@]}}"'],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return done.stdout.splitlines()


def test_pythons_sh_deselects_exactly_the_listed_tests() -> None:
    assert pythons_sh_arguments(False) == [f"--deselect={t}" for t in left_out()]
    # ENVLOCK_PYTHONS_ALL=1: nothing left out (printf prints one empty line)
    assert pythons_sh_arguments(True) == [""]


def test_cover_keeps_the_cheapest_tests_that_run_every_arc() -> None:
    arcs = {
        "a": {("f", 1, 2), ("f", 2, 3), ("f", 3, -1)},
        "b": {("f", 1, 2), ("f", 2, 3)},
        "c": {("f", 3, -1)},
        "d": {("f", 1, 2)},
    }
    cost = {"a": 10.0, "b": 1.0, "c": 1.0, "d": 0.1}
    # d is picked first (most arcs per second), then b and c; b makes d redundant
    assert cover(arcs, cost) == ["b", "c"]
    # when a is cheap it covers everything alone
    assert cover(arcs, {**cost, "a": 0.5}) == ["a"]
    # an arc only one module runs keeps that module, however slow
    arcs["a"].add(("g", 7, 8))
    assert cover(arcs, cost) == ["a"]
