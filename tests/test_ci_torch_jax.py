"""Issue 43: `ci matrix` / `ci lock` of a torch or JAX range: release x CUDA build x Python.

The builds are matrices/torch.toml's and jax.toml's rows (read from the wheels on the
configured index; PyTorch's own index's from its published table, source named
there). The `network` tests lock against the real index of this machine's pip/uv
configuration: torch 2.11.0's cu130 build is there, cu128/cu126 are on PyTorch's
own index only, so their cells fail with the hint naming that index.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from envlock.ci.cells import BUILD_CELL_FIELDS, CELL_ID, expand
from envlock.cli import main
from envlock.matrix import builds
from envlock.resolve import resolve

TORCH_RANGE = "torch>=2.9,<2.12"


def _matrix(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = main(["ci", "matrix", *argv])
    out, err = capsys.readouterr()
    return code, json.loads(out) if code == 0 and out.startswith("[") else out, err


def test_a_torch_range_is_each_minors_newest_patch_times_its_cuda_builds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, cells, err = _matrix(capsys, TORCH_RANGE)
    assert code == 0, err
    assert [(c["id"], c["index"]) for c in cells] == [
        ("torch2.9.1-py3.12-cu128", "default"),
        ("torch2.9.1-py3.12-cu130", "pytorch"),
        ("torch2.9.1-py3.12-cu126", "pytorch"),
        ("torch2.10.0-py3.12-cu128", "default"),
        ("torch2.10.0-py3.12-cu130", "pytorch"),
        ("torch2.10.0-py3.12-cu126", "pytorch"),
        ("torch2.11.0-py3.12-cu130", "default"),
        ("torch2.11.0-py3.12-cu128", "pytorch"),
        ("torch2.11.0-py3.12-cu126", "pytorch"),
    ]
    rows = {(str(b.version), b.build): b for b in builds.load("torch").builds}
    for c in cells:
        assert tuple(c) == BUILD_CELL_FIELDS
        assert CELL_ID.match(c["id"])
        version = c["spec"].removeprefix("torch==")
        row = rows[(version, c["build"])]
        # the cell is the build matrices/torch.toml holds: its CUDA, its index
        assert (c["cuda"], c["index"], c["cuda_source"]) == (row.cuda, row.index, "pip")
        # a build of PyTorch's own index is pinned with its local label, as that index lists it
        local = f"+{row.build}" if row.index == "pytorch" else ""
        assert c["version"] == f"{version}{local}"
        assert c["base_image"].startswith(f"nvidia/cuda:{row.cuda}.")
        assert c["base_image"].endswith("-base-ubuntu24.04")  # the runtime only: CUDA from wheels


def test_each_torch_and_jax_cell_is_what_lock_resolves_for_it() -> None:
    for spec in (TORCH_RANGE, "jax[cuda]>=0.11"):
        for cell in expand(spec).cells:
            again = resolve(cell.asked)
            assert again == cell.resolution, cell.id
            # and the asked constraints are the command line `envlock lock` takes
            words = cell.asked
            assert words.python is None and words.cuda_source is None
            if cell.spec.startswith("torch"):
                assert words.cuda == cell.resolution.cuda  # --cuda picks the build
            else:
                assert words.cuda is None  # the jax[cudaNN] extra does


def test_jax_cells_take_each_builds_newest_patch_of_the_minor(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, cells, err = _matrix(capsys, "jax[cuda]>=0.11")
    assert code == 0, err
    # 0.12.1 has a cuda13 plugin only (jax.toml); the newest 0.12 with a cuda12 one is 0.12.0.1
    assert [(c["id"], c["spec"], c["cuda"]) for c in cells] == [
        ("jax0.11.2-py3.12-cuda13", "jax[cuda13]==0.11.2", "13.0"),
        ("jax0.11.2-py3.12-cuda12", "jax[cuda12]==0.11.2", "12.1"),
        ("jax0.12.1-py3.12-cuda13", "jax[cuda13]==0.12.1", "13.0"),
        ("jax0.12.0.1-py3.12-cuda12", "jax[cuda12]==0.12.0.1", "12.1"),
    ]
    code, cells, err = _matrix(capsys, "jax[cuda12]>=0.11")
    assert code == 0, err
    assert [c["build"] for c in cells] == ["cuda12", "cuda12"]


def test_python_all_gives_every_python_of_each_build(capsys: pytest.CaptureFixture[str]) -> None:
    code, cells, err = _matrix(capsys, "torch==2.11", "--python", "all")
    assert code == 0, err
    row = next(b for b in builds.load("torch").builds if str(b.version) == "2.11.0")
    pythons = list(row.python)
    assert [c["id"] for c in cells if c["build"] == "cu130"] == [
        f"torch2.11.0-py{p}-cu130" for p in pythons
    ]
    assert sorted({c["build"] for c in cells}) == ["cu126", "cu128", "cu130"]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["torch==2.11", "--cuda-source", "system"], "torch builds bring their CUDA as nvidia-*"),
        (["jax[cuda13]==0.11.2", "--python", "3.9"], "impossible cells: jax[cuda13]==0.11.2"),
        (["torch>=9"], "torch"),
    ],
)
def test_what_does_not_exist_is_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    code, out, err = _matrix(capsys, *argv)
    assert (code, out) == (2, "")
    assert needle in err and "Traceback" not in err


@pytest.mark.network
def test_ci_lock_of_a_torch_range_locks_the_configured_indexs_builds(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "cells"
    # exit 1: the cu128/cu126 cells are on PyTorch's own index, which is not configured here
    assert main(["ci", "lock", "torch==2.11", "-o", str(out), "--json"]) == 1
    captured = capsys.readouterr()
    index = json.loads((out / "cells.json").read_text(encoding="utf-8"))
    status = {c["id"]: (c["status"], c["index"]) for c in index["cells"]}
    assert status == {
        "torch2.11.0-py3.12-cu130": ("locked", "default"),
        "torch2.11.0-py3.12-cu128": ("failed", "pytorch"),
        "torch2.11.0-py3.12-cu126": ("failed", "pytorch"),
    }
    for cell in index["cells"]:
        if cell["status"] == "failed":
            assert "is a build on PyTorch's own index" in cell["error"], cell["error"]
            assert not (out / cell["id"]).exists()  # all-or-nothing per cell
    assert "torch2.11.0-py3.12-cu128" in captured.err
    # the locked cell is the bundle `envlock lock torch==2.11.0 --cuda 13.0` writes
    pylock = (out / "torch2.11.0-py3.12-cu130" / "requirements.txt").read_text(encoding="utf-8")
    assert "torch==2.11.0 \\\n" in pylock and "nvidia-cudnn-cu13==9.19.0.56" in pylock
    bake = json.loads((out / "docker-bake.json").read_text(encoding="utf-8"))
    assert list(bake["target"]) == ["torch2_11_0-py3_12-cu130"]

    # --check: the locked cell is current; the failed ones are still to be locked
    assert main(["ci", "lock", "--check", str(out), "--json"]) == 1
    checked = {c["id"]: c["state"] for c in json.loads(capsys.readouterr().out)["cells"]}
    assert checked == {
        "torch2.11.0-py3.12-cu130": "current",
        "torch2.11.0-py3.12-cu128": "new",
        "torch2.11.0-py3.12-cu126": "new",
    }
    # ci matrix --from lists the locked cell with its build and index
    assert main(["ci", "matrix", "--from", str(out)]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(c["id"], c["build"], c["index"]) for c in listed] == [
        ("torch2.11.0-py3.12-cu130", "cu130", "default")
    ]


@pytest.mark.network
def test_ci_lock_of_a_jax_range_and_check(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "cells"
    assert main(["ci", "lock", "jax[cuda]>=0.11,<0.12", "-o", str(out), "--json"]) == 0
    capsys.readouterr()
    index = json.loads((out / "cells.json").read_text(encoding="utf-8"))
    assert [(c["id"], c["status"]) for c in index["cells"]] == [
        ("jax0.11.2-py3.12-cuda13", "locked"),
        ("jax0.11.2-py3.12-cuda12", "locked"),
    ]
    for major in ("12", "13"):
        text = (out / f"jax0.11.2-py3.12-cuda{major}" / "requirements.txt").read_text(
            encoding="utf-8"
        )
        assert f"jax-cuda{major}-plugin==0.11.2 \\\n" in text
        other = "13" if major == "12" else "12"
        assert f"jax-cuda{other}-plugin" not in text
    assert main(["ci", "lock", "--check", str(out)]) == 0
    assert "are current" in capsys.readouterr().err
