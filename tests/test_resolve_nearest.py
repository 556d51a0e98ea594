"""Explanations name the release, not its series, when other patches of the series
fit, and the hint names a spec inside the series that works when pasted."""

from __future__ import annotations

import re

import pytest

from envlock.errors import NoResolution
from envlock.matrix import Matrix, load
from envlock.model import Constraints
from envlock.resolve import resolve


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return load()


def _failure(matrix: Matrix, **kw: object) -> NoResolution:
    with pytest.raises(NoResolution) as err:
        resolve(Constraints(**kw), matrix)  # type: ignore[arg-type]
    return err.value


def _pasted(matrix: Matrix, hint: str, **kw: object) -> str:
    """The 'use SPEC' part of a hint, resolved with the other constraints unchanged."""
    m = re.search(r"use (tensorflow[^;\s]+)", hint)
    assert m, hint
    kw = {**kw, "spec": m.group(1)}
    return resolve(Constraints(**kw), matrix).version  # type: ignore[arg-type]


def test_tf_2_15_0_with_pip_cuda_names_the_release_and_the_patch_that_works(
    matrix: Matrix,
) -> None:
    """2.15.0's and-cuda needs tensorrt-libs==8.6.1, which has no wheel; 2.15.0.post1 and
    2.15.1 dropped it. Before: 'tensorflow 2.15.x' and 'use tensorflow>=2.15' (-> 2.21.0)."""
    err = _failure(matrix, spec="tensorflow==2.15.0", cuda_source="pip")
    assert err.message.startswith("nothing fits: tensorflow 2.15.0: the and-cuda extra cannot")
    assert "2.15.x" not in err.message
    hint = err.hint or ""
    assert hint.startswith("use tensorflow==2.15.1; ")
    assert _pasted(matrix, hint, cuda_source="pip") == "2.15.1"
    # the patches in between work too
    assert resolve(Constraints(spec="tensorflow==2.15.0.post1", cuda_source="pip"), matrix)


def test_a_whole_series_blocked_still_speaks_of_the_series(matrix: Matrix) -> None:
    err = _failure(matrix, spec="tensorflow==2.15", python="3.12")
    assert "tensorflow 2.15.x" in err.message
    hint = err.hint or ""
    assert "use tensorflow" in hint
    assert _pasted(matrix, hint, python="3.12") != ""


@pytest.mark.parametrize(
    "kw",
    [
        {"spec": "tensorflow==2.15.0", "cuda_source": "pip"},
        {"spec": "tensorflow==2.14.0", "python": "3.12"},
        {"spec": "tensorflow==2.13", "cuda": "12.2"},
        {"spec": "tensorflow==2.16.1", "cudnn": "9.3"},
    ],
)
def test_every_use_hint_resolves_when_pasted(matrix: Matrix, kw: dict[str, str]) -> None:
    err = _failure(matrix, **kw)
    hint = err.hint or ""
    rest = {k: v for k, v in kw.items() if k != "spec"}
    assert _pasted(matrix, hint, **rest)
