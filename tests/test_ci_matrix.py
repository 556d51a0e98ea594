"""envlock ci matrix: a version range as cells, each what `envlock lock` resolves."""

from __future__ import annotations

import json
import re

import pytest

from envlock.ci.cells import CELL_FIELDS, CELL_ID, bake_target, expand, parse_pythons
from envlock.cli import main
from envlock.errors import NoResolution, UsageError
from envlock.model import OLDEST_PYTHON
from envlock.resolve import Constraints, resolve

RANGE = "tensorflow>=2.14,<2.17"
DOCKER_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
BAKE_TARGET = re.compile(r"^[a-zA-Z0-9_-]+$")


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["ci", "matrix", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_range_gives_the_newest_patch_of_each_minor(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, RANGE)
    assert code == 0, err
    cells = json.loads(out)
    assert [c["version"] for c in cells] == ["2.14.1", "2.15.1", "2.16.2"]
    # resolve's default Python: the newest the release has wheels for that the image's
    # Ubuntu ships as python3 (22.04: 3.10), issue 14
    assert [c["id"] for c in cells] == [
        "tf2.14.1-py3.10-cuda11.8",
        "tf2.15.1-py3.10-cuda12.2",
        "tf2.16.2-py3.10-cuda12.3-pip",
    ]
    for cell in cells:
        assert tuple(cell) == CELL_FIELDS
        assert cell["spec"] == f"tensorflow=={cell['version']}"
        assert cell["image_tag"] == f"envlock-ci:{cell['id']}"  # local: no --repo given


def test_each_cell_is_what_lock_resolves_for_its_flags() -> None:
    for cell in expand(RANGE, "all", ("system", "pip")).cells:
        again = resolve(
            Constraints(spec=cell.spec, python=cell.python, cuda_source=cell.cuda_source)
        )
        for name in ("version", "python", "cuda", "cudnn", "cuda_source", "base_image", "os"):
            assert getattr(again, name) == getattr(cell.resolution, name), (cell.id, name)
    # the defaults are resolve's own choice for the release
    for cell in expand(RANGE).cells:
        default = resolve(Constraints(spec=cell.spec))
        assert (cell.python, cell.cuda_source) == (default.python, default.cuda_source)


def test_python_all_expands_each_release_to_its_supported_pythons(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = _run(capsys, RANGE, "--python", "all")
    assert code == 0, err
    got: dict[str, list[str]] = {}
    for cell in json.loads(out):
        got.setdefault(cell["version"], []).append(cell["python"])
    assert got == {
        "2.14.1": ["3.9", "3.10", "3.11"],
        "2.15.1": ["3.9", "3.10", "3.11"],
        "2.16.2": ["3.9", "3.10", "3.11", "3.12"],
    }
    for version, pythons in got.items():
        supported = resolve(Constraints(spec=f"tensorflow=={version}")).python_supported
        assert pythons == [p for p in supported if tuple(map(int, p.split("."))) >= (3, 8)]
    assert OLDEST_PYTHON == "3.8"


def test_python_all_with_pip_leaves_out_what_resolve_refuses_and_says_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = _run(
        capsys, "tensorflow==2.14", "--python", "all", "--cuda-source", "pip", "--format", "json"
    )
    assert code == 0, err
    assert [c["id"] for c in json.loads(out)] == [
        "tf2.14.1-py3.9-cuda11.8-pip",
        "tf2.14.1-py3.10-cuda11.8-pip",
    ]
    assert "left out tensorflow==2.14.1 with Python 3.11, CUDA source pip" in err
    assert "tensorrt" in err


def test_a_python_the_release_lacks_is_named_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, RANGE, "--python", "3.12")
    assert code == 2 and out == ""
    assert "tensorflow==2.14.1 with Python 3.12" in err
    assert "tensorflow==2.15.1 with Python 3.12" in err
    assert "2.16.2" not in err  # 2.16.2 has 3.12 wheels
    assert "Traceback" not in err and "hint:" in err


def test_a_cuda_source_without_an_image_is_named_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = _run(capsys, RANGE, "--cuda-source", "system")
    assert code == 2
    assert "tensorflow==2.16.2 with Python (default), CUDA source system" in err


@pytest.mark.parametrize("spec", ["tensorflow>=3", "tensorflow>2.15.1,<2.16"])
def test_an_empty_range_is_exit_2(capsys: pytest.CaptureFixture[str], spec: str) -> None:
    code, out, err = _run(capsys, spec)
    assert code == 2 and out == ""
    assert "no tensorflow release matches" in err or "nothing fits" in err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--python", "3.x"], "not a CPython minor"),
        (["--python", "3.11,,3.12"], "not a CPython minor"),
        (["--cuda-source", "conda"], "not a CUDA source"),
        (["--repo", "Bad Repo"], "not an image repository"),
        (["--repo", "ghcr.io/o/r:tag"], "not an image repository"),
    ],
)
def test_bad_flags_are_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    code, out, err = _run(capsys, RANGE, *argv)
    assert code == 2 and out == ""
    assert needle in err and "Traceback" not in err


def test_python_list_is_deduplicated() -> None:
    assert parse_pythons("3.11, 3.10,3.11") == ("3.11", "3.10")
    assert parse_pythons("ALL") == "all"
    with pytest.raises(UsageError):
        parse_pythons("")


def test_github_format_is_one_line_for_strategy_matrix(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = _run(capsys, RANGE, "--format", "github", "--repo", "ghcr.io/o/r")
    assert code == 0, err
    assert out.count("\n") == 1 and out.endswith("\n")
    doc = json.loads(out)
    assert list(doc) == ["include"]
    assert [c["image_tag"] for c in doc["include"]] == [
        f"ghcr.io/o/r:{c['id']}" for c in doc["include"]
    ]


def test_ids_are_unique_and_safe_as_folder_tag_and_bake_target() -> None:
    cells = expand("tensorflow>=2.12,<2.18", "all", ("system", "pip")).cells
    ids = [c.id for c in cells]
    assert len(ids) == len(set(ids)) > 10
    for cid in ids:
        assert CELL_ID.fullmatch(cid), cid
        assert DOCKER_TAG.fullmatch(cid), cid
        assert "/" not in cid and not cid.startswith((".", "-"))
        assert BAKE_TARGET.fullmatch(bake_target(cid)), cid
    assert len({bake_target(i) for i in ids}) == len(ids)


def test_bake_format(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, RANGE, "--format", "bake", "--repo", "ghcr.io/o/tf")
    assert code == 0, err
    doc = json.loads(out)
    targets = doc["target"]
    assert doc["group"] == {"default": {"targets": list(targets)}}
    ids = ["tf2.14.1-py3.10-cuda11.8", "tf2.15.1-py3.10-cuda12.2", "tf2.16.2-py3.10-cuda12.3-pip"]
    assert list(targets) == [bake_target(i) for i in ids]
    for cid in ids:
        t = targets[bake_target(cid)]
        assert t["context"] == cid  # relative to the bake file's folder
        assert t["dockerfile"] == "Dockerfile"
        assert t["tags"] == [f"ghcr.io/o/tf:{cid}"]
        assert t["cache-from"] == [f"type=gha,scope={bake_target(cid)}"]
        assert t["cache-to"] == [f"type=gha,scope={bake_target(cid)},mode=max"]
        assert t["output"] == ["type=registry"]
        assert t["labels"]["io.envlock.cell"] == cid
        assert "io.envlock.lock.digest" not in t["labels"]  # not locked yet
        assert t["args"]["BASE_IMAGE"].startswith("nvidia/cuda:")


def test_expand_raises_no_resolution_for_nothing() -> None:
    with pytest.raises(NoResolution):
        expand("tensorflow>=9")


def test_several_cuda_sources_keep_each_combination_that_exists(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = _run(capsys, RANGE, "--cuda-source", "system,pip")
    assert code == 0, err
    ids = [c["id"] for c in json.loads(out)]
    assert ids == [
        "tf2.14.1-py3.10-cuda11.8",
        "tf2.14.1-py3.10-cuda11.8-pip",
        "tf2.15.1-py3.10-cuda12.2",
        "tf2.15.1-py3.10-cuda12.2-pip",
        "tf2.16.2-py3.10-cuda12.3-pip",
    ]
    assert "note: left out tensorflow==2.16.2 with Python (default), CUDA source system" in err
    # a release with no source at all that exists is still impossible, exit 2
    code, _, err = _run(capsys, "tensorflow==2.16.2", "--cuda-source", "system,system")
    assert code == 2 and "impossible cells" in err
