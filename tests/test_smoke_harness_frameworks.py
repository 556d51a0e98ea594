"""The harness tests every framework the environment holds (issue 40, part 3).

Two ways of faking the frameworks, as the other harness tests do:

- in this process, ``FakeAdapter``s (tests/test_smoke_harness.py) registered
  as torch and jax, and ``run_child`` (one process per framework) replaced by
  a call of ``smoke`` here, so every verdict is set by the test;
- the harness file itself in a subprocess, with tiny ``torch`` and ``jax``
  packages on PYTHONPATH that the real adapters import: the child processes,
  their log, a child that dies, and the document they make together.

The documents are also put to the readers after the harness: the signing
validation (``envlock.report.result_check.check_result``) and ``SmokeResult``.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_smoke_harness import PTXAS, PYTHONS, FakeAdapter, checks, h, run_file

from envlock.errors import DataError
from envlock.report.result_check import check_result
from envlock.smoke.result import SmokeFramework, SmokeResult


class FakeGpuAdapter(FakeAdapter):
    """A framework on one GPU that, as the real ones do, sees none when
    CUDA_VISIBLE_DEVICES is empty."""

    def gpus(self) -> list[dict[str, Any]]:
        if os.environ.get("CUDA_VISIBLE_DEVICES") == "":
            return []
        return super().gpus()


class FakeJax(FakeGpuAdapter):
    name = "jax"


class Frameworks:
    """Each framework's answers (FakeAdapter's conf), and the processes asked for."""

    def __init__(self) -> None:
        self.conf: dict[str, dict[str, Any]] = {"torch": {}, "jax": {"version": "0.4.35"}}
        self.children: list[str] = []


@pytest.fixture
def fw(monkeypatch: pytest.MonkeyPatch) -> Iterator[Frameworks]:
    """torch and jax importable (fakes); a child process runs here, in-process."""
    saved = dict(os.environ)
    f = Frameworks()
    monkeypatch.setitem(h.ADAPTERS, "torch", lambda: FakeGpuAdapter(**f.conf["torch"]))
    monkeypatch.setitem(h.ADAPTERS, "jax", lambda: FakeJax(**f.conf["jax"]))
    monkeypatch.setattr(h, "detect_frameworks", lambda: ["torch", "jax"])
    monkeypatch.setattr(h, "nvidia_smi", lambda: [])
    monkeypatch.setattr(h, "gpu_state", lambda index=0: None)
    monkeypatch.setattr(h, "find_ptxas", lambda cuda=None: dict(PTXAS))
    monkeypatch.setattr(h, "DEFAULT_RUNTIME_FILES", ())
    for name in ("XLA_FLAGS", "CUDA_VISIBLE_DEVICES", "ENVLOCK_RUNTIME_CONFIG"):
        monkeypatch.delenv(name, raising=False)

    def child(options: Any, name: str) -> Any:
        f.children.append(name)
        return h.smoke(dataclasses.replace(options, framework=name), 0.0)

    monkeypatch.setattr(h, "run_child", child)
    yield f
    os.environ.clear()
    os.environ.update(saved)


def run(tmp_path: Path, *args: str, expect: dict[str, Any] | None = None) -> dict[str, Any]:
    argv = ["--warmup-seconds", "0", "--repeats", "2", *args]
    if expect is not None:
        (tmp_path / "expect.json").write_text(json.dumps(expect))
        argv += ["--expect", str(tmp_path / "expect.json")]
    result: dict[str, Any] = h.smoke(h.parse_args(argv), 0.0)
    json.dumps(result)  # one JSON document, as main prints it
    return result


def by_name(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["framework"]: r for r in result["frameworks"]}


GPU_CHECKS = ("gpu_visible", "op_on_gpu", "train_eager", "train_mixed", "train_compiled")


def test_both_importable_frameworks_run_each_with_its_own_checks(
    fw: Frameworks, tmp_path: Path
) -> None:
    result = run(tmp_path)
    assert fw.children == ["torch", "jax"]
    runs = by_name(result)
    assert list(runs) == ["torch", "jax"]
    for name, version in (("torch", "2.3.1+cu121"), ("jax", "0.4.35")):
        one = runs[name]
        assert (one["status"], one["version"]) == ("PASSED", version)
        got = checks(one)
        for check in GPU_CHECKS:
            assert got[check][0] == "PASS", (name, check, got[check])
        assert got["op_on_gpu"][1].startswith("matmul ran on cuda:0")
        assert [r["dtype"] for r in one["benchmark"]["results"]] == ["fp32", "fp16", "bf16"]
        assert [r["variant"] for r in one["benchmark"]["training"]["runs"]] == [
            "eager",
            "mixed",
            "compiled",
        ]
    # the top level is the first framework's, as a document of torch alone has it
    assert result["status"] == "PASSED"
    assert (result["framework"], result["version"]) == ("torch", "2.3.1+cu121")
    for key in ("build_info", "gpus", "benchmark", "settings"):
        assert result[key] == runs["torch"][key], key
    assert result["checks"][:-1] == runs["torch"]["checks"]
    assert result["checks"][-1] == {
        "name": "framework_jax",
        "status": "PASS",
        "reason": "JAX 0.4.35 PASSED",
    }
    status, lists = check_result(result)
    assert status == "PASSED" and "framework_jax" in lists["passedTests"]
    read = SmokeResult.from_dict(result)
    assert [(f.name, f.status, f.version) for f in read.frameworks] == [
        ("torch", "PASSED", "2.3.1+cu121"),
        ("jax", "PASSED", "0.4.35"),
    ]
    assert all(f.passed for f in read.frameworks)
    assert len(read.frameworks[1].checks) == len(runs["jax"]["checks"])


def test_one_framework_failing_fails_the_run(fw: Frameworks, tmp_path: Path) -> None:
    fw.conf["jax"].update(device="cpu:0", train={"eager": {"losses": [1.0, 2.0, 3.0]}})
    result = run(tmp_path, "--no-benchmark")
    runs = by_name(result)
    assert runs["torch"]["status"] == "PASSED"
    assert runs["jax"]["status"] == "FAILED"
    assert checks(runs["jax"])["op_on_gpu"] == ("FAIL", "a matmul placed on GPU 0 ran on cpu:0")
    assert checks(runs["jax"])["train_eager"][0] == "FAIL"
    # torch's checks at the top level all pass; the run fails by jax's
    assert result["status"] == "FAILED"
    assert checks(result)["framework_jax"] == ("FAIL", "JAX 0.4.35 FAILED: op_on_gpu, train_eager")
    status, lists = check_result(result)
    assert status == "FAILED" and lists["failedTests"] == ["framework_jax"]
    assert not SmokeResult.from_dict(result).passed
    assert [f.passed for f in SmokeResult.from_dict(result).frameworks] == [True, False]

    fw.conf["jax"] = {"version": "0.4.35"}
    fw.conf["torch"] = {"err": 3.5}  # the first framework fails: its own checks say so
    result = run(tmp_path, "--no-benchmark", "--no-training")
    assert result["status"] == "FAILED"
    assert checks(result)["op_on_gpu"][0] == "FAIL"
    assert checks(result)["framework_jax"] == ("PASS", "JAX 0.4.35 PASSED")


def test_a_hidden_gpu_fails_each_framework_unless_cpu_is_allowed(
    fw: Frameworks, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    result = run(tmp_path, "--no-benchmark", "--no-training")
    assert result["status"] == "FAILED"
    for name, pretty in (("torch", "PyTorch"), ("jax", "JAX")):
        one = by_name(result)[name]
        assert one["status"] == "FAILED"
        assert checks(one)["gpu_visible"] == (
            "FAIL",
            f"no GPU visible: {pretty} runs on the CPU (CUDA_VISIBLE_DEVICES='')",
        )
        assert checks(one)["op_on_gpu"] == ("SKIP", "no GPU visible")
        assert one["gpus"] == []
    assert checks(result)["framework_jax"] == ("FAIL", "JAX 0.4.35 FAILED: gpu_visible")
    check_result(result)

    result = run(tmp_path, "--no-benchmark", "--no-training", "--allow-cpu")
    assert result["status"] == "WARNED"
    for one in result["frameworks"]:
        assert one["status"] == "WARNED"
        assert checks(one)["gpu_visible"][0] == "WARN"
        assert checks(one)["gpu_visible"][1].endswith("(--allow-cpu)")
    assert checks(result)["framework_jax"] == ("WARN", "JAX 0.4.35 WARNED: gpu_visible")


def test_framework_option_runs_that_one_in_this_process(fw: Frameworks, tmp_path: Path) -> None:
    result = run(tmp_path, "--framework", "jax", "--no-benchmark")
    assert fw.children == []
    assert (result["framework"], result["status"]) == ("jax", "PASSED")
    assert "framework_torch" not in checks(result)
    [one] = result["frameworks"]
    assert one == {
        "framework": "jax",
        "version": "0.4.35",
        "status": "PASSED",
        "build_info": result["build_info"],
        "gpus": result["gpus"],
        "checks": result["checks"],
        "benchmark": result["benchmark"],
        "settings": result["settings"],
    }
    check_result(result)


def test_expect_json_names_the_frameworks_and_judges_only_its_own(
    fw: Frameworks, tmp_path: Path
) -> None:
    expect = {"framework": "jax", "version": "0.4.30", "cuda": "12.1", "python": "3.12"}
    result = run(tmp_path, "--no-benchmark", "--no-training", expect=expect)
    assert fw.children == []  # expect.json's framework alone, as a bundle's smoke run
    assert checks(result)["framework_version"] == (
        "FAIL",
        "JAX 0.4.35 is installed, the lock says 0.4.30",
    )

    fw.children.clear()
    result = run(
        tmp_path,
        "--no-benchmark",
        "--no-training",
        expect={**expect, "frameworks": ["jax", "torch"]},
    )
    assert fw.children == ["jax", "torch"]
    runs = by_name(result)
    assert checks(runs["jax"])["framework_version"][0] == "FAIL"
    assert checks(runs["jax"])["build_cuda"] == ("PASS", "built with CUDA 12.1 as locked")
    # torch is judged by what it reports, not by the lock's facts of jax
    assert checks(runs["torch"])["framework_version"] == (
        "SKIP",
        "PyTorch 2.3.1+cu121 (no version expected)",
    )
    assert checks(runs["torch"])["build_cuda"] == (
        "SKIP",
        "built with CUDA 12.1 (nothing expected)",
    )
    assert runs["torch"]["status"] == "PASSED"
    assert result["expected"] == {**expect, "frameworks": ["jax", "torch"]}  # the file as read
    assert (result["framework"], result["status"]) == ("jax", "FAILED")
    check_result(result)

    result = run(tmp_path, expect={"frameworks": ["torch", "mxnet"]})
    assert checks(result)["framework"] == (
        "FAIL",
        "unknown framework 'mxnet' (known: tensorflow, torch, jax)",
    )
    assert result["frameworks"] == []
    check_result(result)


def test_each_other_framework_is_judged_by_its_own_locked_facts(
    fw: Frameworks, tmp_path: Path
) -> None:
    """expect.json's ``others`` (a bundle's lock holding torch beside jax): torch's
    version and CUDA are judged against what the lock holds of torch itself."""
    expect = {
        "framework": "jax",
        "version": "0.4.35",
        "cuda": "12",
        "python": "3.12",
        "frameworks": ["jax", "torch"],
        "others": {"torch": {"version": "2.3.1", "cuda": "12.1"}},
    }
    runs = by_name(run(tmp_path, "--no-benchmark", "--no-training", expect=expect))
    assert checks(runs["torch"])["framework_version"] == (
        "PASS",
        "PyTorch 2.3.1+cu121 as locked",
    )
    assert checks(runs["torch"])["build_cuda"] == ("PASS", "built with CUDA 12.1 as locked")
    assert runs["torch"]["status"] == "PASSED"

    fw.children.clear()
    wrong = {**expect, "others": {"torch": {"version": "2.4.0", "cuda": "12.4"}}}
    result = run(tmp_path, "--no-benchmark", "--no-training", expect=wrong)
    runs = by_name(result)
    assert checks(runs["torch"])["framework_version"] == (
        "FAIL",
        "PyTorch 2.3.1+cu121 is installed, the lock says 2.4.0",
    )
    assert checks(runs["torch"])["build_cuda"][0] == "FAIL"
    assert (runs["torch"]["status"], result["status"]) == ("FAILED", "FAILED")
    assert checks(runs["jax"])["framework_version"][0] == "PASS"  # jax's own facts
    check_result(result)


class FakePluginJax(FakeJax):
    """JAX whose build info names its CUDA plugin, as the real adapter's does."""

    def build_info(self) -> dict[str, Any]:
        info = super().build_info()
        raw = {"plugin": self.conf.get("plugin"), "plugin_version": self.conf.get("plugin_v")}
        return {**info, "raw": raw}


def test_build_cuda_judges_the_locked_cuda_build_of_torch_and_jax(
    fw: Frameworks, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 43: expect.json's ``build`` (rendered from a torch or JAX lock) against the
    install: torch's local label where it has one (torch.version.cuda decides where it
    has none), JAX's CUDA plugin and its version."""
    expect = {"framework": "torch", "version": "2.11.0", "cuda": "12.8", "build": "cu128"}
    fw.conf["torch"] = {"version": "2.11.0+cu128", "cuda": "12.8"}
    result = run(tmp_path, "--no-benchmark", "--no-training", expect=expect)
    assert checks(result)["build_cuda"] == (
        "PASS",
        "built with CUDA 12.8 as locked; the cu128 build as locked (2.11.0+cu128)",
    )
    fw.conf["torch"] = {"version": "2.11.0+cu126", "cuda": "12.8"}  # a label that lies
    result = run(tmp_path, "--no-benchmark", "--no-training", expect=expect)
    assert checks(result)["build_cuda"] == (
        "FAIL",
        "torch 2.11.0+cu126 is the cu126 build, the lock says cu128",
    )
    # the default index's build has no label: torch.version.cuda is the fact
    fw.conf["torch"] = {"version": "2.11.0", "cuda": "13.0"}
    result = run(tmp_path, "--no-benchmark", "--no-training", expect=expect)
    assert checks(result)["build_cuda"] == ("FAIL", "built with CUDA 13.0, the lock says 12.8")
    result = run(
        tmp_path,
        "--no-benchmark",
        "--no-training",
        expect={**expect, "cuda": "13.0", "build": "cu130"},
    )
    assert checks(result)["build_cuda"] == ("PASS", "built with CUDA 13.0 as locked")

    monkeypatch.setitem(h.ADAPTERS, "jax", lambda: FakePluginJax(**fw.conf["jax"]))
    jax = {"framework": "jax", "version": "0.11.2", "cuda": "13", "build": "cuda13"}
    for conf, verdict in (
        (
            {"plugin": "jax-cuda13-plugin", "plugin_v": "0.11.2"},
            ("PASS", "built with CUDA 13 as locked; jax-cuda13-plugin 0.11.2 as locked"),
        ),
        (
            {"plugin": "jax-cuda13-plugin", "plugin_v": "0.11.1"},
            ("FAIL", "jax-cuda13-plugin 0.11.1 is installed, the lock says 0.11.2"),
        ),
        (
            {"plugin": "jax-cuda12-plugin", "plugin_v": "0.11.2"},
            ("FAIL", "jax-cuda12-plugin 0.11.2 is installed, the lock says jax-cuda13-plugin"),
        ),
        (
            {"plugin": None},
            ("FAIL", "no JAX CUDA plugin is installed, the lock says jax-cuda13-plugin 0.11.2"),
        ),
    ):
        fw.conf["jax"] = {"version": "0.11.2", "cuda": "13.0", **conf}
        result = run(tmp_path, "--no-benchmark", "--no-training", expect=jax)
        assert checks(result)["build_cuda"] == verdict, conf


def test_detect_frameworks_lists_every_importable_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fakes = fake_frameworks(tmp_path)
    monkeypatch.syspath_prepend(str(fakes))
    found = h.detect_frameworks()
    assert found.index("torch") < found.index("jax")
    assert h.detect_framework() == found[0]


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--allow-cpu", "--no-benchmark", "--no-training", "--expect", "/b/expect.json"],
        ["--size", "1024", "--repeats", "3", "--per-repeat", "4", "--warmup", "0"],
        ["--warmup-seconds", "0.25", "--min-fraction", "0.3", "--training-steps", "5"],
        ["--peaks", "/p.json", "--training"],
    ],
)
def test_a_child_is_given_every_option(argv: list[str]) -> None:
    options = h.parse_args(argv)
    for name in ("torch", "jax"):
        child = h.parse_args(h.child_args(options, name))
        assert child == dataclasses.replace(options, framework=name)


# ---------------------------------------------------------------- the harness file itself

FAKE_TORCH = """\
__version__ = "2.5.1+cpu"


class version:
    cuda = None
    git_version = "fake"


class cuda:
    @staticmethod
    def is_available():
        return False
"""

FAKE_JAX = """\
import os
import signal

if os.environ.get("FAKE_JAX_DIES") == "1":
    print("jax: about to die", flush=True)
    os.kill(os.getpid(), signal.SIGSEGV)

__version__ = "0.4.35"


def devices(kind=None):
    return []  # no GPU; and no jax.numpy: the xla check crashes
"""


def fake_frameworks(tmp_path: Path) -> Path:
    """A folder with fake torch (no GPU, no torch.compile) and jax (no devices) packages."""
    root = tmp_path / "fakes"
    for name, text in (("torch", FAKE_TORCH), ("jax", FAKE_JAX)):
        (root / name).mkdir(parents=True, exist_ok=True)
        (root / name / "__init__.py").write_text(text)
    return root


def harness(
    tmp_path: Path, python: str, *args: str, env: dict[str, str] | None = None
) -> tuple[dict[str, Any], str, int]:
    (tmp_path / "expect.json").write_text(json.dumps({"frameworks": ["torch", "jax"]}))
    fakes = fake_frameworks(tmp_path)
    out = run_file(
        tmp_path,
        python,
        "--expect", str(tmp_path / "expect.json"), "--no-benchmark", "--no-training", *args,
        env={"PYTHONPATH": str(fakes), "ENVLOCK_RUNTIME_CONFIG": "", **(env or {})},
    )  # fmt: skip
    return json.loads(out.stdout), out.stderr, out.returncode


@PYTHONS
def test_each_framework_runs_in_a_process_of_its_own(tmp_path: Path, python: str) -> None:
    result, log, code = harness(tmp_path, python, "--allow-cpu")
    assert code == 1
    assert "envlock-smoke: testing torch in a process of its own (2 frameworks)" in log
    assert "envlock-smoke: testing jax in a process of its own (2 frameworks)" in log
    runs = by_name(result)
    assert runs["torch"]["status"] == "WARNED"
    assert runs["torch"]["version"] == "2.5.1+cpu"
    assert checks(runs["torch"])["gpu_visible"] == (
        "WARN",
        "no GPU visible: PyTorch runs on the CPU (--allow-cpu)",
    )
    assert checks(runs["torch"])["xla"] == (
        "SKIP",
        "PyTorch 2.5.1+cpu has no torch.compile (it came with 2.0)",
    )
    assert runs["jax"]["status"] == "FAILED"
    assert checks(runs["jax"])["xla"] == (
        "FAIL",
        "xla crashed: AttributeError: module 'jax' has no attribute 'numpy'",
    )
    assert result["status"] == "FAILED"
    assert checks(result)["framework_jax"] == ("FAIL", "JAX 0.4.35 FAILED: xla")
    assert (result["framework"], result["version"]) == ("torch", "2.5.1+cpu")
    assert result["environment"]["distributions"] is not None
    check_result(result)


@PYTHONS
def test_a_hidden_gpu_fails_each_child(tmp_path: Path, python: str) -> None:
    result, _, code = harness(tmp_path, python, env={"CUDA_VISIBLE_DEVICES": ""})
    assert code == 1
    for name, pretty in (("torch", "PyTorch"), ("jax", "JAX")):
        assert checks(by_name(result)[name])["gpu_visible"] == (
            "FAIL",
            f"no GPU visible: {pretty} runs on the CPU (CUDA_VISIBLE_DEVICES='')",
        )


@PYTHONS
def test_a_child_that_dies_is_a_failure_of_its_framework_alone(tmp_path: Path, python: str) -> None:
    result, log, code = harness(tmp_path, python, "--allow-cpu", env={"FAKE_JAX_DIES": "1"})
    assert code == 1
    runs = by_name(result)
    assert runs["torch"]["status"] == "WARNED"  # its result is whole
    jax = runs["jax"]
    assert (jax["status"], jax["version"]) == ("FAILED", None)
    died = jax["checks"][-1]
    assert died["name"] == "harness" and died["died_in"] == "import"
    assert died["exit_code"] == -signal.SIGSEGV
    assert died["reason"].startswith(
        "the JAX process died before reporting (killed by SIGSEGV) in the check import; "
        "last lines: "
    )
    assert "jax: about to die" in died["stderr_tail"] and "jax: about to die" in log
    assert [c["name"] for c in jax["checks"]] == ["harness"]  # it logged no verdict
    assert checks(result)["framework_jax"] == ("FAIL", "JAX FAILED: harness")
    check_result(result)


# ---------------------------------------------------------------- the readers


def combined() -> dict[str, Any]:
    """A run of torch (passed) and jax (warned), as the harness writes it."""
    torch_checks = [{"name": "gpu_visible", "status": "PASS", "reason": "1 GPU(s) visible"}]
    jax_checks = [{"name": "gpu_visible", "status": "WARN", "reason": "no GPU (--allow-cpu)"}]
    runs = [
        {"framework": "torch", "version": "2.5.1", "status": "PASSED", "checks": torch_checks},
        {"framework": "jax", "version": "0.4.35", "status": "WARNED", "checks": jax_checks},
    ]
    return {
        "schema": "envlock.smoke/v1",
        "status": "WARNED",
        "framework": "torch",
        "version": "2.5.1",
        "checks": [
            *copy.deepcopy(torch_checks),
            {"name": "framework_jax", "status": "WARN", "reason": "JAX 0.4.35 WARNED"},
        ],
        "frameworks": runs,
    }


def _set(path: str, value: Any) -> Any:
    def edit(doc: dict[str, Any]) -> None:
        *head, last = path.split(".")
        target: Any = doc
        for key in head:
            target = target[int(key)] if key.isdigit() else target[key]
        if last.isdigit():
            target[int(last)] = value
        else:
            target[last] = value

    return edit


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_set("frameworks", {"torch": {}}), "result: frameworks: not a list"),
        (_set("frameworks.1", "jax"), "result: frameworks[1]: not an object"),
        (_set("frameworks.1.framework", None), "result: frameworks[1].framework: None is not"),
        (_set("frameworks.1.framework", "JAX 0.4"), "frameworks[1].framework: 'JAX 0.4' is not"),
        (_set("frameworks.1.framework", "torch"), "frameworks[1].framework: torch is listed twice"),
        (_set("frameworks.0.framework", "jax"), "frameworks[0].framework: jax, but the result's"),
        (_set("frameworks.1.status", "OK"), "frameworks[1].status: 'OK', expected one of"),
        (_set("frameworks.1.status", "PASSED"), "frameworks[1]: status is PASSED but the checks"),
        (_set("frameworks.1.checks", None), "result: frameworks[1]: checks: missing or not a list"),
        (_set("frameworks.1.checks.0.status", "BAD"), "frameworks[1]: checks[0].status: 'BAD'"),
        (_set("frameworks.1.version", 4), "frameworks[1].version: int where a string belongs"),
        (_set("frameworks.1.gpus", {}), "frameworks[1].gpus: dict where a list belongs"),
        (_set("frameworks.1.benchmark", []), "frameworks[1].benchmark: list where an object"),
        (_set("status", "PASSED"), "result: status is PASSED but the checks say WARNED"),
    ],
)
def test_the_signing_validation_rejects_a_malformed_framework_entry(
    edit: Any, message: str
) -> None:
    doc = combined()
    assert check_result(doc)[0] == "WARNED"
    edit(doc)
    with pytest.raises(DataError) as err:
        check_result(doc)
    assert message in err.value.message


def test_the_run_status_is_no_better_than_a_framework_entry() -> None:
    doc = combined()
    doc["checks"][-1]["status"] = "PASS"  # a summary made to say better: the run says so
    doc["status"] = "PASSED"
    with pytest.raises(DataError, match=r"status is PASSED but frameworks\[1\] \(jax\) is WARNED"):
        check_result(doc)


def test_a_list_of_frameworks_is_bounded() -> None:
    doc = combined()
    doc["frameworks"] += [
        {"framework": f"f{i}", "status": "PASSED", "checks": []} for i in range(7)
    ]
    with pytest.raises(DataError, match=r"frameworks: 9 entries, at most 8"):
        check_result(doc)
    read = SmokeResult.from_dict(doc)
    assert len(read.frameworks) == 8  # read no further


def test_a_result_without_frameworks_reads_as_before() -> None:
    doc = combined()
    del doc["frameworks"]
    assert check_result(doc)[0] == "WARNED"
    assert SmokeResult.from_dict(doc).frameworks == ()
    odd = SmokeResult.from_dict({"frameworks": [{"framework": 3}, "x", {"framework": "jax"}]})
    assert odd.frameworks == (SmokeFramework(name="jax", status=None),)
    assert SmokeResult.from_dict({"frameworks": "torch"}).frameworks == ()
