"""Answers follow their own verdicts (issue #40): with GPUs named and no CUDA source
asked for, resolve takes the placement on which every execution path works for
every named GPU, says why the other lost, and exits 1 naming what would run when
no placement of the release runs on a named GPU at all."""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path

import pytest

from envlock.cli import main
from envlock.model import Constraints, Gpu
from envlock.resolve import load_matrix, resolve
from envlock.resolve.chooser import runs, score
from envlock.resolve.paths import for_resolution

MATRIX = load_matrix()


def test_h100_gets_the_placement_on_which_every_path_works() -> None:
    c = Constraints(spec="tensorflow==2.21", gpus=(Gpu("H100"),))
    res = resolve(c, MATRIX)
    (gpu,) = for_resolution(res, c, MATRIX)
    assert res.cuda_source == "pip"
    assert {p.path: p.status for p in gpu.paths} == {
        "kernels": "cannot",  # no sm_90 SASS: the PTX JIT serves it
        "ptx-jit": "works",
        "xla": "works",
        "cudnn": "works",
    }
    assert res.reasons[-1] == (
        "CUDA source pip, not system: with the base image "
        "nvidia/cuda:12.6.3-cudnn-runtime-ubuntu24.04, on H100 xla (needs) and cudnn (needs) "
        "do not work; with the nvidia-* wheels of tensorflow[and-cuda] every path works"
    )


def test_a_source_asked_for_is_kept_with_its_needs() -> None:
    c = Constraints(spec="tensorflow==2.21", gpus=(Gpu("H100"),), cuda_source="system")
    res = resolve(c, MATRIX)
    (gpu,) = for_resolution(res, c, MATRIX)
    assert res.cuda_source == "system"
    assert (gpu.status("xla"), gpu.status("cudnn")) == ("needs", "needs")
    assert not any(r.startswith("CUDA source pip, not system") for r in res.reasons)


def test_without_a_gpu_the_answer_is_as_before() -> None:
    res = resolve(Constraints(spec="tensorflow==2.21"), MATRIX)
    assert res.cuda_source == "system"


@pytest.mark.parametrize("gpu", ["H100", "A100", "RTX 4090", "T4", "L4", "RTX 5090", "V100"])
@pytest.mark.parametrize("spec", ["tensorflow==2.15", "tensorflow==2.18", "tensorflow==2.21"])
def test_the_answer_is_never_worse_than_a_source_asked_for(gpu: str, spec: str) -> None:
    """Of the placements of the same release, the default has the fewest paths that
    do not work (and GPUs the code cannot run on) for the named GPU."""
    c = Constraints(spec=spec, gpus=(Gpu(gpu),))
    chosen = resolve(c, MATRIX)
    mine = score(for_resolution(chosen, c, MATRIX))
    for source in ("system", "pip"):
        asked = replace(c, cuda_source=source)
        try:
            other = resolve(asked, MATRIX)
        except Exception:  # noqa: BLE001 - no placement of that source
            continue
        if other.version == chosen.version:
            assert mine <= score(for_resolution(other, asked, MATRIX)), (gpu, spec, source)


def test_a_gpu_no_placement_runs_on_is_exit_1_with_a_release_that_runs_there(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["resolve", "tensorflow==2.21", "--gpu", "RTX 5090"])
    out, err = capsys.readouterr()
    assert code == 1
    assert "paths on RTX 5090 (compute capability 12.0):" in out  # the verdicts, then why
    lines = err.splitlines()
    assert lines[0] == (
        "envlock: error: tensorflow 2.21.0 runs on no placement on RTX 5090 (12.0): neither "
        "compiled kernels nor the PTX JIT can serve it (the paths above)"
    )
    said, command = lines[1].rsplit(": ", 1)
    assert said == "  hint: tensorflow 2.15.1 runs there"
    argv = shlex.split(command)
    assert argv[:2] == ["envlock", "resolve"]
    # the hint runs as printed, and what it answers runs on the GPU
    assert main(argv[1:]) == 0
    c = Constraints(spec="tensorflow==2.15.1", gpus=(Gpu("RTX 5090"),))
    assert all(runs(g) for g in for_resolution(resolve(c, MATRIX), c, MATRIX))


def test_the_geforce_floor_of_the_image_is_on_the_first_screen(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["resolve", "tensorflow==2.21", "--gpu", "RTX 4090", "--cuda-source", "system"])
    out = capsys.readouterr().out
    assert code == 0
    first = out.split("\n\n")[0]
    assert ">= 525.60.13 on a host venv; >= 560.28.03 in the image for RTX 4090" in " ".join(
        first.split()
    )
    assert "no exception for GeForce" in " ".join(first.split())


def test_lock_for_a_gpu_no_placement_runs_on_is_exit_1_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "env"
    code = main(["lock", "tensorflow==2.21", "--gpu", "RTX 5090", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 1 and not out.exists()
    assert err.splitlines() == [
        "envlock: error: tensorflow 2.21.0 runs on no placement on RTX 5090 (12.0): neither "
        "compiled kernels nor the PTX JIT can serve it (the paths: envlock resolve "
        "tensorflow==2.21 --gpu 'RTX 5090')",
        "  hint: tensorflow 2.15.1 runs there: envlock resolve tensorflow==2.15.1 --gpu 'RTX 5090'",
    ]
