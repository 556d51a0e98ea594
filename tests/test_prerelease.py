"""Release candidates: rows of the matrix, used only with --pre or a SPEC naming one."""

from __future__ import annotations

import json

import pytest

from envlock.ci.cells import expand
from envlock.cli import main
from envlock.errors import NoResolution
from envlock.matrix import Matrix, load
from envlock.model import Constraints, LockInput
from envlock.resolve import resolve


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return load()


def test_plain_specs_never_get_a_release_candidate(matrix: Matrix) -> None:
    assert resolve(Constraints(), matrix).version == "2.21.0"
    assert resolve(Constraints(spec="tensorflow>=2.21"), matrix).version == "2.21.0"
    # 2.21.0rc1 is newer than 2.20.0 but below 2.21.0: never picked for ==2.21
    assert resolve(Constraints(spec="tensorflow<2.21"), matrix).version == "2.20.0"


@pytest.mark.parametrize(
    ("spec", "pre"),
    [
        ("tensorflow==2.22.0rc0", False),  # an exact pin
        ("tensorflow===2.22.0rc0", False),
        ("tensorflow>=2.22.0rc0", False),  # a SPEC naming a pre-release (PEP 440, pip, uv)
        ("tensorflow>=2.22.0rc0", True),
        ("tensorflow", True),
        ("tensorflow==2.22", True),
    ],
)
def test_a_release_candidate_with_pre_or_a_spec_naming_one(
    matrix: Matrix, spec: str, pre: bool
) -> None:
    res = resolve(Constraints(spec=spec, prereleases=pre), matrix)
    assert res.version == "2.22.0rc0"
    assert (res.cuda, res.cudnn) == ("12.5", "9.10")
    why = "--pre was given" if pre else "the SPEC names a pre-release"
    assert f"tensorflow 2.22.0rc0 is a pre-release, a candidate because {why}" in res.reasons
    assert "built with CUDA 12.5.1 (cuda_config.h) and cuDNN 9.10 (cudnn_version.h)" in res.reasons


def test_a_series_with_only_a_candidate_says_how_to_get_it(matrix: Matrix) -> None:
    with pytest.raises(NoResolution) as err:
        resolve(Constraints(spec="tensorflow==2.22"), matrix)
    hint = err.value.hint or ""
    assert "tensorflow 2.22.0rc0 is a pre-release, used only with --pre or when pinned" in hint
    # the advice works pasted: the pin it names resolves
    assert resolve(Constraints(spec="tensorflow==2.22.0rc0"), matrix).version == "2.22.0rc0"


def test_an_older_candidate_pinned(matrix: Matrix) -> None:
    res = resolve(Constraints(spec="tensorflow==2.21.0rc1"), matrix)
    assert res.version == "2.21.0rc1"


def test_the_flag_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["resolve", "tensorflow==2.22", "--pre", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["version"] == "2.22.0rc0"
    assert main(["resolve", "tensorflow==2.22", "--json"]) == 2
    assert "--pre" in capsys.readouterr().err


def test_the_lock_input_records_pre_and_reads_it_back() -> None:
    given = LockInput(Constraints(spec="tensorflow>=2.22.0rc0", prereleases=True))
    recorded = given.to_dict()
    assert recorded["prereleases"] == "allow"
    assert LockInput.from_dict(recorded) == given
    # not written when not given: earlier locks keep their bytes
    assert "prereleases" not in LockInput(Constraints(spec="tensorflow")).to_dict()


def test_ci_matrix_cells_take_candidates_only_with_pre(matrix: Matrix) -> None:
    plain = [c.id for c in expand("tensorflow>=2.20", matrix=matrix).cells]
    assert plain == ["tf2.20.0-py3.12-cuda12.5", "tf2.21.0-py3.12-cuda12.5"]
    pre = [c.id for c in expand("tensorflow>=2.20", matrix=matrix, prereleases=True).cells]
    assert pre == [*plain, "tf2.22.0rc0-py3.12-cuda12.5"]
    # each cell's spec is the exact pin, which admits the candidate by itself
    last = expand("tensorflow>=2.20", matrix=matrix, prereleases=True).cells[-1]
    assert last.spec == "tensorflow==2.22.0rc0"
