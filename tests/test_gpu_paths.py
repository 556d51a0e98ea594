"""A verdict per execution path (issue #26): envlock.resolve.paths against the
sourced table tests/cases/gpu-paths.toml (5 TensorFlow releases x 7 GPUs),
resolve's whole output for a few of them (tests/cases/gpu-paths/<name>.txt,
refreshed only with ENVLOCK_UPDATE_GOLDEN=1), matrices/paths.toml's checks,
and the smoke side: the verdicts for what the harness saw on the H200.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envlock.errors import DataError
from envlock.matrix import libraries, load_cuda, load_gpus
from envlock.matrix import paths as paths_mod
from envlock.model import Constraints, Gpu
from envlock.readers import parse_toml
from envlock.resolve import load_matrix, resolve
from envlock.resolve.paths import (
    STATUSES,
    Build,
    Tools,
    execution_paths,
    for_resolution,
    for_smoke,
)

REPO = Path(__file__).resolve().parent.parent
CASES = REPO / "tests" / "cases"
TABLE = parse_toml((CASES / "gpu-paths.toml").read_text(encoding="utf-8"), "gpu-paths.toml")
GOLDEN = CASES / "gpu-paths"
GOLDEN_CASES: list[dict[str, object]] = json.loads(
    (GOLDEN / "cases.json").read_text(encoding="utf-8")
)
UPDATE = os.environ.get("ENVLOCK_UPDATE_GOLDEN") == "1"
COLUMNS = {"kernels": "kernels", "ptx-jit": "ptx_jit", "xla": "xla", "cudnn": "cudnn"}


def test_the_table_is_every_release_by_every_gpu_with_sources() -> None:
    rows = TABLE["cases"]
    releases = {r["release"] for r in rows}
    gpus = {r["gpu"] for r in rows}
    # at least the GPUs and releases it was written for (a GPU of each architecture,
    # Pascal to consumer Blackwell); another GPU or release is a data change: its rows
    assert gpus >= {"P100", "V100", "T4", "A100", "H100", "B200", "RTX 5090"}
    assert releases >= {"2.15.1", "2.17.1", "2.18.1", "2.20.0", "2.21.0"}
    # the whole grid, each pair once
    pairs = [(r["release"], r["gpu"]) for r in rows]
    assert sorted(pairs) == sorted(itertools.product(releases, gpus))
    for row in rows:
        assert row["from"], row
        assert set(row["from"]) <= set(TABLE["sources"]), row
        assert row["basis"] in ("derived", "reported")
        assert {row[c] for c in COLUMNS.values()} <= set(STATUSES)


@pytest.fixture(scope="module")
def verdicts() -> dict[tuple[str, str], dict[str, str]]:
    """resolve + the path verdicts for each table row (pip CUDA, no driver)."""
    matrix = load_matrix()
    out: dict[tuple[str, str], dict[str, str]] = {}
    for release in sorted({r["release"] for r in TABLE["cases"]}):
        gpus = [r["gpu"] for r in TABLE["cases"] if r["release"] == release]
        c = Constraints(
            spec=f"tensorflow=={release}",
            cuda_source="pip",
            gpus=tuple(Gpu(g) for g in gpus),
        )
        res = resolve(c, matrix)
        assert res.version == release
        for gp in for_resolution(res, c, matrix):
            out[(release, gp.gpu)] = {p.path: p.status for p in gp.paths}
    return out


@pytest.mark.parametrize(
    "row", TABLE["cases"], ids=[f"{r['release']}-{r['gpu']}" for r in TABLE["cases"]]
)
def test_verdicts_match_the_sourced_table(
    row: dict[str, str], verdicts: dict[tuple[str, str], dict[str, str]]
) -> None:
    got = verdicts[(row["release"], row["gpu"])]
    assert got == {path: row[column] for path, column in COLUMNS.items()}


def test_blackwell_under_tf_2_21_cannot_run_xla_and_says_how_to_turn_it_off() -> None:
    matrix = load_matrix()
    c = Constraints(spec="tensorflow==2.21", gpus=(Gpu("RTX 5090"),))
    res = resolve(c, matrix)
    (gp,) = for_resolution(res, c, matrix)
    xla = next(p for p in gp.paths if p.path == "xla")
    assert (gp.compute_capability, xla.status) == ("12.0", "cannot")
    assert "sm_120 needs PTX ISA 8.7 (CUDA 12.8)" in xla.why
    assert "jit_compile=False" in xla.fix
    assert "https://github.com/tensorflow/tensorflow/issues/111958" in xla.sources
    jit = next(p for p in gp.paths if p.path == "ptx-jit")
    assert jit.status == "cannot"
    assert "https://github.com/tensorflow/tensorflow/issues/101746" in jit.sources


def test_blackwell_names_and_capabilities() -> None:
    gm = load_gpus()
    expected = {
        "B200": ("10.0", "datacenter"),
        "GB200": ("10.0", "datacenter"),
        "RTX 5090": ("12.0", "geforce"),
        "RTX 5080": ("12.0", "geforce"),
        "RTX 5070 Ti": ("12.0", "geforce"),
        "RTX 5070": ("12.0", "geforce"),
        "NVIDIA GeForce RTX 5090": ("12.0", "geforce"),
        "RTX PRO 6000": ("12.0", "workstation"),
        "NVIDIA RTX PRO 6000 Blackwell Server Edition": ("12.0", "workstation"),
    }
    for name, want in expected.items():
        entry = gm.lookup(name)
        assert entry is not None, name
        assert (entry.compute_capability, entry.market) == want, name
    b200 = gm.find("NVIDIA B200")
    assert b200 is not None and (b200.sm, b200.bf16_tflops) == (100, 2250.0)


def _driver_case(driver: str) -> dict[str, str]:
    build = Build(
        "tensorflow", "2.15.1", "12.2", ("sm_50", "sm_60", "sm_70", "sm_75", "compute_80")
    )
    gp = execution_paths(
        build,
        Gpu("A100", compute_capability="8.0"),
        Tools(cuda_source="pip", ptxas="12.2.140", cudnn="8.9.4.25", driver=driver),
        load_cuda(),
        paths_mod.load(),
        libraries.load(),
    )
    return {p.path: f"{p.status}|{p.fix}" for p in gp.paths}


def test_the_ptx_jit_floor_is_the_shared_host_floor() -> None:
    from envlock.resolve.floors import host_floor

    matrix = load_matrix()
    release = next(r for r in matrix.tensorflow.releases if str(r.version) == "2.15.1")
    floor = host_floor(release, matrix.cuda, [Gpu("A100", compute_capability="8.0")])
    assert floor is not None and floor.driver == "535.54.03"
    below = _driver_case("530.30.02")
    assert below["ptx-jit"].startswith("needs|upgrade the NVIDIA driver to 535.54.03 or newer")
    assert _driver_case("535.54.03")["ptx-jit"] == "works|"


def test_a_pinned_cudnn_that_dropped_the_gpu_needs_the_capped_lock() -> None:
    build = Build(
        "tensorflow", "2.21.0", "12.5", ("sm_60", "sm_70", "sm_80", "sm_89", "compute_90")
    )
    gp = execution_paths(
        build,
        Gpu("V100", compute_capability="7.0"),
        Tools(
            cuda_source="pip", ptxas="12.9.86", cudnn="9.28.0.42", lock_spec="tensorflow==2.21.0"
        ),
        load_cuda(),
        paths_mod.load(),
        libraries.load(),
    )
    cudnn = next(p for p in gp.paths if p.path == "cudnn")
    assert cudnn.status == "needs"
    assert cudnn.fix == "envlock lock 'tensorflow[and-cuda]==2.21.0' --gpu V100 -o env"
    assert cudnn.why.endswith("a lock for this GPU takes nvidia-cudnn-cu12<9.11")
    assert "https://github.com/conda-forge/tensorflow-feedstock/pull/457" in cudnn.sources


def test_the_smoke_side_judges_what_the_harness_saw_on_the_h200() -> None:
    """The facts the harness recorded on the H200 (docs/gpu-run, 2026-12-04) give
    the verdicts the run printed."""
    for name, expected in (
        ("h200-paths-torch.json", ["works", "unused", "unused", "works"]),
        ("h200-paths-jax.json", ["unknown", "unknown", "works", "works"]),
    ):
        result = json.loads((REPO / "docs" / "gpu-run" / name).read_text(encoding="utf-8"))
        judged = for_smoke(result, load_cuda(), paths_mod.load(), libraries.load())
        assert [p.status for p in judged[0].paths] == expected
        # the run's own section (its wording then) says the same per path
        recorded = [(p["path"], p["status"]) for p in result["paths"][0]["paths"]]
        assert recorded == [(p.path, p.status) for p in judged[0].paths]


def test_paths_toml_damage_names_file_and_place() -> None:
    doc = parse_toml(
        (REPO / "envlock" / "data" / "matrices" / "paths.toml").read_text(encoding="utf-8"),
        "paths.toml",
    )
    doc["archs"][0]["from"] = ["nowhere"]
    with pytest.raises(DataError) as err:
        paths_mod.parse(doc, "matrices/paths.toml")
    assert err.value.message == (
        "matrices/paths.toml: archs[0].from[0]: 'nowhere' is not a key of [sources]"
    )
    doc = parse_toml(
        (REPO / "envlock" / "data" / "matrices" / "paths.toml").read_text(encoding="utf-8"),
        "paths.toml",
    )
    doc["failures"][0]["path"] = "cuda"
    with pytest.raises(DataError) as err:
        paths_mod.parse(doc, "matrices/paths.toml")
    assert err.value.message.startswith("matrices/paths.toml: failures[0].path: ")


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    cache = tmp_path_factory.mktemp("cache")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENVLOCK_", "PYTHON"))}
    env.update(ENVLOCK_CACHE_DIR=str(cache), COLUMNS="80", LC_ALL="C.UTF-8")
    out: dict[str, bytes] = {}
    for case in GOLDEN_CASES:
        args = [str(a) for a in case["args"]]  # type: ignore[attr-defined]
        proc = subprocess.run(
            [sys.executable, "-m", "envlock", "resolve", *args],
            capture_output=True,
            cwd=REPO,
            env=env,
            timeout=120,
            check=False,
        )
        out[str(case["name"])] = b"exit %d\n--- stdout\n%s--- stderr\n%s" % (
            proc.returncode,
            proc.stdout,
            proc.stderr,
        )
    return out


@pytest.mark.parametrize("name", [str(c["name"]) for c in GOLDEN_CASES])
def test_resolve_output_matches_golden(name: str, outputs: dict[str, bytes]) -> None:
    path = GOLDEN / f"{name}.txt"
    if UPDATE:
        path.write_bytes(outputs[name])
    assert path.is_file(), f"{path} missing: run with ENVLOCK_UPDATE_GOLDEN=1 and review the diff"
    assert outputs[name] == path.read_bytes()


def test_no_stale_golden_files() -> None:
    assert {p.stem for p in GOLDEN.glob("*.txt")} == {str(c["name"]) for c in GOLDEN_CASES}


def _doctor_findings(gpu: str, capability: str, driver: str, dists: dict[str, str]) -> list[str]:
    from envlock.doctor.advice import Context
    from envlock.doctor.gpu_findings import check_paths
    from envlock.doctor.runner import _paths
    from envlock.driver import HostGpu, HostInfo

    expected = resolve(Constraints(spec="tensorflow==2.21.0", cuda_source="pip"))
    host = HostInfo(driver, None, (HostGpu(gpu, capability, "geforce"),), "NVML")
    probe = {"distributions": [{"name": n, "version": v} for n, v in dists.items()]}
    paths = _paths(expected, host, probe, "/srv/venv/bin/python")
    ctx = Context(None, None, expected, host, "", python="/srv/venv/bin/python", paths=paths)
    return [f"{f.check}|{f.status}|{f.fix}" for f in check_paths(ctx)]


def test_doctor_judges_the_installed_ptxas_and_cudnn_with_the_same_function() -> None:
    wheels = {"nvidia-cuda-nvcc-cu12": "12.9.86", "nvidia-cudnn-cu12": "9.28.0.42"}
    got = _doctor_findings("NVIDIA GeForce RTX 5090", "12.0", "580.65.06", wheels)
    assert got[0] == "path kernels (gpu 0)|FAIL|"
    assert got[1] == "path ptx-jit (gpu 0)|FAIL|"
    assert got[2].startswith("path xla (gpu 0)|WARN|turn XLA off for this GPU")
    assert got[3] == "path cudnn (gpu 0)|PASS|"


def test_doctor_fix_installs_into_the_inspected_interpreter() -> None:
    # an RTX 4090 (8.9: SASS) whose cuDNN is the one TF 2.21 breaks XLA's conv autotuning with
    wheels = {"nvidia-cuda-nvcc-cu12": "12.5.82", "nvidia-cudnn-cu12": "9.5.1.17"}
    got = _doctor_findings("NVIDIA GeForce RTX 4090", "8.9", "580.65.06", wheels)
    assert got == [
        "path kernels (gpu 0)|PASS|",
        "path ptx-jit (gpu 0)|INFO|",
        "path xla (gpu 0)|PASS|",
        "path cudnn (gpu 0)|FAIL|"
        "/srv/venv/bin/python -m pip install 'nvidia-cudnn-cu12>=9.24.0.43'",
    ]


def test_smoke_report_shows_the_paths_section(monkeypatch: pytest.MonkeyPatch) -> None:
    from envlock.smoke.text import describe
    from envlock.smoke.text import paths_for as _paths

    monkeypatch.setenv("COLUMNS", "100")
    result = json.loads((REPO / "docs" / "gpu-run" / "h200-paths-jax.json").read_text("utf-8"))
    result["paths"] = _paths(result)
    text = describe(result)
    section = text[text.index("paths on NVIDIA H200 (compute capability 9.0):") :]
    rows = [line.split()[:2] for line in section.splitlines()[3:] if line[:1].isalpha()]
    assert rows[:4] == [
        ["kernels", "unknown"],
        ["ptx-jit", "unknown"],
        ["xla", "works"],
        ["cudnn", "works"],
    ]
