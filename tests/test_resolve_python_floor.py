"""Resolve (and so lock) refuses a Python older than the smoke harness runs on
(envlock.smoke.OLDEST_PYTHON): every bundle runs the harness to prove the GPU
is used, so such an environment could not be proven."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from envlock.errors import NoResolution
from envlock.matrix import Matrix, load
from envlock.resolve import Constraints, resolve
from envlock.smoke import OLDEST_PYTHON, harness_text

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return load()


def test_the_floor_is_what_the_harness_states() -> None:
    assert OLDEST_PYTHON == "3.8"
    assert f"Python {OLDEST_PYTHON} or newer" in harness_text().split('"""')[1]


@pytest.mark.parametrize("spec", ["tensorflow", "tensorflow==2.2", "tensorflow==2.1"])
@pytest.mark.parametrize("python", ["3.7", "3.5"])
def test_an_older_python_is_refused_with_the_reason(matrix: Matrix, spec: str, python: str) -> None:
    with pytest.raises(NoResolution) as err:
        resolve(Constraints(spec=spec, python=python), matrix)
    assert err.value.exit_code == 2
    assert err.value.message == (
        f"nothing fits: Python {python} is older than 3.8, the oldest Python envlock's "
        f"smoke harness runs on (every bundle runs it to prove the GPU works)"
    )
    assert err.value.hint == "--python 3.8 or newer, or drop --python"


def test_the_floor_itself_is_accepted(matrix: Matrix) -> None:
    res = resolve(Constraints(spec="tensorflow==2.2", python="3.8"), matrix)
    assert (res.version, res.python) == ("2.2.3", "3.8")


def test_a_release_with_only_older_pythons_has_nothing_that_fits(matrix: Matrix) -> None:
    rel = matrix.tensorflow.get("2.1.4")
    assert rel is not None and rel.cuda_build and rel.python == ("3.6", "3.7")
    with pytest.raises(NoResolution) as err:
        resolve(Constraints(spec="tensorflow==2.1"), matrix)
    assert err.value.message == (
        "nothing fits: tensorflow 2.1.x has wheels for Python 3.5-3.7 only, older than 3.8, "
        "the oldest Python envlock's smoke harness runs on"
    )
    assert err.value.hint == "use tensorflow>=2.2"


def test_a_range_skips_those_releases(matrix: Matrix) -> None:
    res = resolve(Constraints(spec="tensorflow<2.3"), matrix)
    assert (res.version, res.python) == ("2.2.3", "3.8")
    # the releases below the floor are never the answer, whatever else is asked
    for cuda in ("10.1", "10"):
        res = resolve(Constraints(spec="tensorflow<2.4", cuda=cuda), matrix)
        assert res.version == "2.3.4" and res.python == "3.8"


def test_lock_refuses_it_too(tmp_path: Path) -> None:
    """Before any index is asked: the refusal comes from resolve."""
    out = tmp_path / "env"
    proc = subprocess.run(
        [sys.executable, "-m", "envlock", "lock", "tensorflow==2.1", "-o", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith(
        "envlock: error: nothing fits: tensorflow 2.1.x has wheels for Python 3.5-3.7 only"
    )
    assert "Traceback" not in proc.stderr
    assert not out.exists()
