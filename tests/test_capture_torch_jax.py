"""Issue 43: capture takes an environment whose framework is torch or JAX (no TensorFlow).

The freezes are the lines of the render goldens' locks (tests/golden/render/torch2.11-pip,
jax0.11-cuda13: `envlock lock` against the real index), as `pip freeze` prints them on a
machine that installed them; the GPU machine's torch is labelled by PyTorch's own index
(2.11.0+cu130).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from envlock.cli import main
from envlock.venv.capture import capture_freeze

GOLDEN = Path(__file__).parent / "golden" / "render"


def freeze_of(*cases: str, torch: str = "2.11.0") -> str:
    """One pip freeze of the cases' locked distributions (the first case's version of
    a name both hold), torch at ``torch``."""
    seen: dict[str, str] = {}
    for case in cases:
        text = (GOLDEN / case / "requirements.txt").read_text(encoding="utf-8")
        for name, version in re.findall(r"^([a-z0-9_.-]+)==(\S+)", text, re.MULTILINE):
            seen.setdefault(name, version)
    if "torch" in seen:
        seen["torch"] = torch
    return "".join(f"{n}=={v}\n" for n, v in sorted(seen.items()))


def test_a_torch_freeze_is_captured_as_torch_at_its_cuda_build(tmp_path: Path) -> None:
    path = tmp_path / "freeze.txt"
    path.write_text(freeze_of("torch2.11-pip", torch="2.11.0+cu130"))
    captured = capture_freeze(str(path))
    assert (captured.framework, captured.version, captured.cuda) == ("torch", "2.11.0", "13.0")
    assert (captured.spec, captured.cuda_source) == ("torch==2.11.0", "pip")
    assert not any(p.startswith("torch==") for p in captured.pins)
    assert captured.notes[0].startswith("torch 2.11.0+cu130: the CUDA 13.0 build")
    # the configured index's own build has no label: resolve's default build
    path.write_text(freeze_of("torch2.11-pip"))
    assert capture_freeze(str(path)).cuda is None


def test_a_jax_freeze_is_captured_with_its_plugins_extra(tmp_path: Path) -> None:
    path = tmp_path / "freeze.txt"
    path.write_text(freeze_of("jax0.11-cuda13"))
    captured = capture_freeze(str(path))
    assert (captured.framework, captured.spec) == ("jax", "jax[cuda13]==0.11.2")
    assert "jax-cuda13-plugin==0.11.2" in captured.pins


def test_a_cpu_jax_or_torch_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for text, said in (
        ("jax==0.11.2\njaxlib==0.11.2\n", "jax 0.11.2 is installed without a CUDA plugin"),
        ("torch==2.11.0+cpu\n", "torch 2.11.0+cpu is not a CUDA build (+cpu)"),
    ):
        path = tmp_path / "freeze.txt"
        path.write_text(text)
        code = main(["capture", "-r", str(path), "-o", str(tmp_path / "out")])
        err = capsys.readouterr().err
        assert code == 2 and said in err and "Traceback" not in err, err
        assert not (tmp_path / "out").exists()


@pytest.mark.network
def test_capture_of_the_gpu_machines_torch_and_jax_freeze_locks_and_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """torch 2.11.0+cu130 with JAX 0.11.2 (jax-cuda13-plugin) beside it, as on the GPU
    machine: torch is the lock's framework, JAX's lines are pins, and the bundle's
    expect.json has the smoke harness test both."""
    path = tmp_path / "freeze.txt"
    path.write_text(freeze_of("torch2.11-pip", "jax0.11-cuda13", torch="2.11.0+cu130"))
    out = tmp_path / "lock"
    assert main(["capture", "-r", str(path), "--python", "3.12", "-o", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["captured"]["framework"], doc["captured"]["version"]) == ("torch", "2.11.0")
    locked = {p["name"]: p["version"] for p in doc["packages"]}
    assert (locked["torch"], locked["jax"], locked["jax-cuda13-plugin"]) == (
        "2.11.0",
        "0.11.2",
        "0.11.2",
    )
    # the label is PyTorch's index's: said, the build being the same (CUDA 13.0)
    assert doc["differs"] == ["torch==2.11.0+cu130: locked 2.11.0"]
    expect = json.loads((out / "expect.json").read_text(encoding="utf-8"))
    assert (expect["framework"], expect["build"], expect["frameworks"]) == (
        "torch",
        "cu130",
        ["torch", "jax"],
    )
    assert main(["lock", "--check", str(out)]) == 0
