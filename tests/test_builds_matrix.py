"""matrices/torch.toml and jax.toml (issue 43): what the shipped rows say, the
validator's refusals, and the SPECs and environments resolve takes for them."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import pytest

from envlock import resources
from envlock.errors import DataError, NoResolution, UsageError
from envlock.matrix import builds
from envlock.model import Constraints
from envlock.resolve import resolve
from envlock.resolve.together import clashes, resolve_together

REPO = Path(__file__).resolve().parents[1]

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def _doc(project: str) -> dict[str, Any]:
    return tomllib.loads(resources.read_bytes("matrices", f"{project}.toml").decode())


def test_the_shipped_files_are_what_dumps_writes() -> None:
    for project in builds.PROJECTS:
        text = resources.read_bytes("matrices", f"{project}.toml").decode()
        assert builds.dumps(builds.load(project)) == text


def test_torch_2_11_on_the_index_is_the_cuda_13_0_build_its_wheel_states() -> None:
    rows = {(str(b.version), b.build): b for b in builds.load("torch").builds}
    b = rows[("2.11.0", "cu130")]
    assert (b.index, b.cuda, b.cuda_full, b.cudnn_full, b.nccl) == (
        "default",
        "13.0",
        "13.0.2",
        "9.19.0.56",
        "2.28.9",
    )
    assert "nvidia-cudnn-cu13==9.19.0.56" in b.requires
    # its wheel names no sm targets; the ones torch.cuda.get_arch_list() reported on the
    # GPU machine (docs/gpu-run/issue40-43/torch-jax-facts.txt) are written in by refresh
    assert b.compute_capabilities == ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")
    assert b.compute_capabilities_from == "gpu-machine"
    assert b.sources == ("read-index", "gpu-machine-2026-12-06")
    facts = REPO / "docs/gpu-run/issue40-43/torch-jax-facts.txt"
    assert f"arch_list {list(b.compute_capabilities)!r}" in facts.read_text(encoding="utf-8")
    # every other torch build's targets stay unknown: nothing read, nothing guessed
    others = [r for k, r in rows.items() if k != ("2.11.0", "cu130")]
    assert {(r.compute_capabilities, r.compute_capabilities_from) for r in others} <= {
        ((), "unknown")
    }
    # the cu128 build of 2.11 is PyTorch's own, from its published table
    pub = rows[("2.11.0", "cu128")]
    assert (pub.index, pub.cudnn_full, pub.sources) == (
        "pytorch",
        "9.17.1.4",
        ("pytorch-release-matrix",),
    )
    assert pub.wheel == "" and pub.sha256 == ""


def test_jax_rows_are_the_plugins_with_cuda_floors() -> None:
    rows = {(str(b.version), b.build): b for b in builds.load("jax").builds}
    b = rows[("0.11.2", "cuda13")]
    assert (b.cuda, b.cuda_from, b.cudnn_full) == ("13.0", "with-cuda-minimum", "9.12.0.46")
    assert "jax-cuda13-pjrt==0.11.2" in b.requires
    assert ("0.12.1", "cuda12") not in rows  # no jax-cuda12-plugin 0.12.1 on the index


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r.update(build="cu128"), 'builds[0].build: "cu128" does not name CUDA 13'),
        (lambda r: r.update(cuda_full="12.8"), 'does not start with cuda "13.0"'),
        (lambda r: r.update({"from": ["nowhere"]}), '"nowhere" is not a key of [sources]'),
        (lambda r: r.update(requires=["nvidia-x; extra == 'y'"]), "markers are stripped"),
        (lambda r: r.update(wheel="../x.whl"), "a file name, not a path"),
        (lambda r: r.update(version="2.11.0+cu130"), "expected a release in canonical form"),
    ],
)
def test_a_bad_row_is_refused_naming_the_place(edit: Any, message: str) -> None:
    doc = copy.deepcopy(_doc("torch"))
    doc["builds"] = [r for r in doc["builds"] if r["version"] == "2.11.0" and r["build"] == "cu130"]
    edit(doc["builds"][0])
    with pytest.raises(DataError) as e:
        builds.parse(doc, "torch.toml")
    assert message in e.value.message and e.value.message.startswith("torch.toml: builds[0]")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("jax==0.11.2", "is JAX without a CUDA extra: the CPU build"),
        ("jax[cuda12-local]", "envlock resolves JAX's pip CUDA builds"),
        ("torch[cuda]==2.11", "a torch build brings its CUDA wheels without one"),
    ],
)
def test_specs_resolve_refuses(spec: str, message: str) -> None:
    with pytest.raises(UsageError) as e:
        resolve(Constraints(spec=spec))
    assert message in e.value.message


def test_torch_refuses_the_system_cuda_source() -> None:
    with pytest.raises(UsageError) as e:
        resolve(Constraints(spec="torch==2.11", cuda_source="system"))
    assert "--cuda-source system does not apply to torch" in e.value.message


def test_an_environment_shares_one_cuda_major_python_and_image() -> None:
    res = resolve_together(
        Constraints(spec="tensorflow==2.20", driver="535.104.05"),
        ["tensorflow==2.20", "torch==2.11"],
        resolve,
    )
    (torch,) = res.together
    assert (res.framework, torch.framework, torch.version) == (
        "tensorflow",
        "torch",
        "2.11.0+cu128",
    )
    assert res.cuda.split(".")[0] == torch.cuda.split(".")[0] == "12"
    assert res.python == torch.python
    assert res.base_image == torch.base_image
    assert clashes(res, torch) == []  # torch's cudnn 9.17.1.4 pin is inside tf's >=9.3.0.75,<10


def test_exact_pins_that_exclude_each_other_clash() -> None:
    a = resolve(Constraints(spec="torch==2.9"))
    b = resolve(Constraints(spec="torch==2.11", driver="535.104.05"))
    assert clashes(a, b) == [
        "torch 2.9.1 needs nvidia-cudnn-cu12==9.10.2.21, "
        "torch 2.11.0+cu128 needs nvidia-cudnn-cu12==9.17.1.4",
        "torch 2.9.1 needs nvidia-nccl-cu12==2.27.5, "
        "torch 2.11.0+cu128 needs nvidia-nccl-cu12==2.28.9",
    ]


def test_no_common_cuda_major_is_no_resolution_with_ways_out() -> None:
    with pytest.raises(NoResolution) as e:
        resolve_together(
            Constraints(spec="tensorflow==2.20"), ["tensorflow==2.20", "jax[cuda13]"], resolve
        )
    assert "tensorflow 2.20.0 is a CUDA 12 build" in e.value.message
    assert "jax[cuda12]==" in (e.value.hint or "")


def test_a_build_only_pytorchs_index_has_says_where_it_is() -> None:
    """uv's answer when the configured index lacks torch 2.11.0+cu128
    (the build resolve takes for driver 535 from PyTorch's published table), as uv 0.13.9
    printed it here."""
    from envlock.errors import NoResolution
    from envlock.lock.conflicts import explain

    output = (
        "  × No solution found when resolving dependencies:\n"
        "  ╰─▶ Because there is no version of torch==2.11.0+cu128 and you require "
        "torch==2.11.0+cu128, we can conclude that your requirements are unsatisfiable.\n"
    )
    err = explain(
        output,
        resolver="uv",
        framework="torch",
        framework_version="2.11.0+cu128",
        user_requirements=[],
        target="CPython 3.12, Linux x86_64, manylinux_2_39_x86_64",
    )
    assert isinstance(err, NoResolution)
    assert err.message.startswith(
        "no release on the index satisfies torch==2.11.0+cu128 for CPython 3.12"
    )
    assert err.hint == (
        "torch 2.11.0+cu128 is a build on PyTorch's own index, which the configured index "
        "does not carry: give that index, --index pytorch=URL --route '+cu128=pytorch' "
        "(docs/indexes.md), or lock for a driver that runs the configured index's build "
        "(envlock resolve torch==2.11 names its CUDA and driver floor)"
    )
    # the flags it names are lock's (and ci lock's), as written
    from envlock.cli import build_parser

    flags = ["--index", "pytorch=http://127.0.0.1:9/simple", "--route", "+cu128=pytorch"]
    for argv in (["lock", "torch==2.11"], ["ci", "lock", "torch>=2.11,<2.12"]):
        args = build_parser().parse_args([*argv, *flags, "-o", "D"])
        assert (args.indexes, args.routes) == ([flags[1]], [flags[3]])


def test_refresh_writes_the_arch_lists_into_the_rows_they_name() -> None:
    """matrix refresh applies matrices/arch-lists.toml to the rows it read from the
    index: the shipped torch.toml is what that gives for its 2.11.0 cu130 row, and a
    row the table does not name is left as read."""
    from dataclasses import replace

    from envlock.matrix import archlists

    table = archlists.load()
    shipped = builds.load("torch")
    row = next(b for b in shipped.builds if (str(b.version), b.build) == ("2.11.0", "cu130"))
    as_read = replace(
        row,
        compute_capabilities=(),
        compute_capabilities_from="unknown",
        sources=("read-index",),
        note="compute_capabilities: unknown: the wheel's compiled sm targets are inside "
        "libtorch_cuda.so and no text member of the wheel names them",
    )
    other = next(b for b in shipped.builds if (str(b.version), b.build) == ("2.10.0", "cu128"))
    rows, used = archlists.applied([as_read, other], table)
    assert rows == [row, other]
    assert used == [(k, t) for k, t in shipped.sources if k == "gpu-machine-2026-12-06"]
    archlists.check_known(table, shipped.builds)


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda d: d["arch_lists"][0].update(compute_capabilities=[]), "name at least one"),
        (lambda d: d["arch_lists"][0].update(compute_capabilities=["90"]), "sm_XY or compute"),
        (lambda d: d["arch_lists"][0].update(build="cuda-13"), "cuXYZ or cudaNN"),
        (lambda d: d["arch_lists"][0].update(**{"from": "nowhere"}), "not a key of [sources]"),
        (lambda d: d["arch_lists"].append(dict(d["arch_lists"][0])), "project+version+build"),
    ],
)
def test_a_damaged_arch_list_is_one_data_error(edit: Any, said: str) -> None:
    from envlock.matrix import archlists, read_toml

    doc, _, shown = read_toml(archlists.FILE)
    edit(doc)
    with pytest.raises(DataError) as e:
        archlists.parse(doc, shown)
    assert said in e.value.message


def test_an_arch_list_for_a_build_the_matrix_lacks_is_named() -> None:
    from dataclasses import replace

    from envlock.matrix import archlists

    table = archlists.load()
    typo = replace(table, rows=(replace(table.rows[0], build="cu131"),))
    with pytest.raises(DataError, match="torch 2.11.0 cu131: no such build in torch.toml"):
        archlists.check_known(typo, builds.load("torch").builds)
