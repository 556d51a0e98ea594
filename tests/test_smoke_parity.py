"""The smoke harness's copies of envlock's rules agree with the originals.

The harness (envlock/smoke/harness.py) is one stdlib-only file that runs in
any image and on Python 3.8, so it cannot import envlock; where it needs a
rule envlock also has, it keeps a copy, and these tests hold the copies to
the originals:

- runtime.json: ``check_runtime``/``runtime_candidates`` (the harness) and
  ``envlock_runtime.validate``/``config_path`` (the module a training script
  imports) accept the same files with the same errors, word for word, and
  find the same file through $ENVLOCK_RUNTIME_CONFIG and the bundle folder;
- GPU peaks: the rows the runner hands the harness (``runner.gpu_peaks``,
  from matrices/gpus.toml) carry gpus.toml's numbers, and the harness's
  ``find_peak`` picks the row ``GpuMatrix.find`` picks for a reported name.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envlock.matrix import load
from envlock.render import envlock_runtime
from envlock.smoke import HARNESS_PATH
from envlock.smoke.runner import gpu_peaks

RUNTIME_PATH = Path(envlock_runtime.__file__)


def _load(path: Path, name: str) -> ModuleType:
    """A file as a module of its own, the way a bundle holds it."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look the module up while making classes
    spec.loader.exec_module(module)
    return module


h = _load(HARNESS_PATH, "envlock_smoke_parity")


# ---------------------------------------------------------------- runtime.json


def test_the_same_keys_defaults_and_policies() -> None:
    assert h.RUNTIME_DEFAULTS == envlock_runtime.DEFAULTS
    assert list(h.RUNTIME_DEFAULTS) == list(envlock_runtime.DEFAULTS)
    assert h.RUNTIME_SCHEMA == envlock_runtime.SCHEMA
    assert h.POLICIES == envlock_runtime.POLICIES
    assert set(h.RuntimeConfig.__annotations__) == set(envlock_runtime.DEFAULTS)


def _both(data: object) -> tuple[str | dict[str, Any], str | dict[str, Any]]:
    """(the harness's reading, the runtime's): the settings, or the error text."""
    try:
        mine: str | dict[str, Any] = dict(h.check_runtime(data, "runtime.json"))
    except ValueError as e:
        mine = str(e)
    try:
        theirs: str | dict[str, Any] = envlock_runtime.validate(data, "runtime.json")
    except envlock_runtime.ConfigError as e:
        theirs = str(e)
    return mine, theirs


CASES: list[object] = [
    {},
    dict(envlock_runtime.DEFAULTS),
    {"visible_devices": "", "memory_growth": False, "mixed_precision": "mixed_bfloat16"},
    {"visible_devices": "0, 1", "seed": None, "determinism": True},
    {"visible_devices": "GPU-5e3c,MIG-1"},
    [],
    "runtime",
    {"cuda_visible_devices": "0"},  # the harness once read this spelling; the runtime never did
    {"visible_devices": [0, 1]},  # ... and a list
    {"visible_devices": "0;1"},
    {"schema": "envlock.runtime/v2"},
    {"memory_growth": "yes"},
    {"determinism": 1},
    {"mixed_precision": "float16"},
    {"seed": True},
    {"seed": -1},
    {"seed": 2**32},
    {"seed": 2**32 - 1},
    {"seed": 1.5},
    {"zeta": 1, "alpha": 2},
]


@pytest.mark.parametrize("data", CASES, ids=[json.dumps(c)[:40] for c in CASES])
def test_harness_and_runtime_judge_a_file_alike(data: object) -> None:
    mine, theirs = _both(data)
    if isinstance(theirs, str):
        assert mine == theirs
    else:  # the harness records the file as written; absent keys are their defaults
        assert isinstance(mine, dict)
        assert {**envlock_runtime.DEFAULTS, **mine} == theirs
        assert mine == data


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=8,
)
_values = (
    _json
    | st.sampled_from(["", "0", "0,1", "GPU-x", "a", *envlock_runtime.POLICIES])
    | st.just(envlock_runtime.SCHEMA)
)


# a shared 2-core machine can be slow to draw the first examples
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from([*envlock_runtime.DEFAULTS, "other"]), _values, max_size=6))
def test_any_object_is_judged_alike(data: dict[str, Any]) -> None:
    mine, theirs = _both(data)
    if isinstance(theirs, str):
        assert mine == theirs
    else:
        assert isinstance(mine, dict) and {**envlock_runtime.DEFAULTS, **mine} == theirs


@pytest.fixture
def bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A bundle folder: expect.json, runtime.json and the runtime module beside them."""
    monkeypatch.delenv("ENVLOCK_RUNTIME_CONFIG", raising=False)
    monkeypatch.setattr(h, "DEFAULT_RUNTIME_FILES", ())
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "bundle"
    folder.mkdir()
    (folder / "expect.json").write_text("{}")
    (folder / "runtime.json").write_text(json.dumps({"seed": 1}))
    shutil.copy(RUNTIME_PATH, folder / "envlock_runtime.py")
    return folder


def _found(folder: Path) -> tuple[str | None, str | None]:
    """(the file the harness reads, the file the bundle's runtime module reads)."""
    runtime = _load(folder / "envlock_runtime.py", "envlock_runtime_parity")
    path, _ = h.load_runtime_config(str(folder / "expect.json"))
    return path, runtime.config_path()


def test_both_read_the_bundles_file(bundle: Path) -> None:
    assert _found(bundle) == (str(bundle / "runtime.json"),) * 2


def test_both_read_the_file_the_environment_names_first(
    bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"seed": 2}))
    monkeypatch.setenv("ENVLOCK_RUNTIME_CONFIG", str(elsewhere))
    assert _found(bundle) == (str(elsewhere),) * 2
    # a variable naming no file is passed over by both
    monkeypatch.setenv("ENVLOCK_RUNTIME_CONFIG", str(tmp_path / "missing.json"))
    assert _found(bundle) == (str(bundle / "runtime.json"),) * 2


def test_both_refuse_a_bad_bundle_file_alike(bundle: Path) -> None:
    (bundle / "runtime.json").write_text(json.dumps({"mixed_precision": "fp8"}))
    runtime = _load(bundle / "envlock_runtime.py", "envlock_runtime_parity")
    with pytest.raises(ValueError) as mine:
        h.load_runtime_config(str(bundle / "expect.json"))
    with pytest.raises(runtime.ConfigError) as theirs:
        runtime.load()
    assert str(mine.value) == str(theirs.value)
    assert str(mine.value) == (
        f"{bundle / 'runtime.json'}: mixed_precision 'fp8' is not one of "
        "float32, mixed_float16, mixed_bfloat16"
    )


# ---------------------------------------------------------------- expect.json


def test_what_render_promises_is_what_the_harness_reads() -> None:
    """Every key of the bundle's expect.json is one the harness's Expect declares,
    with the same value type (the harness's may also be null)."""
    from envlock.render import ExpectDocument

    written = ExpectDocument.__annotations__
    read = h.Expect.__annotations__
    assert set(written) <= set(read)
    for key, kind in written.items():
        mine, theirs = kind.__forward_arg__, read[key].__forward_arg__  # as written
        assert theirs in (mine, f"{mine} | None"), (key, mine, theirs)


# ---------------------------------------------------------------- GPU peaks


def test_the_peaks_handed_to_the_harness_are_gpus_toml() -> None:
    peaks = gpu_peaks()
    models = load().gpus.gpus
    assert peaks is not None and len(peaks) == len(models) > 0
    for row, model in zip(peaks, models, strict=True):
        assert row["name"] == model.name
        assert row["compute_capability"] == model.compute_capability
        assert row["memory_bandwidth_tbs"] == model.memory_bandwidth_tbs
        stated = {
            "fp32": model.fp32_tflops,
            "tf32": model.tf32_tflops,
            "fp16": model.fp16_tflops,
            "bf16": model.bf16_tflops,
        }
        assert row["tflops"] == {k: v for k, v in stated.items() if v is not None}
        assert set(row) <= set(h.Peak.__annotations__)


def _reported_names() -> list[str]:
    """Names as drivers report them: each row's, with a suffix, another case, spaces."""
    names = []
    for model in load().gpus.gpus:
        names += [
            model.name,
            model.name.upper(),
            model.name + "-16GB",
            model.name + " PCIe",
            model.name + " (rev a1)",
            model.name + "(rev a1)",
            "  " + model.name.replace(" ", "  ") + " ",
            model.name + "X",  # a longer model number: not this row
            model.name[:-1],
        ]
    return [*names, "NVIDIA GeForce RTX 4090", "Tesla V100-SXM2-16GB", "", "cpu"]


@pytest.mark.parametrize("reported", _reported_names())
def test_harness_and_matrix_pick_the_same_row(reported: str) -> None:
    matrix = load().gpus
    mine = h.find_peak(gpu_peaks(), reported)
    theirs = matrix.find(reported)
    assert (mine["name"] if mine else None) == (theirs.name if theirs else None)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet="NVIDIA HGTXRSPCIe0123456789- ()", max_size=30))
def test_any_name_picks_the_same_row(reported: str) -> None:
    matrix = load().gpus
    mine = h.find_peak(gpu_peaks(), reported)
    theirs = matrix.find(reported)
    assert (mine["name"] if mine else None) == (theirs.name if theirs else None)
