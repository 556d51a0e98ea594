"""One request from the command line to the lock's recorded input and back.

``envlock lock`` and ``envlock ci lock`` make a ``LockRequest`` holding resolve's
``Constraints`` as asked; the lock records them (``[tool.envlock.input]``,
schema 2) and ``lock --check`` resolves again from what it reads, without argv.
The property tests draw option sets and round-trip them (no resolver runs); the
old-format bundles under tests/fixtures/old-bundles/ were written by envlock
before schema 2 (the lock and ci lock of that code, against the fake index at a
fixed loopback address) and must still read and check as current.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from index_support import index_now

from envlock.bundle.folder import LockedFolder, LockRequest, lock_input
from envlock.ci.cells import expand
from envlock.ci.lockcells import lock_cells
from envlock.cli import build_parser, main
from envlock.commands.resolve import constraints_from_args
from envlock.lock import read_lock
from envlock.lock.core import check_requirements
from envlock.lock.pylock import parse_pylock, pylock_text, regenerate_command, resolve_argv
from envlock.model import Constraints, Lock, LockInput, Resolution
from envlock.readers import parse_toml
from envlock.resolve import load_matrix

FIXTURES = Path(__file__).parent / "fixtures" / "old-bundles"
OLD_INDEX = ("127.0.0.251", 18751)  # where the old bundles' index was: their URLs name it

SPECS = ("tensorflow==2.15", "tensorflow>=2.14,<2.17", "tensorflow~=2.13.0", "tensorflow")
GPU_VALUES = ("T4", "A100", "RTX 3090", "H100", "V100", "8.6", "sm_90", "9.0", "compute_75")
OSES = ("ubuntu20.04", "ubuntu22.04", "ubuntu24.04")


def parse(argv: list[str]) -> argparse.Namespace:
    args: argparse.Namespace = build_parser(argv).parse_args(argv)
    return args


@st.composite
def lock_argv(draw: st.DrawFn) -> list[str]:
    """A valid `envlock lock` command line (values of the right shape; whether
    anything resolves does not matter here)."""
    argv = ["lock", draw(st.sampled_from(SPECS))]
    options: list[tuple[str, st.SearchStrategy[str]]] = [
        ("--python", st.sampled_from(("3.8", "3.9", "3.10", "3.11", "3.12"))),
        ("--cuda", st.sampled_from(("11.8", "12", "12.2", "12.3"))),
        ("--cudnn", st.sampled_from(("8", "8.6", "8.9", "9.1"))),
        ("--driver", st.sampled_from(("470.82.01", "525.60.13", "535.104.05", "550"))),
        ("--os", st.sampled_from(OSES)),
        ("--cuda-source", st.sampled_from(("system", "pip"))),
        ("--exclude-newer", st.sampled_from(("2024-03-10", "2025-01-01T12:30:00Z"))),
    ]
    for flag, values in options:
        if draw(st.booleans()):
            argv += [flag, draw(values)]
    for gpu in draw(st.lists(st.sampled_from(GPU_VALUES), max_size=3)):
        argv += ["--gpu", gpu]
    for pin in draw(st.lists(st.sampled_from(("numpy==1.26.4", "h5py>=3.9,<3.11")), max_size=2)):
        argv += ["--with", pin]
    if draw(st.booleans()):
        argv += ["--resolver", "pip"]
    if draw(st.booleans()):
        argv += ["--index-url", "http://127.0.0.1:9/simple"]
    return [*argv, "-o", "D"]


def a_resolution(constraints: Constraints) -> Resolution:
    """A stand-in resolution (lock_input reads it only for -r freeze files)."""
    return Resolution.from_dict(
        {
            "framework": "tensorflow",
            "version": "2.15.1",
            "python": constraints.python or "3.10",
            "python_supported": ["3.9", "3.10", "3.11"],
            "cuda": "12.2",
            "cudnn": "8.9",
            "driver_min": "525.60.13",
            "compute_capabilities": ["sm_80", "compute_80"],
            "cuda_source": constraints.cuda_source or "system",
            "os": "ubuntu22.04",
            "base_image": "nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04",
            "base_image_digest": None,
            "cuda_image_version": "12.2.2",
            "image_cudnn": None,
            "and_cuda": [],
            "requires_python": ">=3.9",
            "matrix_version": "2026-11-30",
            "matrix_digest": "0" * 64,
        }
    )


def recorded(inp: LockInput, resolution: Resolution) -> LockInput:
    """``inp`` written into a pylock.toml and read back (the whole file, through TOML)."""
    text = pylock_text(Lock(resolution, inp, (), "uv", "0.9.0", ("tensorflow==2.15.1",)))
    back = parse_pylock(text, "pylock.toml").input
    # and the table itself is plain TOML data that survives a dump and a parse
    table = parse_toml(text, "pylock.toml")["tool"]["envlock"]["input"]
    assert parse_toml(tomli_w.dumps(table), "again") == table
    return back


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lock_argv())
def test_a_lock_request_round_trips_through_the_recorded_input(argv: list[str]) -> None:
    args = parse(argv)
    constraints = constraints_from_args(args)
    request = LockRequest(
        constraints=constraints,
        output=Path(args.output),
        with_requirements=tuple(args.with_requirements),
        index_url=args.index_url,
    )
    resolution = a_resolution(constraints)
    inp = lock_input(request, resolution)
    assert inp.constraints is constraints  # the same object, not a copy field by field
    back = recorded(inp, resolution)
    assert back == inp and back.constraints == constraints
    assert back.legacy is None
    # the Regenerate line is the command again: parsed, the same constraints
    line = regenerate_command(Lock(resolution, back, (), args.resolver or "uv", "0.9.0"), "D")
    again = parse(shlex.split(line)[1:])
    assert constraints_from_args(again) == constraints
    assert check_requirements(again.with_requirements) == back.with_requirements
    assert (again.resolver or "uv") == (args.resolver or "uv")


CI_CASES = [
    ("tensorflow>=2.14,<2.17", None, None),
    ("tensorflow>=2.14,<2.17", "3.10,3.11", None),
    ("tensorflow>=2.12,<2.16", "all", None),
    ("tensorflow>=2.14,<2.16", None, "system,pip"),
    ("tensorflow==2.15", "3.11", "pip"),
]


@pytest.fixture(scope="module")
def matrix() -> Any:
    return load_matrix()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.sampled_from(CI_CASES), pins=st.lists(st.sampled_from(("numpy==1.26.4",)), max_size=1)
)
def test_a_ci_cell_is_the_lock_command_its_regenerate_line_names(
    case: tuple[str, str | None, str | None], pins: list[str], matrix: Any
) -> None:
    """Each cell's request, recorded and read back, is the request `envlock lock`
    makes from the cell's own Regenerate line: defaults stay resolve's, listed
    Pythons and sources are asked for."""
    from envlock.ci.cells import parse_pythons, parse_sources

    spec, pythons, sources = case
    cells = expand(spec, parse_pythons(pythons), parse_sources(sources), matrix=matrix).cells
    seen: dict[str, LockRequest] = {}

    def capture(request: LockRequest, resolution: Any, progress: Any) -> LockedFolder:
        seen[request.output.name] = request
        raise RuntimeError("no lock in this test")  # the cell fails; the request is kept

    template = LockRequest(Constraints(), Path("C"), with_requirements=tuple(pins))
    lock_cells(cells, Path("C"), template, jobs=2, lock_one=capture)
    assert set(seen) == {c.id for c in cells}
    for cell in cells:
        request = seen[cell.id]
        inp = lock_input(request, cell.resolution)
        back = recorded(inp, cell.resolution)
        line = regenerate_command(Lock(cell.resolution, back, (), "uv", "0.9.0"), "D")
        argv = shlex.split(line)[1:]
        assert argv[:2] == ["lock", cell.spec]
        assert ("--python" in argv) == (pythons is not None)
        assert ("--cuda-source" in argv) == (sources is not None)
        assert constraints_from_args(parse(argv)) == back.constraints == request.constraints
        assert check_requirements(parse(argv).with_requirements) == back.with_requirements


def test_schema_1_reads_what_resolve_chose_as_not_asked() -> None:
    """Before schema 2 a pip fallback was written as cuda_source = "pip" and a
    ci lock cell's default Python as python: the recorded reasons tell them apart."""
    base = a_resolution(Constraints())
    fallback = Resolution.from_dict(
        {
            **base.to_dict(),
            "cuda_source": "pip",
            "warnings": ["CUDA source pip, not system: no image; the nvidia-* wheels ..."],
            "reasons": ["Python 3.10: the newest of 3.9-3.11 (the release's wheels) ..."],
        }
    )
    old = {"spec": "tensorflow==2.16.2", "with_requirements": [], "python": "3.10"}
    inp = LockInput.from_dict({**old, "cuda_source": "pip"}, fallback)
    assert inp.constraints.cuda_source is None and inp.constraints.python is None
    assert inp.to_dict() == {**old, "cuda_source": "pip"}  # written back as it was
    asked = Resolution.from_dict(
        {**fallback.to_dict(), "reasons": ["Python 3.10 as asked (--python); wheels exist ..."]}
    )
    inp = LockInput.from_dict({**old, "spec": "tensorflow[and-cuda]==2.16.2"}, asked)
    assert inp.constraints.python == "3.10"
    assert LockInput.from_dict({**old, "cuda_source": "pip"}).constraints.cuda_source == "pip"
    # schema 2 is read as written
    two = LockInput(Constraints(spec="tensorflow==2.16.2", python="3.10"))
    assert LockInput.from_dict(two.to_dict(), fallback) == two


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ({"spec": 7}, "D/pylock.toml: tool.envlock.input.spec: missing or not a string"),
        (
            {"spec": "tensorflow", "gpus": "A100"},
            "D/pylock.toml: tool.envlock.input.gpus: not a list",
        ),
        (
            {"spec": "tensorflow", "gpus": [{"name": 1}]},
            "D/pylock.toml: tool.envlock.input.gpus[0].name: not a string",
        ),
        (
            {"spec": "tensorflow", "gpus": ["A100"]},
            "D/pylock.toml: tool.envlock.input.gpus[0]: not a table",
        ),
        ({"spec": "tensorflow", "python": 3.1}, "tool.envlock.input.python: a float, not a string"),
        ({"spec": "tensorflow", "schema_version": 9}, "input.schema_version: 9 is not one"),
    ],
)
def test_a_damaged_input_is_a_data_error_naming_it(table: dict[str, Any], problem: str) -> None:
    from envlock.errors import DataError

    text = pylock_text(Lock(a_resolution(Constraints()), LockInput(), (), "uv", "0.9.0"))
    doc = parse_toml(text, "x")
    doc["tool"]["envlock"]["input"] = table
    with pytest.raises(DataError) as e:
        parse_pylock(tomli_w.dumps(doc), "D/pylock.toml")
    assert e.value.exit_code == 2 and problem in e.value.message
    assert e.value.message.startswith("D/pylock.toml: tool.envlock.input.")


@pytest.fixture()
def old_index(make_index: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The fake index the old bundles were locked against, at the same address."""
    idx = make_index(address=OLD_INDEX)
    for tag in ("cp310-cp310", "cp311-cp311"):
        idx.add_dist(
            "tensorflow", "2.14.1", tag=f"{tag}-manylinux_2_17_x86_64", requires=("dep-a>=1",)
        )
    idx.add_dist("dep-a", "1.0")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    yield idx.url


@pytest.mark.parametrize("case", ["v1-lock", "v1-ci-cell"])
def test_an_old_format_bundle_reads_and_checks_as_current(
    case: str, old_index: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = tmp_path / case
    shutil.copytree(FIXTURES / case, bundle)
    before = {p.name: p.read_bytes() for p in bundle.iterdir()}
    lk = read_lock(bundle)
    assert lk.input.legacy is not None and "schema_version" not in lk.input.to_dict()
    if case == "v1-ci-cell":
        # written as python = "3.10" though resolve chose it: read as not asked
        assert parse_toml((bundle / "pylock.toml").read_text(), "x")["tool"]["envlock"]["input"][
            "python"
        ] == ("3.10")
        assert lk.input.constraints.python is None
    assert resolve_argv(lk.input)[0] == "tensorflow==2.14" + (".1" if "ci" in case else "")
    code = main(["lock", "--check", str(bundle)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "the lock is current" in out
    assert {p.name: p.read_bytes() for p in bundle.iterdir()} == before  # nothing written


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    import json

    code = main(list(argv))
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return code, data


@pytest.fixture(scope="module")
def uv_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("UV_CACHE_DIR", str(tmp_path_factory.mktemp("uv-cache")))
        yield


@pytest.mark.network
@pytest.mark.usefixtures("uv_cache")
@pytest.mark.parametrize(
    ("argv", "version", "in_line", "not_in_line"),
    [
        # --gpu narrows what the driver can serve (the PTX JIT floor): recorded, so the
        # check does not drift to a release the GPU cannot run
        (
            ["tensorflow", "--driver", "470.82.01", "--gpu", "RTX 3090"],
            "2.11.1",
            "--driver 470.82.01 --gpu 'RTX 3090'",
            "--python",
        ),
        # no system image fits 2.16.2: resolve falls back to pip, with a warning
        (["tensorflow==2.16.2"], "2.16.2", "envlock lock tensorflow==2.16.2 -o", "--cuda-source"),
    ],
)
def test_a_fresh_lock_checks_as_current(
    argv: list[str],
    version: str,
    in_line: str,
    not_in_line: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "D"
    at = index_now()  # lock and check read the index as of one instant (index_support)
    code, locked = _json(capsys, "lock", *argv, "--exclude-newer", at, "-o", str(out), "--json")
    assert code == 0 and locked["resolution"]["version"] == version
    code, checked = _json(capsys, "lock", "--check", str(out), "--json")
    assert code == 0 and checked["ok"] and checked["changes"] == [], checked["changes"]
    in_line = in_line.replace(" -o", f" --exclude-newer {at} -o")
    assert in_line in checked["regenerate"] and not_in_line not in checked["regenerate"]
    lk = read_lock(out)
    if version == "2.16.2":
        assert lk.resolution.cuda_source == "pip" and lk.input.constraints.cuda_source is None
        assert any(w.startswith("CUDA source pip, not system") for w in lk.resolution.warnings)
    else:
        assert [g.name for g in lk.input.constraints.gpus] == ["RTX 3090"]
    header = (out / "requirements.txt").read_text(encoding="utf-8")
    assert checked["regenerate"].replace(str(out), ".") in header


@pytest.mark.network
@pytest.mark.usefixtures("uv_cache")
def test_every_fresh_ci_lock_cell_checks_as_current(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cells"
    at = index_now()  # lock and check read the index as of one instant (index_support)
    argv = ["ci", "lock", "tensorflow>=2.14,<2.17", "--exclude-newer", at, "-o", str(out)]
    code, result = _json(capsys, *argv, "--json")
    assert code == 0 and len(result["cells"]) == 3
    for cell in result["cells"]:
        folder = out / cell["id"]
        code, checked = _json(capsys, "lock", "--check", str(folder), "--json")
        assert code == 0 and checked["changes"] == [], (cell["id"], checked["changes"])
        # a default cell is `envlock lock <cell spec> -o D` (and the instant it was given)
        assert checked["regenerate"] == (
            f"envlock lock {cell['spec']} --exclude-newer {at} -o {folder}"
        )
