#!/usr/bin/env python3
"""envlock smoke harness: prove from inside an environment that the GPU is used.

One file, standard library only, Python 3.8 or newer, so it runs inside any
image and on any host::

    python envlock_smoke.py --expect expect.json [--allow-cpu] [--framework NAME]

It imports the framework under test (tensorflow, torch or jax), compares what
it finds with the lock's expectations, checks that the GPU is visible and
really used, and measures matmul throughput against the GPU's datasheet peak.

Which frameworks: ``--framework NAME`` tests that one; else expect.json's
``frameworks`` list, else its ``framework``; else every framework the
environment can import. Several are each tested in a process of their own
(this file again, with ``--framework NAME``): one framework's CUDA libraries,
GPU memory or crash cannot touch another's verdict. Each is judged on its own
(the lock's version, CUDA and cuDNN only for the framework expect.json names)
and the result lists each under ``frameworks``; its top-level keys are the
first framework's, and one check per other framework carries that one's status.

How it is built: an ``Adapter`` per framework answers the questions (version,
build info, GPUs, a small op on GPU 0, a timed matmul); one ``Context`` holds
the options, the expectations, the adapter and everything found so far; each
check is a top-level function of the context returning a ``Verdict``, or None
when it only reads or measures into the context (``read_...``, ``bench_...``);
``run_checks`` calls them in order through ``run_check``, which turns an
exception into a FAIL naming the check.

Output: ONE JSON document on stdout (schema ``envlock.smoke/v1``); everything
else, the framework's own chatter included, goes to stderr. Exit status 0 when
the result is PASSED or WARNED, 1 when FAILED. A check that crashes is reported
as a FAIL naming the check and the exception, never as a traceback dump.

Python 3.8 is the oldest interpreter it runs on: annotations stay strings
(``from __future__ import annotations``) and only 3.8's standard library is used.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, cast

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

SCHEMA = "envlock.smoke/v1"
PASS, WARN, FAIL, SKIP = "PASS", "WARN", "FAIL", "SKIP"
FRAMEWORKS = ("tensorflow", "torch", "jax")
PRETTY = {"tensorflow": "TensorFlow", "torch": "PyTorch", "jax": "JAX"}
DEFAULT_RUNTIME_FILES: tuple[str, ...] = ("/opt/envlock/runtime.json",)
DIGITS = "0123456789"


# ---------------------------------------------------------------- the document's shapes
# What the harness finds travels as plain JSON objects (the document is one
# json.dumps of them); these TypedDicts name each object's keys for the type
# checker and for the runners that read the document back (envlock.smoke.runner,
# envlock.smoke.result). typing.TypedDict is in 3.8's standard library; keys
# that may be absent come from total=False classes (NotRequired is 3.11).


class GpuRow(TypedDict, total=False):
    """A GPU as nvidia-smi lists it (index, driver) or the framework does (device)."""

    index: str
    name: str
    compute_capability: str | None
    memory_total_mb: int | None
    driver: str | None
    device: str


class GpuState(TypedDict, total=False):
    """One GPU's clocks, power and throttle reasons now (nvidia-smi's text)."""

    sm_clock_mhz: str
    sm_clock_max_mhz: str
    power_w: str
    power_limit_w: str
    temp_c: str
    clock_limited_by: list[str] | str


class HostInfo(TypedDict, total=False):
    hostname: str
    platform: str
    machine: str
    python: str
    python_executable: str
    cpu_count: int | None
    in_container: bool
    driver: str


class Environment(TypedDict):
    """The interpreter's installed distributions, as a host run without a lock is signed."""

    distributions: list[str]
    sha256: str


class Failed(TypedDict):
    """What stands in for a probe that raised (gpu state, settings, environment)."""

    settings_error: str


class RuntimeConfig(TypedDict, total=False):
    """runtime.json (schema envlock.runtime/v1), as envlock_runtime.py reads it."""

    schema: str
    visible_devices: str | None
    memory_growth: bool
    mixed_precision: str
    determinism: bool
    seed: int | None


class Peak(TypedDict, total=False):
    """One GPU's datasheet peaks (gpu_peaks), from envlock's gpus matrix."""

    name: str
    form_factor: str
    compute_capability: str
    tflops: dict[str, float]  # fp32, tf32, fp16, bf16 (those the datasheet gives)
    memory_bandwidth_tbs: float
    source: str


class Expect(TypedDict, total=False):
    """expect.json: what the lock promises."""

    framework: str  # the framework its version, cuda, cudnn and compute_capabilities are of
    frameworks: list[str]  # the frameworks to test (default: framework alone)
    version: str
    python: str
    cuda: str | None
    cudnn: str | None
    compute_capabilities: list[str]
    lock_digest: str
    gpu_peaks: list[Peak]
    driver_min: str  # the whole lock's driver floor (every CUDA-carrying package's)
    driver_set_by: str  # the packages that set it, "torch 2.15.0 (CUDA 13.2, ...)"
    build: str  # torch/JAX: the CUDA build locked, "cu130" (torch), "cuda13" (JAX's plugin)
    # the lock's other frameworks: what each is judged against ({"version", "cuda"})
    others: dict[str, dict[str, str]]


# build_info's "from" is a keyword, hence the functional form (string annotations:
# 3.8 evaluates none of them).
BuildInfo = TypedDict(
    "BuildInfo",
    {
        "cuda": "str | None",
        "cudnn": "str | None",
        "compute_capabilities": "list[str] | None",
        "is_cuda_build": bool,
        "from": "dict[str, str]",  # fact -> where it was read ("build_info", "cuda_config.h")
        "raw": "dict[str, object]",  # the framework's own record, as JSON values
    },
    total=False,
)


class XlaMeasure(TypedDict, total=False):
    """The XLA check's measurement (or as much of it as was reached, with ptxas)."""

    function: str
    compiled_with: str
    reference: str
    device: str | None
    first_call_s: float
    steady_call_s: float
    compile_s: float
    max_difference: float
    tolerance: float
    ptxas: Ptxas


class Ptxas(TypedDict, total=False):
    """Where ptxas is (path, version, source, xla_finds), or path None and the
    folders searched."""

    path: str | None
    version: str | None
    source: str
    xla_finds: bool
    searched: list[str]


class Trained(TypedDict, total=False):
    """What an adapter's train() found: each step's loss and time, where it ran."""

    losses: list[float]
    first_step_s: float
    seconds_per_step: float
    device: str
    compute_dtype: str
    policy: str
    runtime_policy: str


class TrainRun(TypedDict, total=False):
    """One training variant in the benchmark (and in its check's entry)."""

    variant: str
    what: str
    device: str
    steps: int
    loss_first: float
    loss_last: float
    first_step_s: float
    seconds_per_step: float
    compute_dtype: str
    policy: str
    runtime_policy: str
    plain: bool
    speedup_vs_plain: float


class Training(TypedDict, total=False):
    model: str
    device: str
    batch: int
    input: str
    classes: int
    memory_growth: bool
    mixed_precision: str | None
    runs: list[TrainRun]
    seconds: float
    matmul_fp32_s: float


class Matmul(TypedDict, total=False):
    """One timed matmul (benchmark.results)."""

    op: str
    dtype: str
    math: str
    device: str
    n: int
    warmup: int
    warmup_s: float
    repeats: int
    per_repeat: int
    seconds_per_op: dict[str, float]  # median, min, max
    samples_s: list[float]
    tflops: float
    tflops_best: float
    gpu_state_after: GpuState | Failed
    peak_tflops: float
    fraction_of_peak: float


class Benchmark(TypedDict, total=False):
    device: str
    gpu: str | None
    results: list[Matmul]
    peak_source: str | None
    training: Training


class FrameworkSettings(TypedDict, total=False):
    """What the adapter reports in force (settings()), each framework its own keys."""

    tensor_float_32: bool | str
    precision_policy: str
    allow_tf32_matmul: bool
    cudnn_allow_tf32: bool
    float32_matmul_precision: str
    PYTORCH_CUDA_ALLOC_CONF: str | None
    XLA_PYTHON_CLIENT_PREALLOCATE: str | None
    XLA_PYTHON_CLIENT_MEM_FRACTION: str | None
    default_matmul_precision: str
    settings_error: str  # settings() raised


class Settings(FrameworkSettings, total=False):
    runtime_config: str | None  # the runtime.json read, if any
    runtime: RuntimeConfig
    applied_environment: dict[str, str]
    CUDA_VISIBLE_DEVICES: str | None
    memory_growth: bool
    gpu_memory: dict[str, float]


class ErrorInfo(TypedDict, total=False):
    type: str
    message: str
    where: str | None


class CheckExtra(TypedDict, total=False):
    """Keys a check adds to its entry beside name, status and reason."""

    loaded: str  # cudnn_runtime
    library: str
    xla: XlaMeasure
    hint: str
    training: TrainRun
    broken_path: str | None
    error: ErrorInfo  # the check raised
    # a runner's entry for a harness that could not answer
    stderr_tail: str
    exit_code: int
    died_in: str


class _CheckHead(TypedDict):
    name: str
    status: str  # PASS | WARN | FAIL | SKIP
    reason: str


class CheckEntry(_CheckHead, CheckExtra):
    """One check of the document's ``checks``."""


class FrameworkRun(TypedDict, total=False):
    """One framework's part of the document (``frameworks``): what a document of
    that framework alone would hold at its top level under the same keys."""

    framework: str
    version: str | None
    status: str  # PASSED | WARNED | FAILED, of this framework's checks
    build_info: BuildInfo
    gpus: list[GpuRow]
    checks: list[CheckEntry]
    benchmark: Benchmark  # with "training" when the training checks ran
    settings: Settings


class SmokeDocument(TypedDict, total=False):
    """The harness's one JSON document (schema envlock.smoke/v1).

    ``framework`` .. ``settings`` are the first (or only) framework's; ``status``
    is the whole run's; ``frameworks`` has one entry per framework tested (none
    when none could be chosen), the first holding the same facts as the top level.
    """

    schema: str
    status: str  # PASSED | WARNED | FAILED
    framework: str | None
    version: str | None
    expected: Expect
    build_info: BuildInfo
    gpus: list[GpuRow]
    checks: list[CheckEntry]
    benchmark: Benchmark
    settings: Settings
    host: HostInfo
    environment: Environment | Failed | None
    duration_s: float | None
    frameworks: list[FrameworkRun]


def log(message: str) -> None:
    sys.stderr.write(f"envlock-smoke: {message}\n")
    sys.stderr.flush()


def _error_text(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    if len(first) > 300:
        first = first[:300] + "..."
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _where(exc: BaseException) -> str | None:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return None
    last = frames[-1]
    return f"{os.path.basename(last.filename)}:{last.lineno} in {last.name}"


# ---------------------------------------------------------------- versions


def _parts(version: object) -> list[int]:
    """'12.2.140' -> [12, 2, 140]; stops at the first non-numeric part."""
    out = []
    for piece in str(version).split("+")[0].split("."):
        digits = ""
        for ch in piece:
            if ch in DIGITS:
                digits += ch
            else:
                break
        if not digits:
            break
        out.append(int(digits))
        if digits != piece:
            break
    return out


def same_release(expected: object, actual: object) -> bool:
    """Framework versions: equal public versions ('2.11.0' == '2.11.0+cu130')."""
    return str(expected).split("+")[0].strip() == str(actual).split("+")[0].strip()


def prefix_match(expected: object, actual: object) -> bool:
    """Compare the components both sides state: '12.2' vs '12.2.140' match,
    '8.9' vs '8' match on the major only (the caller says so)."""
    e, a = _parts(expected), _parts(actual)
    if not e or not a:
        return False
    n = min(len(e), len(a))
    return e[:n] == a[:n]


def cudnn_from_int(value: Any) -> str:
    """cudnnGetVersion(): 8906 -> '8.9.6' (cuDNN 8), 91002 -> '9.10.2' (cuDNN 9+)."""
    value = int(value)
    if value >= 90000:
        return f"{value // 10000}.{(value % 10000) // 100}.{value % 100}"
    return f"{value // 1000}.{(value % 1000) // 100}.{value % 100}"


def sm_of(capability: object) -> int:
    """'9.0' -> 90."""
    major, _, minor = str(capability).partition(".")
    return int(major) * 10 + int(minor or 0)


def capability_verdict(capability: object, compiled: Sequence[object]) -> tuple[str, str]:
    """Is a GPU of ``capability`` ('8.6') served by the compiled targets?

    ``compiled`` lists 'sm_80' (machine code) and 'compute_80' (PTX) entries.
    Machine code runs on the same major at an equal or higher minor; PTX is
    JIT-compiled by the driver for any equal or newer GPU.
    """
    gpu = sm_of(capability)
    sass: list[int] = []
    ptx: list[int] = []
    for entry in compiled:
        text = str(entry).strip().lower()
        kind, _, number = text.partition("_")
        digits = "".join(ch for ch in number if ch in DIGITS)
        if not digits:
            continue
        (sass if kind == "sm" else ptx if kind == "compute" else []).append(int(digits))
    listing = ", ".join(str(c) for c in compiled)
    if gpu in sass:
        return PASS, f"compute capability {capability} has machine code (sm_{gpu}) in the build"
    same_major = [s for s in sass if s // 10 == gpu // 10 and s <= gpu]
    if same_major:
        best = max(same_major)
        return PASS, f"compute capability {capability} runs the sm_{best} machine code of the build"
    older_ptx = [p for p in ptx if p <= gpu]
    if older_ptx:
        return WARN, (
            f"compute capability {capability} is not among the compiled targets ({listing}): "
            f"kernels will be JIT-compiled from PTX (compute_{max(older_ptx)}), slow first start"
        )
    return FAIL, f"compute capability {capability} is unsupported: the build targets only {listing}"


# ---------------------------------------------------------------- host probes


def nvidia_smi() -> list[GpuRow]:
    """GPUs as nvidia-smi lists them (empty when there is no nvidia-smi)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    query = "index,name,compute_cap,memory.total,driver_version"
    try:
        out = subprocess.run(
            [smi, "--query-gpu=" + query, "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError) as e:
        log(f"nvidia-smi failed: {e}")
        return []
    if out.returncode != 0:
        return []
    rows: list[GpuRow] = []
    for line in out.stdout.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != 5:
            continue
        memory: int | None
        try:
            memory = int(float(cells[3]))
        except ValueError:
            memory = None
        rows.append(
            GpuRow(
                index=cells[0],
                name=cells[1],
                compute_capability=cells[2],
                memory_total_mb=memory,
                driver=cells[4],
            )
        )
    return rows


THROTTLE_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
    0x100: "display_clocks",
}


def gpu_state(index: int = 0) -> GpuState | None:
    """Clocks, power and throttle reasons of one GPU now (nvidia-smi), or None."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    fields = ["clocks.sm", "clocks.max.sm", "power.draw", "power.limit", "temperature.gpu"]
    for reasons in ("clocks_event_reasons.active", "clocks_throttle_reasons.active"):
        try:
            out = subprocess.run(
                [smi, "-i", str(index), "--query-gpu=" + ",".join([*fields, reasons])]
                + ["--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
                timeout=30,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        if out.returncode == 0:
            break
    else:
        return None
    cells = [c.strip() for c in out.stdout.strip().split(",")]
    if len(cells) != len(fields) + 1:
        return None
    state = GpuState(
        sm_clock_mhz=cells[0],
        sm_clock_max_mhz=cells[1],
        power_w=cells[2],
        power_limit_w=cells[3],
        temp_c=cells[4],
    )
    try:
        mask = int(cells[-1], 16)
        state["clock_limited_by"] = [n for bit, n in THROTTLE_REASONS.items() if mask & bit]
    except ValueError:
        state["clock_limited_by"] = cells[-1]
    return state


def driver_version() -> str | None:
    try:
        with open("/proc/driver/nvidia/version") as f:
            text = f.read()
    except OSError:
        return None
    for word in text.split():
        parts = word.split(".")
        if len(parts) >= 2 and all(p and set(p) <= set(DIGITS) for p in parts):
            return word
    return None


def loaded_libraries(stem: str) -> list[str]:
    """Paths of loaded shared objects whose file name starts with ``stem``."""
    found: list[str] = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.rstrip("\n").split(" ")[-1]
                if os.path.basename(path).startswith(stem) and path not in found:
                    found.append(path)
    except OSError:
        pass
    return found


def cudnn_runtime_version() -> tuple[str | None, str | None]:
    """(version, path) of the cuDNN this process has loaded, via cudnnGetVersion."""
    import ctypes

    for path in loaded_libraries("libcudnn.so") + loaded_libraries("libcudnn_graph.so"):
        try:
            lib = ctypes.CDLL(path)
            lib.cudnnGetVersion.restype = ctypes.c_size_t
            return cudnn_from_int(lib.cudnnGetVersion()), path
        except (OSError, AttributeError):
            continue
    return None, None


def cudnn_loadable(major: int | None) -> tuple[bool, str]:
    """Can libcudnn.so.<major> be loaded by name? (version, or why not)."""
    import ctypes

    names = [f"libcudnn.so.{major}"] if major else ["libcudnn.so.9", "libcudnn.so.8"]
    errors = []
    for name in names:
        try:
            lib = ctypes.CDLL(name)
            lib.cudnnGetVersion.restype = ctypes.c_size_t
            return True, f"{name} loads by name: cuDNN {cudnn_from_int(lib.cudnnGetVersion())}"
        except (OSError, AttributeError) as e:
            errors.append(f"{name}: {e}")
    return False, "; ".join(errors)


def host_info() -> HostInfo:
    info = HostInfo(
        hostname=socket.gethostname(),
        platform=platform.platform(),
        machine=platform.machine(),
        python=platform.python_version(),
        python_executable=sys.executable,
        cpu_count=os.cpu_count(),
        in_container=os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv"),
    )
    driver = driver_version()
    if driver:
        info["driver"] = driver
    return info


def installed_environment() -> Environment:
    """The interpreter's installed distributions: sorted ``name==version`` lines
    (names normalized as PEP 503 does) and the sha256 of those lines, each ending
    in a newline, UTF-8: what a host run without a lock is signed as."""
    import hashlib
    import re
    from importlib import metadata

    lines = set()
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            lines.add("{}=={}".format(re.sub(r"[-_.]+", "-", str(name)).lower(), dist.version))
    ordered = sorted(lines)
    text = "".join(line + "\n" for line in ordered)
    return Environment(
        distributions=ordered, sha256=hashlib.sha256(text.encode("utf-8")).hexdigest()
    )


# ---------------------------------------------------------------- runtime settings


RUNTIME_SCHEMA = "envlock.runtime/v1"
# runtime.json's keys and what each is when absent, as envlock_runtime.py has them
RUNTIME_DEFAULTS = RuntimeConfig(
    schema=RUNTIME_SCHEMA,
    visible_devices=None,
    memory_growth=True,
    mixed_precision="float32",
    determinism=False,
    seed=42,
)
POLICIES = ("float32", "mixed_float16", "mixed_bfloat16")


def runtime_candidates(expect_path: str | None) -> list[str]:
    """Where runtime.json is looked for, in order: $ENVLOCK_RUNTIME_CONFIG, then the
    bundle's folder (beside expect.json), then the image's /opt/envlock."""
    candidates = []
    env = os.environ.get("ENVLOCK_RUNTIME_CONFIG")
    if env:
        candidates.append(env)
    if expect_path:
        candidates.append(
            os.path.join(os.path.dirname(os.path.abspath(expect_path)), "runtime.json")
        )
    candidates.extend(DEFAULT_RUNTIME_FILES)
    return candidates


def check_runtime(data: object, origin: str) -> RuntimeConfig:
    """runtime.json's settings, checked by the rule envlock_runtime.validate applies
    (the same errors, word for word: tests/test_runtime_parity.py holds the two
    copies together), returned as written; an absent key means its default."""
    if not isinstance(data, dict):
        raise ValueError(f"{origin}: expected a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - set(RUNTIME_DEFAULTS))
    if unknown:
        raise ValueError(f"{origin}: unknown setting(s) {', '.join(unknown)}")
    schema = data.get("schema", RUNTIME_SCHEMA)
    if schema != RUNTIME_SCHEMA:
        raise ValueError(f"{origin}: schema is {schema!r}, expected {RUNTIME_SCHEMA!r}")
    devices = data.get("visible_devices")
    if devices is not None:
        if not isinstance(devices, str):
            raise ValueError(f'{origin}: visible_devices must be null or a string like "0,1"')
        parts = [p.strip() for p in devices.split(",")] if devices.strip() else []
        if not all(p.isdigit() or p.startswith(("GPU-", "MIG-")) for p in parts):
            raise ValueError(
                f"{origin}: visible_devices {devices!r} is not a comma-separated list "
                "of GPU indexes or UUIDs"
            )
    for key in ("memory_growth", "determinism"):
        if not isinstance(data.get(key, False), bool):
            raise ValueError(f"{origin}: {key} must be true or false")
    policy = data.get("mixed_precision", "float32")
    if policy not in POLICIES:
        raise ValueError(
            f"{origin}: mixed_precision {policy!r} is not one of {', '.join(POLICIES)}"
        )
    seed = data.get("seed")
    if seed is not None and (
        isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32
    ):
        raise ValueError(f"{origin}: seed must be null or an integer from 0 to 4294967295")
    config = RuntimeConfig()
    config.update(data)  # type: ignore[typeddict-item]  # the keys and types checked above
    return config


def load_runtime_config(expect_path: str | None) -> tuple[str | None, RuntimeConfig]:
    """The bundle's runtime.json (``runtime_candidates``), checked; ({}, None) when none."""
    for path in runtime_candidates(expect_path):
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            return path, check_runtime(data, path)
    return None, RuntimeConfig()


def apply_environment(framework: str, config: RuntimeConfig) -> tuple[bool, dict[str, str]]:
    """Settings that must be in the environment before the framework is imported."""
    applied = {}
    visible = config.get("visible_devices")
    # null: leave CUDA_VISIBLE_DEVICES alone; "": no GPU; "0,1": these GPUs.
    # A value already in the environment (docker run -e, the user) wins.
    if visible is not None and "CUDA_VISIBLE_DEVICES" not in os.environ:
        os.environ["CUDA_VISIBLE_DEVICES"] = visible
        applied["CUDA_VISIBLE_DEVICES"] = visible
    growth = config.get("memory_growth", True)
    if framework == "jax" and growth and "XLA_PYTHON_CLIENT_PREALLOCATE" not in os.environ:
        os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
        applied["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    if framework == "tensorflow":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    return growth, applied


# ---------------------------------------------------------------- XLA and ptxas

# The XLA check's function: a float32 layer (matmul, bias, tanh) and a row
# reduction, outputs in (-2, 2). Compiled and eager results differ by fusion
# and algorithm choice only; TF32 matmuls (the GPU default in TensorFlow and
# JAX) keep that below about 3e-4 at this size, so 2e-3 flags a wrong answer
# without tripping over rounding.
XLA_N = 256
XLA_TOLERANCE = 2e-3
PTXAS_FALLBACK_FLAG = "--xla_gpu_unsafe_fallback_to_driver_on_ptxas_not_found"
CUDA_ROOT = "/usr/local/cuda"  # XLA's generic CUDA root, also with "-X.Y" appended


class XlaUnavailable(Exception):
    """The framework has no compiler to try here, for a reason worth a SKIP."""


@dataclass(frozen=True)
class XlaProgram:
    """One small function, compiled and not, as an adapter prepares it.

    ``compiled()`` and ``reference()`` each run the function once and wait for
    the result; the first ``compiled()`` call includes the compilation.
    """

    what: str  # "tf.function(jit_compile=True)"
    reference_what: str  # "eager execution"
    compiled: Callable[[], Any]
    reference: Callable[[], Any]
    difference: Callable[[Any, Any], float]  # max |a - b|
    device_of: Callable[[Any], str]


def measure_xla(program: XlaProgram) -> XlaMeasure:
    """Time the first (compiling) and a second call, compare with the reference."""
    start = time.perf_counter()
    first = program.compiled()
    first_s = time.perf_counter() - start
    start = time.perf_counter()
    program.compiled()
    steady_s = time.perf_counter() - start
    reference = program.reference()
    return XlaMeasure(
        function=f"tanh(x @ w + b), less its row mean; float32 {XLA_N}x{XLA_N}",
        compiled_with=program.what,
        reference=program.reference_what,
        device=program.device_of(first),
        first_call_s=round(first_s, 4),
        steady_call_s=round(steady_s, 6),
        compile_s=round(max(0.0, first_s - steady_s), 4),
        max_difference=program.difference(first, reference),
        tolerance=XLA_TOLERANCE,
    )


def _xla_flags() -> list[str]:
    return os.environ.get("XLA_FLAGS", "").split()


def ptxas_version(path: str) -> str | None:
    """'12.2.140' from ``ptxas --version`` ("... release 12.2, V12.2.140"), or None."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    for word in out.stdout.replace(",", " ").split():
        if word.startswith("V") and _parts(word[1:]):
            return word[1:]
    return None


def ptxas_places(cuda: object = None) -> list[tuple[str, str, bool]]:
    """(source, folder, XLA searches it) in the order XLA looks, then CUDA_HOME.

    XLA (TensorFlow 2.15's and jaxlib's) takes ptxas from --xla_gpu_cuda_data_dir
    in XLA_FLAGS, then PATH, then the CUDA roots: /usr/local/cuda-X.Y (the
    toolkit it was built with), /usr/local/cuda and the nvidia-cuda-nvcc wheel
    beside it in site-packages (nvidia/cuda_nvcc/bin; CUDA 13 wheels:
    nvidia/cu13/bin). CUDA_HOME is listed last, as a place XLA does not search:
    TensorFlow 2.15's XLA does not read it (newer XLA does).
    """
    places: list[tuple[str, str, bool]] = []
    for flag in _xla_flags():
        if flag.startswith("--xla_gpu_cuda_data_dir="):
            places.append(("XLA_FLAGS", os.path.join(flag.split("=", 1)[1], "bin"), True))
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        if folder:
            places.append(("PATH", folder, True))
    release = ".".join(str(p) for p in _parts(cuda)[:2]) if cuda else ""
    if release.count(".") == 1:
        places.append(("CUDA toolkit", f"{CUDA_ROOT}-{release}/bin", True))
    places.append(("CUDA toolkit", f"{CUDA_ROOT}/bin", True))
    for entry in sys.path:
        nvidia = os.path.join(entry or ".", "nvidia")
        if not os.path.isdir(nvidia):
            continue
        for sub in sorted(os.listdir(nvidia)):
            if sub == "cuda_nvcc" or sub.startswith("cu1"):
                places.append(("nvidia-cuda-nvcc wheel", os.path.join(nvidia, sub, "bin"), True))
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home:
        places.append(("CUDA_HOME", os.path.join(home, "bin"), False))
    return places


def find_ptxas(cuda: object = None) -> Ptxas:
    """Where ptxas is: {'path', 'version', 'source', 'xla_finds'}, or {'path': None,
    'searched': [...]} (the folders looked in, PATH's entries as one)."""
    places = ptxas_places(cuda)
    for source, folder, searched in places:
        path = os.path.join(folder, "ptxas")
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return Ptxas(path=path, version=ptxas_version(path), source=source, xla_finds=searched)
    searched_in: list[str] = []
    for source, folder, _ in places:
        name = "PATH" if source == "PATH" else folder
        if name not in searched_in:
            searched_in.append(name)
    return Ptxas(path=None, searched=searched_in)


def nvcc_wheel(cuda: object) -> str:
    """The wheel that carries ptxas for a CUDA major: nvidia-cuda-nvcc-cu12 (the
    name TensorFlow's [and-cuda] extra pins), nvidia-cuda-nvcc from CUDA 13 on."""
    major = _parts(cuda)[:1]
    if major and major[0] < 13:
        return f"nvidia-cuda-nvcc-cu{major[0]}"
    return "nvidia-cuda-nvcc"


# ---------------------------------------------------------------- training

# The training step: a small convolutional classifier (a 3x3 convolution,
# batch normalization, ReLU, a dense layer over 10 classes) trained on one
# fixed synthetic batch, which it can learn by heart, so the loss must fall
# within a few steps. The convolution goes through cuDNN on a GPU, the backward
# pass and the optimizer step through the framework's kernels, and the compiled
# variants through XLA or TorchInductor: a matmul passes where any of these
# paths can still break.
TRAIN_SHAPE_GPU = {"batch": 64, "image": 32, "channels": 16}
TRAIN_SHAPE_CPU = {"batch": 16, "image": 8, "channels": 8}
TRAIN_CLASSES = 10
TRAIN_STEPS_GPU, TRAIN_STEPS_CPU = 20, 8


@dataclass(frozen=True)
class TrainVariant:
    """One way an adapter trains the model: ``plain`` is the framework's own
    uncompiled loop the others are timed against; ``compiled`` ones go through
    the framework's compiler (XLA, torch.compile); ``skip`` says why it is not run."""

    name: str  # the check is "train_" + name
    what: str
    plain: bool = False
    compiled: bool = False
    skip: str | None = None


def timed_steps(step: Callable[[], Any], steps: int) -> Trained:
    """Run ``step`` (one train step, returning its loss on the host) ``steps`` times."""
    losses, times = [], []
    for _ in range(steps):
        start = time.perf_counter()
        losses.append(float(step()))
        times.append(time.perf_counter() - start)
    return Trained(
        losses=losses,
        first_step_s=times[0],
        seconds_per_step=statistics.median(times[1:]) if len(times) > 1 else times[0],
    )


# Which execution path an error names, most specific first: a failure in
# training says whether cuDNN, the precompiled kernels, PTX JIT or the compiler broke.
BROKEN_PATHS = (
    ("cuDNN", ("cudnn", "dnn library", "dnn support")),
    ("precompiled kernels", ("no kernel image", "no_binary_for_gpu", "invalid device function")),
    ("PTX", ("ptx",)),
    ("XLA", ("xla", "jit_compile", "hlo ", "autotun")),
    ("TorchInductor", ("inductor", "triton", "dynamo", "c++ compiler")),
    ("cuBLAS", ("cublas",)),
)


def broken_path(text: object) -> str | None:
    """'cuDNN', 'PTX', 'XLA', ... named by an error's text, or None."""
    low = str(text).lower()
    for path, words in BROKEN_PATHS:
        if any(word in low for word in words):
            return path
    return None


RUNNING = "running"  # the log line before each check: "envlock-smoke: running NAME"
# The path a check exercises first, for a process that died inside it saying nothing.
CHECK_PATHS = {"cudnn_runtime": "cuDNN", "xla": "XLA"}


def logged_checks(log_text: str) -> list[CheckEntry]:
    """The verdicts a harness logged ("envlock-smoke: FAIL name: reason"), for one
    that died before it could print its document."""
    out: list[CheckEntry] = []
    for line in log_text.splitlines():
        if not line.startswith("envlock-smoke: "):
            continue
        status, _, rest = line[len("envlock-smoke: ") :].partition(" ")
        name, sep, reason = rest.strip().partition(": ")
        if status in (PASS, WARN, FAIL, SKIP) and sep and name and " " not in name:
            out.append(CheckEntry(name=name, status=status, reason=reason))
    return out


def died_in(log_text: str) -> tuple[str | None, str | None]:
    """(the check a harness was running when it died, the path that broke) from its log:
    the path its last words name, else the one that check exercises, else the one
    the last failed check before it named."""
    prefix = f"envlock-smoke: {RUNNING} "
    check, last_words = None, log_text
    lines = log_text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(prefix):
            check, last_words = line[len(prefix) :].strip(), "\n".join(lines[i + 1 :])
    path = broken_path(last_words) or CHECK_PATHS.get(check or "")
    if path is None and check is not None:
        failed = [c for c in logged_checks(log_text) if c["status"] == FAIL]
        path = broken_path(failed[-1]["reason"]) if failed else None
    return check, path


# ---------------------------------------------------------------- adapters


class Adapter:
    """What the harness needs from a framework. Each method may raise."""

    name = ""

    def __init__(self) -> None:
        self.module: Any = None  # the framework's top-level module, once loaded

    def load(self) -> None:
        raise NotImplementedError

    def version(self) -> str:
        raise NotImplementedError

    def build_info(self) -> BuildInfo:
        """{'cuda': str|None, 'cudnn': str|None, 'compute_capabilities': [..]|None, ...}"""
        raise NotImplementedError

    def set_memory_growth(self, enabled: bool) -> str | None:
        """Called before the GPU is used; returns a reason (None: nothing to set)."""
        raise NotImplementedError

    def gpus(self) -> list[GpuRow]:
        """[{'name', 'compute_capability', 'memory_total_mb'}] of visible GPUs."""
        raise NotImplementedError

    def runtime_cudnn(self) -> tuple[str | None, str]:
        """(version string, where) of the cuDNN loaded at runtime, or (None, why)."""
        raise NotImplementedError

    def op_on_gpu(self) -> tuple[str, float]:
        """Run a small op on GPU 0; returns (device string, max abs error vs the CPU)."""
        raise NotImplementedError

    def memory_in_use(self) -> dict[str, float]:
        """{'in_use_mb', 'reserved_mb'} for GPU 0, whatever the framework reports."""
        return {}

    def settings(self) -> FrameworkSettings:
        return {}

    train_model = ""  # the model the train steps fit, in words

    def train_variants(self, on_gpu: bool) -> list[TrainVariant]:
        """The ways this framework trains the model, the plain loop first."""
        return []

    train_api: tuple[str, ...] = ()  # the module's attributes the train steps use

    def train_missing(self) -> str | None:
        """Why this install cannot train at all (a framework without its training API)."""
        for name in self.train_api:
            try:
                found = getattr(self.module, name, None)
            except Exception:  # noqa: BLE001 - a lazy module that fails to load is missing
                found = None
            if found is None:
                what = f"{PRETTY[self.name]} {getattr(self.module, '__version__', '')}".strip()
                return f"{what} here has no {self.name}.{name} to train with"
        return None

    def train(self, variant: str, on_gpu: bool, steps: int, shape: dict[str, int]) -> Trained:
        """Train ``steps`` steps: {'losses', 'device', 'first_step_s', 'seconds_per_step', ...}."""
        raise NotImplementedError

    def set_precision_policy(self, policy: Any) -> tuple[str, str]:
        """Put runtime.json's mixed_precision in force; (status, reason)."""
        return SKIP, (
            f"runtime.json asks for {policy}; {PRETTY[self.name]} has no global precision "
            "policy (the training code chooses autocast/dtypes)"
        )

    def matmul_timer(self, dtype: str, n: int, on_gpu: bool) -> tuple[Callable[[int], float], str]:
        """Return (run(k) -> seconds for k chained, synchronized products, math label)."""
        raise NotImplementedError

    # XLA: a compile failure is a FAIL, unless the adapter says the compiler is
    # an optional extra (torch.compile); a GPU compile that needs ptxas is not
    # tried without it when trying would abort the process (TensorFlow).
    xla_failure = FAIL
    xla_needs_ptxas = False

    def xla_program(self, on_gpu: bool) -> XlaProgram:
        """The XLA check's function, compiled and not, on GPU 0 or the CPU."""
        raise XlaUnavailable(f"{PRETTY[self.name]} has no XLA check")


# -- TensorFlow's build facts from its headers (2.22 and later) -----------------
# From 2.22.0rc0 on, build_info holds only is_cuda_build and its siblings; the
# CUDA, cuDNN and compute capabilities are stated in the headers the package
# ships. The same reading as envlock.matrix.headers (which matrix refresh uses),
# kept here in the standard library alone; tests/test_matrix_headers.py checks
# that the copies agree.

TF_HEADERS = (
    (
        "cuda_config.h",
        (
            "include/third_party/gpus/cuda/cuda_config.h",
            "include/external/local_config_cuda/cuda/cuda/cuda_config.h",
        ),
    ),
    (
        "cudnn_version.h",
        (
            "include/external/cuda_cudnn/include/cudnn_version.h",
            "include/third_party/gpus/cudnn/include/cudnn_version.h",
        ),
    ),
)


def header_defines(text: str) -> dict[str, str]:
    """``#define NAME VALUE`` lines of a C header (the first of each name)."""
    import re

    out: dict[str, str] = {}
    pattern = r"^[ \t]*#[ \t]*define[ \t]+(\w+)(?:[ \t]+(.*?))?[ \t]*$"
    for m in re.finditer(pattern, text, re.MULTILINE):
        value = (m.group(2) or "").split("//")[0].split("/*")[0].strip()
        out.setdefault(m.group(1), value)
    return out


def header_build_facts(package_dir: str) -> dict[str, tuple[Any, str]]:
    """build_info-named facts the headers of an installed TensorFlow state, each
    with its source: ``cuda_version`` ("12.5.1", cuda_config.h), ``cudnn_version``
    ("9.10.0" from cudnn_version.h, else the major from cuda_config.h) and
    ``cuda_compute_capabilities`` (names; bare numbers split as every release that
    stated the split did, all compiled but the last, which is PTX:
    ``cuda_config.h+inferred-ptx``). Empty values (a CPU build) are left out."""
    texts: dict[str, str] = {}
    for name, paths in TF_HEADERS:
        for rel in paths:
            try:
                with open(os.path.join(package_dir, *rel.split("/")), "rb") as f:
                    texts[name] = f.read().decode("utf-8", "replace")
                break
            except OSError:
                continue
    config = header_defines(texts.get("cuda_config.h", ""))
    version = header_defines(texts.get("cudnn_version.h", ""))
    found: dict[str, tuple[Any, str]] = {}
    cuda = config.get("TF_CUDA_VERSION", "").strip('"').strip()
    if cuda:
        found["cuda_version"] = (cuda, "cuda_config.h")
    parts = [version.get(k, "") for k in ("CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL")]
    cudnn_major = config.get("TF_CUDNN_VERSION", "").strip('"').strip()
    if all(p.isdigit() for p in parts):
        found["cudnn_version"] = (".".join(parts), "cudnn_version.h")
    elif cudnn_major:
        found["cudnn_version"] = (cudnn_major, "cuda_config.h")
    raw = config.get("TF_CUDA_COMPUTE_CAPABILITIES", "")
    caps = [t.strip().strip('"').strip() for t in raw.split(",") if t.strip().strip('"')]
    if caps and all(t.startswith(("sm_", "compute_")) for t in caps):
        found["cuda_compute_capabilities"] = (caps, "cuda_config.h")
    elif caps:
        numbers = []
        for t in caps:
            major, _, minor = t.partition(".")
            if not major.isdigit() or (minor and not minor.isdigit()):
                return found  # not a list of capabilities: leave it out
            numbers.append(int(major) * 10 + int(minor) if minor else int(major))
        names = [f"sm_{n}" for n in numbers[:-1]] + [f"compute_{numbers[-1]}"]
        found["cuda_compute_capabilities"] = (names, "cuda_config.h+inferred-ptx")
    return found


def with_header_facts(
    info: dict[str, object], package_dir: str
) -> tuple[dict[str, object], dict[str, str]]:
    """``info`` (TensorFlow's build_info) completed from the headers where it lacks
    a fact, and where each fact came from ("build_info", "cuda_config.h", ...)."""
    out = dict(info)
    sources = {k: "build_info" for k in TF_FACTS if info.get(k)}
    missing = [k for k in TF_FACTS if not info.get(k)]
    if missing and package_dir:
        facts = header_build_facts(package_dir)
        for key in missing:
            if key in facts:
                out[key], sources[key] = facts[key]
    return out, sources


TF_FACTS = ("cuda_version", "cudnn_version", "cuda_compute_capabilities")


class TensorFlowAdapter(Adapter):
    name = "tensorflow"

    def load(self) -> None:
        import tensorflow as tf

        self.module = tf

    def version(self) -> str:
        return str(self.module.__version__)

    def build_info(self) -> BuildInfo:
        raw = dict(self.module.sysconfig.get_build_info())
        # 2.22 and later: the facts build_info no longer holds, from the package's headers
        package = os.path.dirname(str(getattr(self.module, "__file__", None) or ""))
        info, sources = with_header_facts(raw, package)
        caps = info.get("cuda_compute_capabilities")
        # the framework's own record: text, and a sequence of names
        return {
            "cuda": cast("str | None", info.get("cuda_version")),
            "cudnn": cast("str | None", info.get("cudnn_version")),
            "compute_capabilities": list(cast("Sequence[str]", caps)) if caps else None,
            "is_cuda_build": bool(raw.get("is_cuda_build", False)),
            "from": sources,
            "raw": {k: _jsonable(v) for k, v in raw.items()},
        }

    def _physical_gpus(self) -> list[Any]:
        return list(self.module.config.list_physical_devices("GPU"))

    def set_memory_growth(self, enabled: bool) -> str | None:
        gpus = self._physical_gpus()
        if not gpus:
            return None
        for gpu in gpus:
            self.module.config.experimental.set_memory_growth(gpu, enabled)
        got = [self.module.config.experimental.get_memory_growth(g) for g in gpus]
        if any(g != enabled for g in got):
            raise RuntimeError(f"memory growth reads back {got} after setting {enabled}")
        return f"memory growth {'on' if enabled else 'off'} on {len(gpus)} GPU(s)"

    def gpus(self) -> list[GpuRow]:
        out: list[GpuRow] = []
        for gpu in self._physical_gpus():
            details = self.module.config.experimental.get_device_details(gpu)
            cc = details.get("compute_capability")
            out.append(
                {
                    "name": details.get("device_name", gpu.name),
                    "compute_capability": f"{cc[0]}.{cc[1]}" if cc else None,
                    "memory_total_mb": None,
                    "device": gpu.name,
                }
            )
        return out

    def runtime_cudnn(self) -> tuple[str | None, str]:
        tf = self.module
        with tf.device("/GPU:0"):
            x = tf.random.normal([1, 16, 16, 4])
            k = tf.random.normal([3, 3, 4, 4])
            y = tf.nn.conv2d(x, k, strides=1, padding="SAME")
            y.numpy()
        version, path = cudnn_runtime_version()
        return version, path or "no libcudnn in the process after a convolution on GPU:0"

    def op_on_gpu(self) -> tuple[str, float]:
        tf = self.module
        a = tf.random.uniform([256, 256], seed=1)
        b = tf.random.uniform([256, 256], seed=2)
        with tf.device("/GPU:0"):
            c = tf.matmul(a, b)
        with tf.device("/CPU:0"):
            ref = tf.matmul(a, b)
        err = float(tf.reduce_max(tf.abs(c - ref)).numpy())
        return c.device, err

    def memory_in_use(self) -> dict[str, float]:
        info = self.module.config.experimental.get_memory_info("GPU:0")
        return {
            "in_use_mb": round(info["current"] / 2**20, 1),
            "peak_mb": round(info["peak"] / 2**20, 1),
        }

    def settings(self) -> FrameworkSettings:
        out = FrameworkSettings()
        try:
            out["tensor_float_32"] = bool(
                self.module.config.experimental.tensor_float_32_execution_enabled()
            )
        except Exception as e:  # noqa: BLE001 - reported, not fatal
            out["tensor_float_32"] = f"unknown ({_error_text(e)})"
        try:
            out["precision_policy"] = self.module.keras.mixed_precision.global_policy().name
        except Exception as e:  # noqa: BLE001
            out["precision_policy"] = f"unknown ({_error_text(e)})"
        return out

    def set_precision_policy(self, policy: Any) -> tuple[str, str]:
        mp = self.module.keras.mixed_precision
        mp.set_global_policy(policy)
        got = mp.global_policy().name
        if got != policy:
            return FAIL, f"asked for precision policy {policy}, Keras reports {got}"
        return PASS, f"Keras precision policy {got} in force (runtime.json)"

    train_model = "Conv2D 3x3 (no bias) + BatchNormalization + ReLU + Dense(10), Adam"
    train_api = ("keras", "data", "GradientTape")

    def train_variants(self, on_gpu: bool) -> list[TrainVariant]:
        fit = "model.fit on tf.data (prefetch)"
        return [
            TrainVariant("eager", "an eager tf.GradientTape loop, float32", plain=True),
            TrainVariant("fit_float32", fit + ", float32"),
            TrainVariant("fit_mixed_float16", fit + ", mixed_float16 policy"),
            TrainVariant("fit_jit_compile", fit + ", jit_compile=True", compiled=True),
        ]

    def _conv_model(self, shape: dict[str, int], jit: bool) -> Any:
        keras = self.module.keras
        layers = keras.layers
        size = shape["image"]
        model = keras.Sequential(
            [
                keras.Input(shape=(size, size, 3)),
                layers.Conv2D(shape["channels"], 3, padding="same", use_bias=False),
                layers.BatchNormalization(),
                layers.Activation("relu"),
                layers.Flatten(),
                layers.Dense(TRAIN_CLASSES),
                layers.Activation(
                    "linear", dtype="float32"
                ),  # float32 logits under mixed precision
            ]
        )
        model.compile(
            optimizer=keras.optimizers.Adam(learning_rate=0.01),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            jit_compile=jit,
        )
        return model

    def train(self, variant: str, on_gpu: bool, steps: int, shape: dict[str, int]) -> Trained:
        tf = self.module
        mp = tf.keras.mixed_precision
        device = "/GPU:0" if on_gpu else "/CPU:0"
        batch, size = shape["batch"], shape["image"]
        original = mp.global_policy().name  # runtime.json's, when it set one
        policy = "mixed_float16" if variant == "fit_mixed_float16" else "float32"
        try:
            mp.set_global_policy(policy)
            with tf.device(device):
                x = tf.random.stateless_normal([batch, size, size, 3], seed=[1, 2])
                y = tf.random.stateless_uniform(
                    [batch], seed=[3, 4], minval=0, maxval=TRAIN_CLASSES, dtype=tf.int32
                )
                model = self._conv_model(shape, jit=variant == "fit_jit_compile")
                if variant == "eager":
                    found = self._eager_loop(model, x, y, steps)
                else:
                    found = self._fit(model, x, y, steps)
            found["device"] = self._variable_device(model.trainable_variables[0])
            found["compute_dtype"] = str(model.layers[0].compute_dtype)
            found["policy"] = policy
            found["runtime_policy"] = original
        finally:
            mp.set_global_policy(original)
        return found

    @staticmethod
    def _variable_device(variable: Any) -> str:
        """Where a weight lives: a tf.Variable's device, or (Keras 3, TensorFlow 2.16
        and later) that of the tf.Variable inside the Keras variable."""
        device = getattr(variable, "device", None)
        if device is None:
            device = getattr(getattr(variable, "value", None), "device", None)
        return str(device)

    def _eager_loop(self, model: Any, x: Any, y: Any, steps: int) -> Trained:
        tf = self.module
        loss_fn, optimizer = model.loss, model.optimizer

        def step() -> float:
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return float(loss.numpy())

        return timed_steps(step, steps)

    def _fit(self, model: Any, x: Any, y: Any, steps: int) -> Trained:
        tf = self.module
        data = tf.data.Dataset.from_tensors((x, y)).repeat().prefetch(tf.data.AUTOTUNE)
        times: list[float] = []

        class Timer(tf.keras.callbacks.Callback):  # type: ignore[misc,name-defined]
            def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
                self.start = time.perf_counter()

            def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
                times.append(time.perf_counter() - self.start)

        # one step an epoch: the history holds each step's loss, the timer each step's time
        history = model.fit(data, epochs=steps, steps_per_epoch=1, verbose=0, callbacks=[Timer()])
        return Trained(
            losses=[float(v) for v in history.history["loss"]],
            first_step_s=times[0],
            seconds_per_step=statistics.median(times[1:]) if len(times) > 1 else times[0],
        )

    def matmul_timer(self, dtype: str, n: int, on_gpu: bool) -> tuple[Callable[[int], float], str]:
        tf = self.module
        device = "/GPU:0" if on_gpu else "/CPU:0"
        tf_dtype = {"fp32": tf.float32, "fp16": tf.float16, "bf16": tf.bfloat16}[dtype]
        with tf.device(device):
            a = tf.cast(tf.random.normal([n, n]), tf_dtype)
            b = tf.cast(tf.random.normal([n, n]), tf_dtype)
            a.numpy()[0, 0]

        def run(k: int) -> float:
            with tf.device(device):
                start = time.perf_counter()
                c: Any = None
                for _ in range(k):
                    c = tf.matmul(a, b)
                c[0, 0].numpy()  # one element to the host: waits for the stream
                return time.perf_counter() - start

        math = dtype
        if (
            dtype == "fp32"
            and on_gpu
            and tf.config.experimental.tensor_float_32_execution_enabled()
        ):
            math = "tf32"
        return run, math

    xla_needs_ptxas = True  # without it XLA:GPU aborts the process (LOG(FATAL))

    def xla_program(self, on_gpu: bool) -> XlaProgram:
        tf = self.module
        device = "/GPU:0" if on_gpu else "/CPU:0"
        with tf.device(device):
            x = tf.random.stateless_uniform([XLA_N, XLA_N], seed=[1, 2], minval=-1, maxval=1)
            w = tf.random.stateless_uniform(
                [XLA_N, XLA_N], seed=[3, 4], minval=-(XLA_N**-0.5), maxval=XLA_N**-0.5
            )
            b = tf.random.stateless_uniform([XLA_N], seed=[5, 6], minval=-0.1, maxval=0.1)

        def layer(x: Any, w: Any, b: Any) -> Any:
            y = tf.tanh(tf.matmul(x, w) + b)
            return y - tf.reduce_mean(y, axis=1, keepdims=True)

        compiled = tf.function(layer, jit_compile=True)

        def run_compiled() -> Any:
            with tf.device(device):
                out = compiled(x, w, b)
            out.numpy()  # to the host: waits for the device
            return out

        def run_eager() -> Any:
            with tf.device(device):
                out = layer(x, w, b)
            out.numpy()
            return out

        return XlaProgram(
            what="tf.function(jit_compile=True)",
            reference_what="eager execution",
            compiled=run_compiled,
            reference=run_eager,
            difference=lambda a, r: float(tf.reduce_max(tf.abs(a - r)).numpy()),
            device_of=lambda out: str(out.device),
        )


class TorchAdapter(Adapter):
    name = "torch"

    def load(self) -> None:
        import torch

        self.module = torch

    def version(self) -> str:
        return str(self.module.__version__)

    def build_info(self) -> BuildInfo:
        torch = self.module
        cudnn = None
        try:
            if torch.backends.cudnn.is_available():
                cudnn = cudnn_from_int(torch.backends.cudnn.version())
        except Exception:  # noqa: BLE001 - a CPU build answers with errors
            cudnn = None
        caps = None
        if torch.version.cuda:
            try:
                caps = list(torch.cuda.get_arch_list()) or None
            except Exception:  # noqa: BLE001
                caps = None
        return {
            "cuda": torch.version.cuda,
            "cudnn": cudnn,
            "compute_capabilities": caps,
            "is_cuda_build": torch.version.cuda is not None,
            "raw": {"git_version": getattr(torch.version, "git_version", None)},
        }

    def set_memory_growth(self, enabled: bool) -> str | None:
        # PyTorch's caching allocator takes memory as tensors need it; the
        # check that follows the op (memory_in_use) shows it held a small part.
        conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or "default config"
        if not enabled:
            return f"PyTorch has no preallocation switch; its allocator grows on demand ({conf})"
        return f"PyTorch's caching allocator grows on demand ({conf})"

    def gpus(self) -> list[GpuRow]:
        torch = self.module
        if not torch.cuda.is_available():
            return []
        out: list[GpuRow] = []
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            out.append(
                {
                    "name": p.name,
                    "compute_capability": f"{p.major}.{p.minor}",
                    "memory_total_mb": int(p.total_memory // 2**20),
                    "device": f"cuda:{i}",
                }
            )
        return out

    def runtime_cudnn(self) -> tuple[str | None, str]:
        torch = self.module
        if not torch.backends.cudnn.is_available():
            return None, "torch.backends.cudnn reports cuDNN unavailable"
        x = torch.randn(1, 4, 16, 16, device="cuda:0")
        w = torch.randn(4, 4, 3, 3, device="cuda:0")
        torch.nn.functional.conv2d(x, w, padding=1)
        torch.cuda.synchronize()
        version = cudnn_from_int(torch.backends.cudnn.version())
        paths = loaded_libraries("libcudnn")
        return version, paths[0] if paths else "torch.backends.cudnn"

    def op_on_gpu(self) -> tuple[str, float]:
        torch = self.module
        g = torch.Generator().manual_seed(1)
        a = torch.rand(256, 256, generator=g)
        b = torch.rand(256, 256, generator=g)
        c = a.to("cuda:0") @ b.to("cuda:0")
        torch.cuda.synchronize()
        err = float((c.cpu() - a @ b).abs().max())
        return str(c.device), err

    def memory_in_use(self) -> dict[str, float]:
        torch = self.module
        return {
            "in_use_mb": round(torch.cuda.memory_allocated(0) / 2**20, 1),
            "reserved_mb": round(torch.cuda.memory_reserved(0) / 2**20, 1),
        }

    def settings(self) -> FrameworkSettings:
        torch = self.module
        return {
            "allow_tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32),
            "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "PYTORCH_CUDA_ALLOC_CONF": os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
        }

    def matmul_timer(self, dtype: str, n: int, on_gpu: bool) -> tuple[Callable[[int], float], str]:
        torch = self.module
        device = "cuda:0" if on_gpu else "cpu"
        t_dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
        g = torch.Generator(device=device).manual_seed(0)
        a = torch.randn(n, n, device=device, dtype=t_dtype, generator=g)
        b = torch.randn(n, n, device=device, dtype=t_dtype, generator=g)
        out = torch.empty(n, n, device=device, dtype=t_dtype)

        def sync() -> None:
            if on_gpu:
                torch.cuda.synchronize()

        def run(k: int) -> float:
            sync()
            start = time.perf_counter()
            for _ in range(k):
                torch.matmul(a, b, out=out)
            sync()
            return time.perf_counter() - start

        math = dtype
        if dtype == "fp32" and on_gpu and torch.backends.cuda.matmul.allow_tf32:
            math = "tf32"
        return run, math

    train_model = "Conv2d 3x3 (no bias) + BatchNorm2d + ReLU + Linear(10), Adam"
    train_api = ("nn", "optim")

    def train_variants(self, on_gpu: bool) -> list[TrainVariant]:
        torch = self.module
        half = "float16, with a GradScaler" if on_gpu else "bfloat16"
        compile_skip = None
        if not callable(getattr(torch, "compile", None)):
            compile_skip = f"PyTorch {torch.__version__} has no torch.compile (it came with 2.0)"
        elif not on_gpu:
            # Inductor's C++ build of a training graph costs tens of seconds on a CPU;
            # the xla check has already compiled a function there
            compile_skip = (
                "torch.compile training runs on the GPU only (the xla check covers the CPU)"
            )
        return [
            TrainVariant("eager", "an eager loop, float32", plain=True),
            TrainVariant("autocast", f"an eager loop under torch.autocast, {half}"),
            TrainVariant(
                "compile",
                "torch.compile (TorchInductor), float32",
                compiled=True,
                skip=compile_skip,
            ),
        ]

    def train(self, variant: str, on_gpu: bool, steps: int, shape: dict[str, int]) -> Trained:
        torch = self.module
        nn = torch.nn
        device = "cuda:0" if on_gpu else "cpu"
        batch, size, channels = shape["batch"], shape["image"], shape["channels"]
        g = torch.Generator().manual_seed(1)
        x = torch.randn(batch, 3, size, size, generator=g).to(device)
        y = torch.randint(0, TRAIN_CLASSES, (batch,), generator=g).to(device)
        torch.manual_seed(2)
        model = nn.Sequential(
            nn.Conv2d(3, channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(channels),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(channels * size * size, TRAIN_CLASSES),
        ).to(device)
        model.train()
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        loss_fn = nn.CrossEntropyLoss()
        forward = torch.compile(model) if variant == "compile" else model
        autocast = variant == "autocast"
        dtype = (torch.float16 if on_gpu else torch.bfloat16) if autocast else torch.float32
        scaler = None
        if autocast and on_gpu:
            amp = getattr(torch, "amp", None)
            if amp is not None and hasattr(amp, "GradScaler"):
                scaler = amp.GradScaler("cuda")
            else:  # before 2.3
                scaler = torch.cuda.amp.GradScaler()
        seen: dict[str, str] = {}  # the forward pass's dtype and device

        def step() -> float:
            optimizer.zero_grad(set_to_none=True)
            if autocast:
                with torch.autocast(device_type="cuda" if on_gpu else "cpu", dtype=dtype):
                    out = forward(x)
                    loss = loss_fn(out, y)
            else:
                out = forward(x)
                loss = loss_fn(out, y)
            seen["dtype"], seen["device"] = str(out.dtype), str(loss.device)
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
            else:
                loss.backward()
                optimizer.step()
            return float(loss.item())  # to the host: waits for the GPU

        found = timed_steps(step, steps)
        weights = next(model.parameters()).device
        found["device"] = str(weights) if str(weights) == seen["device"] else seen["device"]
        found["compute_dtype"] = seen["dtype"]
        return found

    xla_failure = WARN  # torch.compile is an extra: it needs Triton (GPU) or a C++ compiler

    def xla_program(self, on_gpu: bool) -> XlaProgram:
        torch = self.module
        if not callable(getattr(torch, "compile", None)):
            raise XlaUnavailable(
                f"PyTorch {torch.__version__} has no torch.compile (it came with 2.0)"
            )
        device = "cuda:0" if on_gpu else "cpu"
        g = torch.Generator().manual_seed(1)
        x = (torch.rand(XLA_N, XLA_N, generator=g) * 2 - 1).to(device)
        w = ((torch.rand(XLA_N, XLA_N, generator=g) * 2 - 1) * XLA_N**-0.5).to(device)
        b = ((torch.rand(XLA_N, generator=g) * 2 - 1) * 0.1).to(device)

        def layer(x: Any, w: Any, b: Any) -> Any:
            y = torch.tanh(x @ w + b)
            return y - y.mean(dim=1, keepdim=True)

        compiled = torch.compile(layer, fullgraph=True)  # a graph break is an error

        def sync() -> None:
            if on_gpu:
                torch.cuda.synchronize()

        def run_compiled() -> Any:
            out = compiled(x, w, b)
            sync()
            return out

        def run_eager() -> Any:
            out = layer(x, w, b)
            sync()
            return out

        return XlaProgram(
            what="torch.compile (TorchInductor)",
            reference_what="eager execution",
            compiled=run_compiled,
            reference=run_eager,
            difference=lambda a, r: float((a - r).abs().max()),
            device_of=lambda out: str(out.device),
        )


class JaxAdapter(Adapter):
    name = "jax"

    def load(self) -> None:
        import jax

        self.module = jax
        self.jaxlib_version: str | None = None
        try:
            import jaxlib

            self.jaxlib_version = getattr(jaxlib, "__version__", None)
        except ImportError:
            pass

    def version(self) -> str:
        return str(self.module.__version__)

    def _gpu_devices(self) -> list[Any]:
        return [d for d in self.module.devices() if d.platform in ("gpu", "cuda", "rocm")]

    def _plugin(self) -> tuple[str | None, str | None]:
        """(name, version) of the installed CUDA plugin distribution, if any."""
        from importlib import metadata

        for dist in metadata.distributions():
            fields: Any = dist.metadata  # an email Message: get() answers None when absent
            name = (fields.get("Name") or "").lower()
            if name.startswith("jax-cuda") and name.endswith("-plugin"):
                return name, dist.version
        return None, None

    def build_info(self) -> BuildInfo:
        plugin, plugin_version = self._plugin()
        cuda = None
        if plugin:
            digits = "".join(ch for ch in plugin.split("-")[1] if ch in DIGITS)
            cuda = digits or None
        cudnn = None
        try:
            from jax._src.lib import cuda_versions  # jaxlib's own record, when present

            if cuda_versions is not None:
                cuda = self._cuda_text(cuda_versions.cuda_runtime_build_version()) or cuda
                cudnn = cudnn_from_int(cuda_versions.cudnn_build_version())
        except Exception:  # noqa: BLE001 - private API, optional
            pass
        return {
            "cuda": cuda,
            "cudnn": cudnn,
            "compute_capabilities": None,
            "is_cuda_build": plugin is not None,
            "raw": {
                "jaxlib": self.jaxlib_version,
                "plugin": plugin,
                "plugin_version": plugin_version,
            },
        }

    @staticmethod
    def _cuda_text(value: Any) -> str | None:
        if not value:
            return None
        value = int(value)
        return f"{value // 1000}.{(value % 1000) // 10}"

    def set_memory_growth(self, enabled: bool) -> str | None:
        value = os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE")
        if enabled and value != "false":
            raise RuntimeError(
                f"XLA_PYTHON_CLIENT_PREALLOCATE={value}: JAX preallocates most of the GPU"
            )
        return f"XLA_PYTHON_CLIENT_PREALLOCATE={value} before jax started"

    def gpus(self) -> list[GpuRow]:
        out: list[GpuRow] = []
        for d in self._gpu_devices():
            out.append(
                {
                    "name": d.device_kind,
                    "compute_capability": getattr(d, "compute_capability", None),
                    "memory_total_mb": None,  # nvidia-smi's; memory_stats has the pool limit
                    "device": str(d),
                }
            )
        return out

    def runtime_cudnn(self) -> tuple[str | None, str]:
        jax = self.module
        dev = self._gpu_devices()[0]
        x = jax.device_put(jax.numpy.ones((1, 4, 16, 16), "float32"), dev)
        w = jax.device_put(jax.numpy.ones((4, 4, 3, 3), "float32"), dev)
        jax.lax.conv(x, w, (1, 1), "SAME").block_until_ready()
        version, path = cudnn_runtime_version()
        return version, path or "no libcudnn in the process after a convolution on the GPU"

    def op_on_gpu(self) -> tuple[str, float]:
        jax = self.module
        import random

        rng = random.Random(1)
        rows = [[rng.random() for _ in range(128)] for _ in range(128)]
        dev = self._gpu_devices()[0]
        cpu = jax.devices("cpu")[0]
        a_gpu = jax.device_put(jax.numpy.asarray(rows, "float32"), dev)
        a_cpu = jax.device_put(jax.numpy.asarray(rows, "float32"), cpu)
        hi = jax.lax.Precision.HIGHEST
        c = jax.numpy.matmul(a_gpu, a_gpu, precision=hi).block_until_ready()
        ref = jax.numpy.matmul(a_cpu, a_cpu, precision=hi)
        err = float(abs(jax.device_get(c) - jax.device_get(ref)).max())
        devices = c.devices() if hasattr(c, "devices") else {c.device()}
        return ",".join(str(d) for d in devices), err

    def memory_in_use(self) -> dict[str, float]:
        stats = self._gpu_devices()[0].memory_stats() or {}
        out = {}
        if "bytes_in_use" in stats:
            out["in_use_mb"] = round(stats["bytes_in_use"] / 2**20, 1)
        if "pool_bytes" in stats:
            out["reserved_mb"] = round(stats["pool_bytes"] / 2**20, 1)
        if "bytes_limit" in stats:
            out["limit_mb"] = round(stats["bytes_limit"] / 2**20, 1)
        return out

    def settings(self) -> FrameworkSettings:
        cfg = self.module.config
        return {
            "XLA_PYTHON_CLIENT_PREALLOCATE": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE"),
            "XLA_PYTHON_CLIENT_MEM_FRACTION": os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION"),
            "default_matmul_precision": str(getattr(cfg, "jax_default_matmul_precision", None)),
        }

    def matmul_timer(self, dtype: str, n: int, on_gpu: bool) -> tuple[Callable[[int], float], str]:
        jax = self.module
        jnp = jax.numpy
        dev = self._gpu_devices()[0] if on_gpu else jax.devices("cpu")[0]
        j_dtype = {"fp32": jnp.float32, "fp16": jnp.float16, "bf16": jnp.bfloat16}[dtype]
        k1, k2 = jax.random.split(jax.random.PRNGKey(0))
        a = jax.device_put(jax.random.normal(k1, (n, n), j_dtype), dev)
        b = jax.device_put(jax.random.normal(k2, (n, n), j_dtype), dev)
        precision = jax.lax.Precision.HIGHEST if dtype == "fp32" else None
        mm = jax.jit(lambda x, y: jnp.matmul(x, y, precision=precision))
        mm(a, b).block_until_ready()

        def run(k: int) -> float:
            start = time.perf_counter()
            outs = [mm(a, b) for _ in range(k)]
            jax.block_until_ready(outs)
            return time.perf_counter() - start

        return run, dtype

    def xla_program(self, on_gpu: bool) -> XlaProgram:
        jax = self.module
        jnp = jax.numpy
        dev = self._gpu_devices()[0] if on_gpu else jax.devices("cpu")[0]
        kx, kw, kb = jax.random.split(jax.random.PRNGKey(1), 3)
        bound = XLA_N**-0.5
        x = jax.device_put(jax.random.uniform(kx, (XLA_N, XLA_N), jnp.float32, -1, 1), dev)
        w = jax.device_put(jax.random.uniform(kw, (XLA_N, XLA_N), jnp.float32, -bound, bound), dev)
        b = jax.device_put(jax.random.uniform(kb, (XLA_N,), jnp.float32, -0.1, 0.1), dev)

        def layer(x: Any, w: Any, b: Any) -> Any:
            y = jnp.tanh(x @ w + b)
            return y - y.mean(axis=1, keepdims=True)

        compiled = jax.jit(layer)

        def run_compiled() -> Any:
            return compiled(x, w, b).block_until_ready()

        def run_eager() -> Any:
            with jax.disable_jit():  # op by op, nothing fused
                return layer(x, w, b).block_until_ready()

        def device_of(out: Any) -> str:
            devices = out.devices() if hasattr(out, "devices") else {out.device()}
            return ",".join(str(d) for d in devices)

        return XlaProgram(
            what="jax.jit",
            reference_what="the same function under jax.disable_jit()",
            compiled=run_compiled,
            reference=run_eager,
            difference=lambda a, r: float(jnp.max(jnp.abs(a - r))),
            device_of=device_of,
        )

    train_model = "lax.conv_general_dilated 3x3 + batch norm + ReLU + dense(10), SGD"
    train_api = ("lax", "nn", "value_and_grad")

    def train_variants(self, on_gpu: bool) -> list[TrainVariant]:
        return [
            TrainVariant(
                "eager", "the train step un-jitted (jax.disable_jit()), float32", plain=True
            ),
            TrainVariant("jit", "a jax.jit train step, float32", compiled=True),
            TrainVariant(
                "jit_bfloat16",
                "a jax.jit train step, bfloat16 compute",
                compiled=True,
                skip=None if on_gpu else "bfloat16 compute is trained on the GPU only",
            ),
        ]

    def train(self, variant: str, on_gpu: bool, steps: int, shape: dict[str, int]) -> Trained:
        jax = self.module
        jnp = jax.numpy
        dev = self._gpu_devices()[0] if on_gpu else jax.devices("cpu")[0]
        batch, size, channels = shape["batch"], shape["image"], shape["channels"]
        compute = jnp.bfloat16 if variant == "jit_bfloat16" else jnp.float32
        kx, ky, kk, kw = jax.random.split(jax.random.PRNGKey(1), 4)
        features = channels * size * size
        put = functools.partial(jax.device_put, device=dev)
        x = put(jax.random.normal(kx, (batch, 3, size, size), jnp.float32))
        y = put(jax.random.randint(ky, (batch,), 0, TRAIN_CLASSES))
        params = {
            "conv": put(jax.random.normal(kk, (channels, 3, 3, 3), jnp.float32) * (27**-0.5)),
            "scale": put(jnp.ones((channels,), jnp.float32)),
            "shift": put(jnp.zeros((channels,), jnp.float32)),
            "w": put(
                jax.random.normal(kw, (features, TRAIN_CLASSES), jnp.float32) * features**-0.5
            ),
            "b": put(jnp.zeros((TRAIN_CLASSES,), jnp.float32)),
        }

        def loss_fn(p: Any, x: Any, y: Any) -> Any:
            h = jax.lax.conv_general_dilated(
                x.astype(compute),
                p["conv"].astype(compute),
                window_strides=(1, 1),
                padding="SAME",
                dimension_numbers=("NCHW", "OIHW", "NCHW"),
            ).astype(jnp.float32)
            mean = h.mean(axis=(0, 2, 3), keepdims=True)
            var = h.var(axis=(0, 2, 3), keepdims=True)
            h = (h - mean) * jax.lax.rsqrt(var + 1e-5)
            h = h * p["scale"][None, :, None, None] + p["shift"][None, :, None, None]
            h = jax.nn.relu(h).reshape(h.shape[0], -1)
            logits = (h.astype(compute) @ p["w"].astype(compute)).astype(jnp.float32) + p["b"]
            logp = jax.nn.log_softmax(logits)
            return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

        def train_step(p: Any, x: Any, y: Any) -> Any:
            loss, grads = jax.value_and_grad(loss_fn)(p, x, y)
            return jax.tree_util.tree_map(lambda a, g: a - 0.1 * g, p, grads), loss

        compiled = jax.jit(train_step)
        state: dict[str, Any] = {"params": params, "loss": None}

        def step() -> float:
            if variant == "eager":
                with jax.disable_jit():
                    state["params"], loss = train_step(state["params"], x, y)
            else:
                state["params"], loss = compiled(state["params"], x, y)
            state["loss"] = loss
            return float(loss)  # to the host: waits for the device

        found = timed_steps(step, steps)
        loss = state["loss"]
        devices = loss.devices() if hasattr(loss, "devices") else {loss.device()}
        found["device"] = ",".join(str(d) for d in devices)
        found["compute_dtype"] = jnp.dtype(compute).name
        return found


ADAPTERS: dict[str, Callable[[], Adapter]] = {
    "tensorflow": TensorFlowAdapter,
    "torch": TorchAdapter,
    "jax": JaxAdapter,
}


def detect_frameworks() -> list[str]:
    """The frameworks this interpreter can import (found, not imported), in FRAMEWORKS order."""
    import importlib.util

    found = []
    for name in FRAMEWORKS:
        try:
            if importlib.util.find_spec(name) is not None:
                found.append(name)
        except (ImportError, ValueError):  # a broken package: its import check says why
            found.append(name)
    return found


def detect_framework() -> str | None:
    """The first importable framework (what a run of one framework picked before)."""
    found = detect_frameworks()
    return found[0] if found else None


# ---------------------------------------------------------------- peaks


def _normalize_gpu_name(name: object) -> str:
    text = str(name)
    if "(" in text:
        text = text.split("(")[0]
    return " ".join(text.split()).casefold()


def find_peak(peaks: object, gpu_name: object) -> Peak | None:
    """The gpu_peaks entry for a GPU name as the framework or nvidia-smi shows it.

    Exact (ignoring case and a parenthesised suffix), else the longest entry name
    the reported name starts with, followed by a space or a dash
    ("Tesla V100-SXM2-16GB" -> "Tesla V100-SXM2"), as envlock's gpus matrix matches.
    """
    if not isinstance(peaks, list) or not gpu_name:  # JSON: a list of objects, or not peaks
        return None
    wanted = _normalize_gpu_name(gpu_name)
    best: Peak | None = None
    for item in peaks:
        if not isinstance(item, dict):
            continue
        entry = cast(Peak, item)  # as read: measure_matmul uses what it holds
        name = _normalize_gpu_name(entry.get("name", ""))
        if not name:
            continue
        if name == wanted:
            return entry
        longer = best is None or len(name) > len(_normalize_gpu_name(best.get("name", "")))
        if wanted.startswith(name) and wanted[len(name)] in " -" and longer:
            best = entry
    return best


# ---------------------------------------------------------------- options


@dataclass(frozen=True)
class Options:
    """The command line as plain values (parse_args makes them; its defaults apply)."""

    expect: str | None
    framework: str | None
    allow_cpu: bool
    size: int | None
    repeats: int
    per_repeat: int | None
    warmup: int
    warmup_seconds: float | None
    peaks: str | None
    min_fraction: float
    benchmark: bool  # False: --no-benchmark
    training: bool  # False: --no-training
    training_steps: int | None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="envlock_smoke.py",
        allow_abbrev=False,  # options by their whole names only, as envlock's own
        description="envlock smoke test: framework, CUDA/cuDNN build, GPU use and matmul speed.",
    )
    p.add_argument("--expect", metavar="FILE", help="expect.json from the bundle")
    p.add_argument(
        "--framework",
        choices=FRAMEWORKS,
        help="test this framework alone; default: expect.json's frameworks (or framework), "
        "else every importable one, each in a process of its own",
    )
    p.add_argument("--allow-cpu", action="store_true", help="no GPU is a warning, not a failure")
    p.add_argument(
        "--size", type=int, help="matmul size N (NxN @ NxN); default 8192 on GPU, 512 on CPU"
    )
    p.add_argument("--repeats", type=int, default=7, help="timed repeats; the median is reported")
    p.add_argument(
        "--per-repeat",
        type=int,
        help="products per timed repeat (default: 50 ms worth on GPU, 2 on CPU)",
    )
    p.add_argument("--warmup", type=int, default=3, help="untimed products first")
    p.add_argument(
        "--warmup-seconds",
        type=float,
        help="keep warming up this long (default 1.0 on GPU, 0 on CPU)",
    )
    p.add_argument("--peaks", metavar="FILE", help="JSON list of GPU datasheet peaks (gpu_peaks)")
    p.add_argument(
        "--min-fraction",
        type=float,
        default=0.5,
        help="half-precision matmul below this fraction of the peak is a warning (default 0.5)",
    )
    p.add_argument("--no-benchmark", action="store_true", help="checks only")
    p.add_argument(
        "--no-training",
        dest="training",
        action="store_false",
        help="skip the training checks (a small conv net trained a few steps per variant: "
        "the loss must fall, on the GPU)",
    )
    p.add_argument(
        "--training",
        dest="training",
        action="store_true",
        help="the training checks run by default; kept for old callers",
    )
    p.add_argument(
        "--training-steps",
        type=int,
        help=f"steps per training variant (default {TRAIN_STEPS_GPU} GPU, {TRAIN_STEPS_CPU} CPU; "
        "at least 3)",
    )
    return p


def parse_args(argv: Sequence[str] | None = None) -> Options:
    ns = build_parser().parse_args(argv)
    return Options(
        expect=ns.expect,
        framework=ns.framework,
        allow_cpu=ns.allow_cpu,
        size=ns.size,
        repeats=ns.repeats,
        per_repeat=ns.per_repeat,
        warmup=ns.warmup,
        warmup_seconds=ns.warmup_seconds,
        peaks=ns.peaks,
        min_fraction=ns.min_fraction,
        benchmark=not ns.no_benchmark,
        training=ns.training,
        training_steps=ns.training_steps,
    )


# ---------------------------------------------------------------- context


@dataclass(frozen=True)
class Verdict:
    """What a check found: PASS, WARN, FAIL or SKIP, why, and extra keys for its entry."""

    status: str
    reason: str
    extra: CheckExtra = field(default_factory=CheckExtra)


@dataclass
class Context:
    """One smoke run: the options, what the lock expects, the framework's adapter,
    and what the checks found so far (``document`` lays that out as the result)."""

    options: Options
    checks: list[CheckEntry] = field(default_factory=list)
    failed: set[str] = field(default_factory=set)  # checks that crashed
    host: HostInfo = field(default_factory=HostInfo)
    expect_file: Expect = field(default_factory=Expect)  # expect.json as read
    expect: Expect = field(default_factory=Expect)  # what this framework is judged against
    peaks: object = None  # gpu_peaks: expect.json's, or the --peaks file's
    framework: str = ""
    loaded: Adapter | None = None  # the framework's adapter, once it imported
    config_path: str | None = None
    config: RuntimeConfig = field(default_factory=RuntimeConfig)  # runtime.json
    memory_growth: bool = True
    memory_growth_reason: str | None = None
    settings: Settings = field(default_factory=Settings)
    version: str | None = None
    build: BuildInfo = field(default_factory=BuildInfo)
    gpus: list[GpuRow] = field(default_factory=list)
    benchmark: Benchmark = field(default_factory=Benchmark)

    @property
    def adapter(self) -> Adapter:
        """The loaded framework (for the checks that run after 'import')."""
        if self.loaded is None:
            raise RuntimeError("no framework has been imported yet")
        return self.loaded

    @property
    def pretty(self) -> str:
        return PRETTY[self.framework]

    @property
    def on_gpu(self) -> bool:
        return bool(self.gpus)

    def add(
        self, name: str, status: str, reason: str, extra: CheckExtra | None = None
    ) -> CheckEntry:
        entry = CheckEntry(name=name, status=status, reason=reason, **(extra or CheckExtra()))
        self.checks.append(entry)
        log(f"{status:<4} {name}: {reason}")
        return entry

    def document(self, duration_s: float | None) -> SmokeDocument:
        """The JSON result (schema envlock.smoke/v1) of one framework's run."""
        doc = SmokeDocument(
            schema=SCHEMA,
            status=overall(self.checks),
            framework=self.framework or None,
            version=self.version,
            expected=self.expect_file,
            build_info=self.build,
            gpus=self.gpus,
            checks=self.checks,
            benchmark=self.benchmark,
            settings=self.settings,
            host=self.host,
            environment=_safe(installed_environment),
            duration_s=duration_s,
        )
        doc["frameworks"] = [framework_run(doc)] if self.framework else []
        return doc


def overall(checks: Sequence[CheckEntry]) -> str:
    statuses = {c["status"] for c in checks}
    if FAIL in statuses:
        return "FAILED"
    if WARN in statuses:
        return "WARNED"
    return "PASSED"


def run_check(
    ctx: Context,
    name: str,
    check: Callable[[Context], Verdict | None],
    failing: str | None = None,
) -> None:
    """Run one check; an exception becomes a FAIL naming the check (or ``failing``)
    and the error. A check that returns None records nothing (it read or measured).
    The log names the check first, so a process killed inside it (a library that
    aborts or segfaults) is reported with the check it died in."""
    log(f"{RUNNING} {name}")
    try:
        verdict = check(ctx)
    except Exception as exc:  # noqa: BLE001 - this is the harness's safety net
        ctx.failed.add(name)
        entry = ctx.add(name, FAIL, f"{failing or name + ' crashed'}: {_error_text(exc)}")
        entry["error"] = {
            "type": type(exc).__name__,
            "message": str(exc)[:2000],
            "where": _where(exc),
        }
        if os.environ.get("ENVLOCK_SMOKE_DEBUG") == "1":
            traceback.print_exc()
        return
    if verdict is not None:
        ctx.add(name, verdict.status, verdict.reason, verdict.extra)


def _load_json(path: str, what: str) -> Any:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, (dict, list)):
        raise ValueError(f"{what} {path}: expected a JSON object")
    return data


# ---------------------------------------------------------------- inputs


def read_expect(ctx: Context) -> None:
    """expect.json: what the lock promises (and, in it, the GPUs' datasheet peaks)."""
    if not ctx.options.expect:
        return
    data = _load_json(ctx.options.expect, "expect file")
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object like the bundle's expect.json")
    ctx.expect = ctx.expect_file = cast(Expect, data)  # as read: the checks compare it
    ctx.peaks = data.get("gpu_peaks")


def read_peaks(ctx: Context) -> None:
    """--peaks FILE: a JSON list of peaks, or an object holding one as gpu_peaks."""
    if not ctx.options.peaks:
        return
    data = _load_json(ctx.options.peaks, "peaks file")
    ctx.peaks = data.get("gpu_peaks", data) if isinstance(data, dict) else data


# expect.json's facts of one framework's build: compared only with the framework it names
FRAMEWORK_FACTS = ("version", "cuda", "cudnn", "compute_capabilities", "build")


def expect_for(expect: Expect, name: str) -> Expect:
    """What ``name`` is judged against: expect.json whole when it names no framework
    or this one; else without the other framework's version, CUDA, cuDNN and targets
    (the GPU peaks, the Python and the lock digest are the environment's), with this
    one's own version and CUDA where expect.json's ``others`` gives them."""
    named = expect.get("framework")
    if not named or named == name:
        return expect
    kept = {k: v for k, v in expect.items() if k not in FRAMEWORK_FACTS}
    others = expect.get("others")
    own = others.get(name) if isinstance(others, dict) else None
    if isinstance(own, dict):  # this framework's own facts, as the lock holds it
        kept.update(
            (k, v) for k, v in own.items() if k in ("version", "cuda") and isinstance(v, str)
        )
    return cast(Expect, kept)


def choose_frameworks(ctx: Context) -> list[str]:
    """--framework, else expect.json's frameworks (or framework), else every importable
    one; a FAIL and [] when there is none or one is unknown."""
    names: list[str] = []
    listed = ctx.expect.get("frameworks")
    if ctx.options.framework:
        names = [ctx.options.framework]
    elif isinstance(listed, list) and listed:
        names = [str(n) for n in listed]
    elif ctx.expect.get("framework"):
        names = [str(ctx.expect.get("framework"))]
    else:
        names = detect_frameworks()
    unknown = [n for n in names if n not in ADAPTERS]
    if not names or unknown:
        ctx.add(
            "framework",
            FAIL,
            "no framework to test: pass --framework (tensorflow, torch, jax) or install one"
            if not names
            else "unknown framework {!r} (known: {})".format(unknown[0], ", ".join(FRAMEWORKS)),
        )
        return []
    return list(dict.fromkeys(names))  # each once, in order


def choose_framework(ctx: Context, name: str) -> None:
    """Test ``name`` in this process, judged by what expect.json says of it."""
    ctx.framework = name
    ctx.expect = expect_for(ctx.expect_file, name)


def read_runtime_config(ctx: Context) -> None:
    ctx.config_path, ctx.config = load_runtime_config(ctx.options.expect)


def apply_runtime_config(ctx: Context) -> None:
    """Put runtime.json's environment in place (before the import) and record it."""
    ctx.memory_growth, applied = apply_environment(ctx.framework, ctx.config)
    ctx.settings = {
        "runtime_config": ctx.config_path,
        "runtime": ctx.config,
        "applied_environment": applied,
        "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "memory_growth": ctx.memory_growth,
    }


# ---------------------------------------------------------------- checks


def check_import(ctx: Context) -> Verdict:
    adapter = ADAPTERS[ctx.framework]()
    adapter.load()
    ctx.loaded = adapter
    return Verdict(PASS, f"imported {ctx.framework}")


def set_memory_growth(ctx: Context) -> None:
    """Before anything touches the GPU; memory_held reports on it later."""
    ctx.memory_growth_reason = ctx.adapter.set_memory_growth(ctx.memory_growth)


def check_precision_policy(ctx: Context) -> Verdict:
    status, reason = ctx.adapter.set_precision_policy(ctx.config.get("mixed_precision"))
    return Verdict(status, reason)


def check_framework_version(ctx: Context) -> Verdict:
    version = ctx.adapter.version()
    ctx.version = version
    want = ctx.expect.get("version")
    if not want:
        return Verdict(SKIP, f"{ctx.pretty} {version} (no version expected)")
    if same_release(want, version):
        return Verdict(PASS, f"{ctx.pretty} {version} as locked")
    return Verdict(FAIL, f"{ctx.pretty} {version} is installed, the lock says {want}")


def read_build_info(ctx: Context) -> None:
    ctx.build = ctx.adapter.build_info().copy()


def _compare_build(ctx: Context, key: str, label: str) -> Verdict:
    actual = ctx.build.get(key)
    want = ctx.expect.get(key)
    pretty = ctx.pretty
    if not actual:
        if want:
            return Verdict(
                FAIL, f"{pretty} build info names no {label}, the lock expects {label} {want}"
            )
        return Verdict(SKIP, f"{pretty} build info names no {label}")
    if not want:
        return Verdict(SKIP, f"built with {label} {actual} (nothing expected)")
    if prefix_match(want, actual):
        note = ""
        if len(_parts(actual)) < len(_parts(want)):
            note = f" (build info gives only {actual})"
        return Verdict(PASS, f"built with {label} {want} as locked{note}")
    return Verdict(FAIL, f"built with {label} {actual}, the lock says {want}")


def check_build_cuda(ctx: Context) -> Verdict:
    verdict = _compare_build(ctx, "cuda", "CUDA")
    build = ctx.expect.get("build")
    if verdict.status == FAIL or not build:
        return verdict
    found = _build_found(ctx, str(build))
    if found is None:
        return verdict
    status, said = found
    if status == FAIL:
        return Verdict(FAIL, said)
    return Verdict(verdict.status, f"{verdict.reason}; {said}")


def _build_found(ctx: Context, build: str) -> tuple[str, str] | None:
    """The CUDA build the lock names (expect.json's ``build``) against the installed one:
    torch: the local label of its version when it has one (``2.11.0+cu128``: PyTorch's
    own index; the default index's build has none, and torch.version.cuda decides);
    JAX: the CUDA plugin distribution and its version (``jax-cuda13-plugin`` 0.11.2)."""
    raw = ctx.build.get("raw") or {}
    if ctx.framework == "torch":
        label = str(ctx.version or "").partition("+")[2]
        if not label:
            return None
        if label == build:
            return PASS, f"the {build} build as locked ({ctx.version})"
        return FAIL, f"torch {ctx.version} is the {label} build, the lock says {build}"
    if ctx.framework == "jax":
        plugin, plugin_version = raw.get("plugin"), raw.get("plugin_version")
        want = f"jax-{build}-plugin"
        version = ctx.expect.get("version")
        if not plugin:
            return FAIL, "no JAX CUDA plugin is installed, the lock says {} {}".format(
                want, version or ""
            ).strip()
        if plugin != want:
            return FAIL, f"{plugin} {plugin_version} is installed, the lock says {want}"
        if version and not same_release(version, plugin_version):
            return FAIL, f"{plugin} {plugin_version} is installed, the lock says {version}"
        return PASS, f"{plugin} {plugin_version} as locked"
    return None


def check_build_cudnn(ctx: Context) -> Verdict:
    return _compare_build(ctx, "cudnn", "cuDNN")


def check_driver_floor(ctx: Context) -> Verdict | None:
    """The driver against the whole lock's floor (expect.json's driver_min, set by the
    package driver_set_by names): below it, the package that sets it fails to load
    its CUDA, whatever the framework under test finds."""
    floor = ctx.expect.get("driver_min")
    if not floor:
        return None
    who = ctx.expect.get("driver_set_by") or "the lock"
    have = driver_version()
    if have is None:
        return Verdict(SKIP, f"no NVIDIA driver to compare with the lock's floor {floor} ({who})")
    if _parts(have) >= _parts(floor):
        return Verdict(PASS, f"driver {have} >= {floor}, the lock's floor: {who}")
    return Verdict(FAIL, f"driver {have} is older than {floor}, the lock's floor: {who}")


def check_gpu_visible(ctx: Context) -> Verdict:
    found = ctx.adapter.gpus()
    smi = nvidia_smi()
    for i, gpu in enumerate(found):
        row = smi[i] if i < len(smi) else {}
        if gpu.get("memory_total_mb") is None:
            gpu["memory_total_mb"] = row.get("memory_total_mb")
        gpu["driver"] = row.get("driver") or ctx.host.get("driver")
        if not gpu.get("compute_capability"):
            gpu["compute_capability"] = row.get("compute_capability")
    ctx.gpus = found
    pretty = ctx.pretty
    if found:
        names = ", ".join("{} ({})".format(g["name"], g["compute_capability"]) for g in found)
        return Verdict(PASS, f"{len(found)} GPU(s) visible: {names}")
    why = f"no GPU visible: {pretty} runs on the CPU"
    if smi:
        why += f" (nvidia-smi lists {len(smi)} GPU(s) that {pretty} cannot use)"
    elif os.environ.get("CUDA_VISIBLE_DEVICES") is not None:
        why += " (CUDA_VISIBLE_DEVICES={!r})".format(os.environ.get("CUDA_VISIBLE_DEVICES"))
    if ctx.options.allow_cpu:
        return Verdict(WARN, why + " (--allow-cpu)")
    return Verdict(FAIL, why)


def check_compute_capability(ctx: Context) -> Verdict:
    compiled = ctx.build.get("compute_capabilities") or ctx.expect.get("compute_capabilities")
    if not compiled:
        return Verdict(
            SKIP, f"{ctx.pretty} does not say which compute capabilities it was built for"
        )
    return Verdict(*capability_verdict(ctx.gpus[0]["compute_capability"], compiled))


def check_cudnn_runtime(ctx: Context) -> Verdict:
    version, where = ctx.adapter.runtime_cudnn()
    want = ctx.expect.get("cudnn") or ctx.build.get("cudnn")
    if version is None:
        major = _parts(want)[:1]
        loadable, how = cudnn_loadable(major[0] if major else None)
        if loadable:
            return Verdict(
                WARN, f"{ctx.pretty} did not load cuDNN for a convolution ({where}); {how}"
            )
        return Verdict(FAIL, f"cuDNN did not load: {where}; {how}")
    extra = CheckExtra(loaded=version, library=where)
    if not want:
        return Verdict(PASS, f"cuDNN {version} loaded ({where})", extra)
    if _parts(want)[:1] == _parts(version)[:1]:
        return Verdict(PASS, f"cuDNN {version} loaded, major {_parts(want)[0]} as expected", extra)
    return Verdict(
        FAIL, f"cuDNN {version} loaded, but {ctx.pretty} needs major {_parts(want)[0]}", extra
    )


def on_gpu_zero(device: object) -> bool:
    """Does a framework's device string name GPU 0?"""
    text = str(device).lower()
    return (
        ("gpu:0" in text)
        or ("cuda:0" in text)
        or text in ("cuda", "gpu")
        or "cudadevice(id=0)" in text
    )


def short_device(device: object) -> str:
    """'/job:localhost/replica:0/task:0/device:GPU:0' -> 'GPU:0'; others as they are."""
    text = str(device)
    return text.rsplit("/device:", 1)[-1] if "/device:" in text else text


def check_op_on_gpu(ctx: Context) -> Verdict:
    device, err = ctx.adapter.op_on_gpu()
    if not on_gpu_zero(device):
        return Verdict(FAIL, f"a matmul placed on GPU 0 ran on {device}")
    if err > 1e-2:
        return Verdict(FAIL, f"a matmul on {device} differs from the CPU by {err:.3g}")
    return Verdict(PASS, f"matmul ran on {device}, max difference to the CPU {err:.2g}")


def check_memory_held(ctx: Context) -> Verdict | None:
    """Memory growth did what it said: little GPU memory held after the small ops."""
    usage = ctx.adapter.memory_in_use()
    ctx.settings["gpu_memory"] = usage
    total = ctx.gpus[0].get("memory_total_mb")
    held = usage.get("reserved_mb", usage.get("in_use_mb"))
    reason = ctx.memory_growth_reason
    if reason is None:
        return None
    if held is not None and total and held > 0.5 * total:
        return Verdict(
            WARN, f"{reason}; yet {ctx.pretty} holds {held:.0f} of {total} MB after small ops"
        )
    tail = ""
    if held is not None:
        of = f" of {total} MB" if total else ""
        tail = f" ({ctx.pretty} holds {held:.0f} MB{of})"
    return Verdict(PASS, reason + tail)


def _ptxas_note(ptxas: Ptxas) -> str:
    if not ptxas.get("path"):
        return "no ptxas"
    version = ptxas.get("version") or "of unknown version"
    return "ptxas {} from {}".format(version, ptxas["source"])


def _no_ptxas(ctx: Context, ptxas: Ptxas, what: str) -> Verdict:
    """What a GPU without ptxas costs TensorFlow's XLA, and how to add it."""
    cuda = ctx.expect.get("cuda") or ctx.build.get("cuda")
    wheel = nvcc_wheel(cuda)
    release = ".".join(str(p) for p in _parts(cuda)[:2])
    pin = f"{wheel}=={release}.*" if "." in release and wheel.endswith(("cu11", "cu12")) else wheel
    if ptxas.get("path"):
        where = "ptxas is only at {} ({}), where XLA does not look".format(
            ptxas["path"], ptxas["source"]
        )
    else:
        where = "no ptxas on PATH, in /usr/local/cuda or an nvidia-cuda-nvcc wheel"
    reason = (
        f"{what} not run on the GPU: {where}; XLA would abort the process "
        f'("Can\'t find ptxas binary"). Add it: pip install {pin} and put its '
        "nvidia/cuda_nvcc/bin on PATH (the [and-cuda] extra and envlock's pip "
        "CUDA source do both)"
    )
    return Verdict(
        WARN,
        reason,
        CheckExtra(
            xla=XlaMeasure(compiled_with=what, device=None, ptxas=ptxas),
            hint=(
                f"{PTXAS_FALLBACK_FLAG} in XLA_FLAGS lets the driver compile the PTX instead "
                "(XLA calls that unsafe: more memory, no parallel compilation)"
            ),
        ),
    )


def check_xla(ctx: Context) -> Verdict:
    """A small function compiled by the framework's compiler (XLA; torch.compile),
    run on GPU 0 (on the CPU when no GPU is visible) and checked against the
    uncompiled result; the compile time and where ptxas is are recorded."""
    adapter, on_gpu = ctx.adapter, ctx.on_gpu
    where = "GPU 0" if on_gpu else "the CPU"
    ptxas = find_ptxas(ctx.build.get("cuda") or ctx.expect.get("cuda"))
    fallback = any(f.split("=")[0] == PTXAS_FALLBACK_FLAG for f in _xla_flags())
    try:
        program = adapter.xla_program(on_gpu)
    except XlaUnavailable as e:
        return Verdict(SKIP, str(e), CheckExtra(xla=XlaMeasure(ptxas=ptxas)))
    usable = bool(ptxas.get("path")) and ptxas.get("xla_finds", False)
    if on_gpu and adapter.xla_needs_ptxas and not usable and not fallback:
        return _no_ptxas(ctx, ptxas, program.what)
    try:
        found = measure_xla(program)
    except Exception as exc:  # noqa: BLE001 - the compiler's own error is the finding
        status = adapter.xla_failure
        return Verdict(
            status,
            f"{program.what} failed on {where}: {_error_text(exc)}",
            CheckExtra(
                xla=XlaMeasure(compiled_with=program.what, ptxas=ptxas),
                error=ErrorInfo(type=type(exc).__name__, message=str(exc)[:2000]),
            ),
        )
    found["ptxas"] = ptxas
    extra = CheckExtra(xla=found)
    device, err = short_device(found["device"]), found["max_difference"]
    if on_gpu_zero(device) != on_gpu:
        return Verdict(FAIL, f"{program.what} was asked for {where} and ran on {device}", extra)
    if not err <= XLA_TOLERANCE:  # NaN fails too
        return Verdict(
            FAIL,
            f"{program.what} on {device} differs from {program.reference_what} by "
            f"{err:.3g} (tolerance {XLA_TOLERANCE:g})",
            extra,
        )
    text = (
        f"{program.what} compiled in {found['compile_s']:.2f} s, ran on {device}; "
        f"max difference to {program.reference_what} {err:.2g}"
    )
    if not on_gpu:
        return Verdict(PASS, text, extra)
    if adapter.xla_needs_ptxas and not usable:
        return Verdict(
            WARN,
            text + f"; no ptxas: the driver compiled the PTX ({PTXAS_FALLBACK_FLAG})",
            extra,
        )
    return Verdict(PASS, f"{text} ({_ptxas_note(ptxas)})", extra)


# ---------------------------------------------------------------- benchmark


@dataclass(frozen=True)
class BenchPlan:
    """What the matmul benchmark runs: sizes, repeats, warm-up, and the peak to compare."""

    on_gpu: bool
    n: int
    dtypes: tuple[str, ...]
    warmup: int
    warmup_s: float
    repeats: int
    per_repeat: int | None  # None: enough products to last window_s
    window_s: float = 0.05
    peak: Peak | None = None


def plan_benchmark(ctx: Context) -> BenchPlan:
    opts = ctx.options
    on_gpu = ctx.on_gpu
    peak = find_peak(ctx.peaks, ctx.gpus[0]["name"]) if on_gpu else None
    dtypes: tuple[str, ...] = ("fp32",)
    if on_gpu:
        cc = ctx.gpus[0].get("compute_capability") or "0.0"
        dtypes += ("fp16", "bf16") if sm_of(cc) >= 80 else ("fp16",)
    warmup_s = opts.warmup_seconds
    if warmup_s is None:
        warmup_s = 1.0 if on_gpu else 0.0
    return BenchPlan(
        on_gpu=on_gpu,
        n=opts.size or (8192 if on_gpu else 512),
        dtypes=dtypes,
        warmup=opts.warmup,
        warmup_s=warmup_s,
        repeats=opts.repeats,
        per_repeat=opts.per_repeat or (None if on_gpu else 2),
        peak=peak,
    )


def measure_matmul(adapter: Adapter, plan: BenchPlan, dtype: str) -> Matmul:
    """Median of ``plan.repeats`` timed windows of chained, synchronized products.

    Warm-up runs at least ``plan.warmup`` products and ``plan.warmup_s`` seconds (a
    GPU's clocks climb from idle under load); with ``plan.per_repeat`` None each
    window holds enough products to last ``plan.window_s`` (timer and launch
    overhead stay small).
    """
    n, on_gpu, warmup = plan.n, plan.on_gpu, plan.warmup
    run, math = adapter.matmul_timer(dtype, n, on_gpu)
    one = run(max(1, warmup)) / max(1, warmup)
    warm_end = time.perf_counter() + plan.warmup_s
    while time.perf_counter() < warm_end:
        one = run(max(1, warmup)) / max(1, warmup)
    per_repeat = plan.per_repeat
    if per_repeat is None:
        per_repeat = max(2, min(1000, int(plan.window_s / max(one, 1e-9)) + 1))
    if on_gpu:
        run(per_repeat)  # one untimed window: allocator pools grow to the window's size
    times = [run(per_repeat) / per_repeat for _ in range(plan.repeats)]
    median = statistics.median(times)
    flops = 2.0 * n * n * n
    entry = Matmul(
        op="matmul",
        dtype=dtype,
        math=math,
        device="gpu:0" if on_gpu else "cpu",
        n=n,
        warmup=warmup,
        warmup_s=plan.warmup_s,
        repeats=plan.repeats,
        per_repeat=per_repeat,
        seconds_per_op={"median": median, "min": min(times), "max": max(times)},
        samples_s=[round(t, 9) for t in times],
        tflops=round(flops / median / 1e12, 3),
        tflops_best=round(flops / min(times) / 1e12, 3),
    )
    if on_gpu:
        state = _safe(gpu_state)
        if state:
            entry["gpu_state_after"] = state
    if plan.peak is not None:
        tflops = (plan.peak.get("tflops") or {}).get(math)
        if tflops:
            entry["peak_tflops"] = tflops
            entry["fraction_of_peak"] = round(flops / median / 1e12 / float(tflops), 4)
    return entry


def bench_matmul(ctx: Context, plan: BenchPlan, dtype: str) -> None:
    ctx.benchmark["results"].append(measure_matmul(ctx.adapter, plan, dtype))


def check_matmul_speed(ctx: Context) -> Verdict:
    """The best half-precision matmul against the GPU's datasheet peak."""
    half = [r for r in ctx.benchmark["results"] if r["dtype"] in ("bf16", "fp16")]
    best = max(half, key=lambda r: (r.get("fraction_of_peak", 0), r["tflops"]), default=None)
    gpu = ctx.gpus[0]["name"]
    if best is None:
        return Verdict(SKIP, "no half-precision result")
    if "fraction_of_peak" not in best:
        return Verdict(
            SKIP,
            "{} matmul {:.1f} TFLOP/s; no datasheet peak known for {}".format(
                best["dtype"], best["tflops"], gpu
            ),
        )
    text = "{} matmul {:.1f} TFLOP/s = {:.0f}% of the {} peak {} TFLOP/s".format(
        best["dtype"],
        best["tflops"],
        100 * best["fraction_of_peak"],
        gpu,
        best["peak_tflops"],
    )
    min_fraction = ctx.options.min_fraction
    if best["fraction_of_peak"] < min_fraction:
        return Verdict(WARN, text + f" (below {100 * min_fraction:.0f}%)")
    return Verdict(PASS, text)


def check_train(ctx: Context, variant: TrainVariant) -> Verdict:
    """Train the small conv net ``variant``'s way: it must run (on GPU 0 when a GPU
    is visible) and its loss must fall; the step time is compared with the plain loop's."""
    adapter, on_gpu = ctx.adapter, ctx.on_gpu
    where = "GPU 0" if on_gpu else "the CPU"
    if variant.skip:
        return Verdict(SKIP, variant.skip)
    if variant.compiled and on_gpu and adapter.xla_needs_ptxas:
        ptxas = find_ptxas(ctx.build.get("cuda") or ctx.expect.get("cuda"))
        fallback = any(f.split("=")[0] == PTXAS_FALLBACK_FLAG for f in _xla_flags())
        if not (ptxas.get("path") and ptxas.get("xla_finds", False)) and not fallback:
            return _no_ptxas(ctx, ptxas, variant.what)
    steps = max(3, ctx.options.training_steps or (TRAIN_STEPS_GPU if on_gpu else TRAIN_STEPS_CPU))
    shape = TRAIN_SHAPE_GPU if on_gpu else TRAIN_SHAPE_CPU
    try:
        found = adapter.train(variant.name, on_gpu, steps, dict(shape))
    except Exception as exc:  # noqa: BLE001 - the framework's own error is the finding
        text = f"{type(exc).__name__}: {exc}"
        path = broken_path(text)
        status = adapter.xla_failure if variant.compiled else FAIL
        broke = f" ({path} broke)" if path else ""
        return Verdict(
            status,
            f"training with {variant.what} failed on {where}{broke}: {_error_text(exc)}",
            CheckExtra(
                broken_path=path,
                error=ErrorInfo(
                    type=type(exc).__name__, message=str(exc)[:2000], where=_where(exc)
                ),
            ),
        )
    losses = found["losses"]
    first, last = losses[0], losses[-1]
    device = short_device(found["device"])
    run = TrainRun(
        variant=variant.name,
        what=variant.what,
        device=device,
        steps=len(losses),
        loss_first=first,
        loss_last=last,
        first_step_s=round(found["first_step_s"], 4),
        seconds_per_step=found["seconds_per_step"],
    )
    if "compute_dtype" in found:
        run["compute_dtype"] = found["compute_dtype"]
    if "policy" in found:
        run["policy"] = found["policy"]
    if "runtime_policy" in found:
        run["runtime_policy"] = found["runtime_policy"]
    training = ctx.benchmark.setdefault("training", {"runs": []})
    plain = next((r for r in training["runs"] if r.get("plain")), None)
    if variant.plain:
        run["plain"] = True
    elif plain is not None and found["seconds_per_step"] > 0:
        run["speedup_vs_plain"] = round(plain["seconds_per_step"] / found["seconds_per_step"], 3)
    training["runs"].append(run)
    extra = CheckExtra(training=run)
    if on_gpu_zero(device) != on_gpu:
        return Verdict(
            FAIL, f"training with {variant.what} was asked for {where} and ran on {device}", extra
        )
    finite = all(v == v and abs(v) != float("inf") for v in losses)
    if not finite or not last < first:
        return Verdict(
            FAIL,
            f"training with {variant.what} on {device}: the loss did not fall "
            f"({first:.4g} -> {last:.4g} over {len(losses)} steps)",
            extra,
        )
    text = (
        f"{variant.what}: loss {first:.3g} -> {last:.3g} in {len(losses)} steps on {device}, "
        f"{found['seconds_per_step'] * 1e3:.2f} ms a step (first {found['first_step_s']:.2f} s)"
    )
    if "speedup_vs_plain" in run:
        text += f", {run['speedup_vs_plain']:.2f}x the plain loop's speed"
    return Verdict(PASS, text, extra)


def run_training(ctx: Context) -> None:
    """The training checks, one a variant, the plain loop first; the summary sits
    in the benchmark beside the matmul figures."""
    variants = ctx.adapter.train_variants(ctx.on_gpu)
    if not variants:
        ctx.add("train", SKIP, f"no training step for {ctx.pretty}")
        return
    missing = ctx.adapter.train_missing()
    if missing:
        ctx.add("train", SKIP, missing)
        return
    on_gpu = ctx.on_gpu
    shape = TRAIN_SHAPE_GPU if on_gpu else TRAIN_SHAPE_CPU
    ctx.benchmark["training"] = {
        "model": ctx.adapter.train_model,
        "device": "gpu:0" if on_gpu else "cpu",
        "batch": shape["batch"],
        "input": f"{shape['image']}x{shape['image']}x3",
        "classes": TRAIN_CLASSES,
        "memory_growth": ctx.memory_growth,
        "mixed_precision": ctx.config.get("mixed_precision"),
        "runs": [],
    }
    start = time.perf_counter()
    for variant in variants:
        run_check(ctx, "train_" + variant.name, functools.partial(check_train, variant=variant))
    ctx.benchmark["training"]["seconds"] = round(time.perf_counter() - start, 3)  # all variants
    fp32 = [r for r in (ctx.benchmark.get("results") or []) if r.get("dtype") == "fp32"]
    if fp32:
        ctx.benchmark["training"]["matmul_fp32_s"] = fp32[0]["seconds_per_op"]["median"]


def run_benchmark(ctx: Context) -> None:
    plan = plan_benchmark(ctx)
    ctx.benchmark = {
        "device": "gpu:0" if plan.on_gpu else "cpu",
        "gpu": ctx.gpus[0]["name"] if plan.on_gpu else None,
        "results": [],
    }
    if plan.on_gpu:
        ctx.benchmark["peak_source"] = plan.peak.get("name") if plan.peak else None
    for dtype in plan.dtypes:
        measure = functools.partial(bench_matmul, plan=plan, dtype=dtype)
        run_check(ctx, "benchmark_" + dtype, measure)
    if plan.on_gpu:
        run_check(ctx, "matmul_speed", check_matmul_speed)


# ---------------------------------------------------------------- the run


def read_inputs(ctx: Context) -> list[str]:
    """The host, expect.json, the peaks and the frameworks to test ([] when none can be)."""
    opts = ctx.options
    ctx.host = host_info()
    run_check(ctx, "expect", read_expect, failing=f"cannot read {opts.expect}")
    if "expect" in ctx.failed:
        return []
    run_check(ctx, "peaks", read_peaks, failing=f"cannot read {opts.peaks}")
    return choose_frameworks(ctx)


def run_checks(ctx: Context) -> None:
    """Every check of one framework in order (``ctx.framework``, chosen); returns early
    where nothing after could be meaningful."""
    opts = ctx.options
    run_check(ctx, "runtime_config", read_runtime_config, failing="cannot read runtime.json")
    apply_runtime_config(ctx)
    run_check(ctx, "import", check_import, failing=f"cannot import {ctx.framework}")
    if "import" in ctx.failed:
        return
    run_check(ctx, "memory_growth", set_memory_growth)
    policy = ctx.config.get("mixed_precision")
    if policy and policy != "float32":
        run_check(ctx, "precision_policy", check_precision_policy)
    run_check(ctx, "framework_version", check_framework_version)
    run_check(ctx, "build_info", read_build_info)
    if "build_info" not in ctx.failed:
        run_check(ctx, "build_cuda", check_build_cuda)
        run_check(ctx, "build_cudnn", check_build_cudnn)
    run_check(ctx, "driver_floor", check_driver_floor)
    run_check(ctx, "gpu_visible", check_gpu_visible)
    if ctx.on_gpu:
        run_check(ctx, "compute_capability", check_compute_capability)
        run_check(ctx, "cudnn_runtime", check_cudnn_runtime)
        run_check(ctx, "op_on_gpu", check_op_on_gpu)
        if "memory_growth" not in ctx.failed:
            run_check(ctx, "memory_held", check_memory_held)
    else:
        for name in ("compute_capability", "cudnn_runtime", "op_on_gpu"):
            ctx.add(name, SKIP, "no GPU visible")
    run_check(ctx, "xla", check_xla)
    ctx.settings = {**ctx.settings, **_framework_settings(ctx.adapter)}
    if opts.benchmark:
        run_benchmark(ctx)
    if opts.training:
        run_training(ctx)


def smoke(options: Options, started: float) -> SmokeDocument:
    """The run: one framework in this process, several each in a process of its own."""
    ctx = Context(options)
    runs: list[SmokeDocument] = []
    try:
        names = read_inputs(ctx)
        if len(names) == 1:
            choose_framework(ctx, names[0])
            run_checks(ctx)
        elif names:
            for name in names:
                log(f"testing {name} in a process of its own ({len(names)} frameworks)")
                runs.append(run_child(options, name))
    except Exception as exc:  # noqa: BLE001 - last safety net: report, never dump
        ctx.add(
            "harness",
            FAIL,
            f"the harness crashed: {_error_text(exc)}",
            CheckExtra(error=ErrorInfo(where=_where(exc))),
        )
    duration = round(time.perf_counter() - started, 3)
    if not runs:
        return ctx.document(duration)
    return combined_document(ctx, runs, duration)


# ---------------------------------------------------------------- several frameworks


def framework_run(doc: SmokeDocument) -> FrameworkRun:
    """One framework's entry of ``frameworks``, from a document of that framework alone."""
    return FrameworkRun(
        framework=doc.get("framework") or "",
        version=doc.get("version"),
        status=overall(doc.get("checks") or []),
        build_info=doc.get("build_info") or BuildInfo(),
        gpus=doc.get("gpus") or [],
        checks=doc.get("checks") or [],
        benchmark=doc.get("benchmark") or Benchmark(),
        settings=doc.get("settings") or Settings(),
    )


SUMMARY_STATUS = {"PASSED": PASS, "WARNED": WARN, "FAILED": FAIL}


def framework_summary(run: FrameworkRun) -> CheckEntry:
    """The top-level check that carries another framework's status ("framework_jax"):
    the checks it failed (else those it warned on) by name; its entry has them whole."""
    name = run.get("framework") or "?"
    status = run.get("status") or "FAILED"
    what = " ".join(x for x in (PRETTY.get(name, name), run.get("version") or "") if x)
    worst = FAIL if status == "FAILED" else WARN
    named = [c["name"] for c in run.get("checks") or [] if c.get("status") == worst]
    reason = f"{what} {status}" + (": " + ", ".join(named) if named else "")
    return CheckEntry(
        name=f"framework_{name}", status=SUMMARY_STATUS.get(status, FAIL), reason=reason
    )


def combined_document(ctx: Context, docs: list[SmokeDocument], duration_s: float) -> SmokeDocument:
    """The run of several frameworks: the first one's facts and checks at the top level
    (a reader of one framework's document reads them as before), one check per other
    framework with its status, the whole run's status, and each framework's entry."""
    runs = [framework_run(d) for d in docs]
    first = docs[0]
    checks = [*ctx.checks, *(first.get("checks") or []), *map(framework_summary, runs[1:])]
    return SmokeDocument(
        schema=SCHEMA,
        status=overall(checks),
        framework=first.get("framework"),
        version=first.get("version"),
        expected=ctx.expect_file,
        build_info=first.get("build_info") or BuildInfo(),
        gpus=first.get("gpus") or [],
        checks=checks,
        benchmark=first.get("benchmark") or Benchmark(),
        settings=first.get("settings") or Settings(),
        host=ctx.host,
        environment=_safe(installed_environment),
        duration_s=duration_s,
        frameworks=runs,
    )


def child_args(options: Options, name: str) -> list[str]:
    """The command line that tests ``name`` alone with ``options``: parse_args of it
    gives ``options`` with framework ``name`` (tests hold the two together)."""
    args = ["--framework", name]
    if options.expect:
        args += ["--expect", options.expect]
    if options.peaks:
        args += ["--peaks", options.peaks]
    if options.allow_cpu:
        args.append("--allow-cpu")
    for flag, value in (
        ("--size", options.size),
        ("--repeats", options.repeats),
        ("--per-repeat", options.per_repeat),
        ("--warmup", options.warmup),
        ("--warmup-seconds", options.warmup_seconds),
        ("--min-fraction", options.min_fraction),
        ("--training-steps", options.training_steps),
    ):
        if value is not None:
            args += [flag, repr(value)]
    if not options.benchmark:
        args.append("--no-benchmark")
    if not options.training:
        args.append("--no-training")
    return args


def run_child(options: Options, name: str) -> SmokeDocument:
    """Test ``name`` in a process of its own (this file, this interpreter); its log
    goes on to ours as it comes; a process that dies answers with a FAILED document
    naming the check it died in."""
    import tempfile

    cmd = [sys.executable, os.path.abspath(__file__), *child_args(options, name)]
    lines: list[str] = []
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.PIPE,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - this process starts no threads
        )
        assert proc.stderr is not None
        with proc.stderr:
            for raw in proc.stderr:
                line = raw.decode("utf-8", "replace")
                lines.append(line)
                sys.stderr.write(line)
                sys.stderr.flush()
        code = proc.wait()
        out.seek(0)
        text = out.read().decode("utf-8", "replace").strip()
    try:
        doc = json.loads(text) if text else None
    except ValueError:
        doc = None
    if isinstance(doc, dict) and doc.get("schema") == SCHEMA and doc.get("framework") == name:
        return cast(SmokeDocument, doc)
    return died_document(name, "".join(lines), code)


def _die_with_parent() -> None:
    """In the child, before it runs: Linux kills it when this process dies (a runner
    that stops the harness at its timeout stops the framework being tested too)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the child may outlive a killed parent
        pass


def _exit_text(code: int) -> str:
    import signal

    if code >= 0 and code <= 128:
        return f"exit status {code}"
    number = -code if code < 0 else code - 128
    try:
        return f"killed by {signal.Signals(number).name}"
    except ValueError:
        return f"killed by signal {number}"


def died_document(name: str, log_text: str, code: int) -> SmokeDocument:
    """The FAILED document of a framework whose process died before it answered:
    the verdicts it logged, then why it has no document."""
    check, path = died_in(log_text)
    tail = "\n".join(log_text.rstrip().splitlines()[-15:])
    last = " | ".join(log_text.rstrip().splitlines()[-3:]) or "(none)"
    where = f" in the check {check}" if check else ""
    broke = f": {path} broke" if path else ""
    entry = CheckEntry(
        name="harness",
        status=FAIL,
        reason=f"the {PRETTY[name]} process died before reporting ({_exit_text(code)})"
        f"{where}{broke}; last lines: {last}",
        stderr_tail=tail,
        exit_code=code,
    )
    if check:
        entry["died_in"] = check
    if path:
        entry["broken_path"] = path
    checks = [c for c in logged_checks(log_text) if c["name"] != "harness"] + [entry]
    return SmokeDocument(
        schema=SCHEMA,
        status="FAILED",
        framework=name,
        version=None,
        build_info=BuildInfo(),
        gpus=[],
        checks=checks,
        benchmark=Benchmark(),
        settings=Settings(),
    )


T = TypeVar("T")


def _safe(fn: Callable[[], T]) -> T | Failed:
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001
        return Failed(settings_error=_error_text(exc))


def _framework_settings(adapter: Adapter) -> FrameworkSettings:
    try:
        return adapter.settings()
    except Exception as exc:  # noqa: BLE001
        return FrameworkSettings(settings_error=_error_text(exc))


def _jsonable(value: object) -> object:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return str(value)


def main(argv: Sequence[str] | None = None) -> int:
    started = time.perf_counter()
    options = parse_args(argv)
    # Frameworks print to fd 1 (C++ logging, warnings): keep stdout for the
    # JSON alone by pointing fd 1 at stderr until the result is ready.
    sys.stdout.flush()
    saved_fd = os.dup(1)
    saved_stdout = sys.stdout
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        result = smoke(options, started)
    finally:
        sys.stderr.flush()
        os.dup2(saved_fd, 1)
        os.close(saved_fd)
        sys.stdout = saved_stdout
    sys.stdout.write(json.dumps(result, indent=2, default=str) + "\n")
    sys.stdout.flush()
    return 0 if result["status"] in ("PASSED", "WARNED") else 1


if __name__ == "__main__":
    sys.exit(main())
