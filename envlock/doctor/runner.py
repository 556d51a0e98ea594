"""The doctor's pipeline: which interpreter to inspect, the probe run in it, the
lock and the host it is judged against, resolve's answers the findings quote (the
release that fits a driver or a Python, the driver floor, the execution paths),
and a training log explained through the known errors. One call,
``diagnose(DoctorRequest) -> DoctorReport``; ``envlock doctor`` prints the report.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envlock.errors import EnvlockError, UsageError

if TYPE_CHECKING:
    from envlock.doctor.advice import DoctorReport, Finding
    from envlock.driver import HostInfo
    from envlock.model import Gpu
    from envlock.venv.probe import ProbeDoc


@dataclass(frozen=True)
class DoctorRequest:
    """What ``envlock doctor`` was asked (its flags)."""

    lock: str | None = None  # --lock DIR: the bundle to compare against
    venv: str | None = None  # --venv PATH: the venv or interpreter to inspect
    log: str | None = None  # --log FILE: a training log to explain ("-": stdin)
    allow_cpu: bool = False  # no GPU is a warning, not a failure
    notebook: bool = False  # fixes as notebook cell lines for the inspected kernel
    deep: bool = False  # also hash every installed file against its RECORD
    # --driver VERSION and --gpu NAME: answer as if the host had them (a rehearsal of
    # a driver change); None / () / False: what this machine has
    driver: str | None = None
    gpus: tuple[Gpu, ...] = ()
    gpu_auto: bool = False
    # --freeze FILE: a platform's published package list judged as the environment
    # (no venv probed); --python X.Y: the platform's Python, which a list names not.
    # Such a request is envlock.doctor.platform.diagnose_freeze's, not diagnose's
    freeze: str | None = None
    python: str | None = None


def diagnose(req: DoctorRequest, progress: Callable[[str], None] | None = None) -> DoctorReport:
    """The doctor's report on the interpreter ``req`` names (its probe judged against
    the lock, the host and itself) and on the log it names, status and findings
    filled in. ``progress`` is told which interpreter is inspected, and why.
    Bad input raises UsageError (exit 2); a probe that cannot run, EnvironmentFailure
    (exit 3)."""
    from envlock.doctor import findings as F
    from envlock.doctor import knownerrors
    from envlock.doctor.advice import Context
    from envlock.venv import interpreter
    from envlock.venv.probe import sonames

    lock = _read_lock(req.lock) if req.lock else None
    lock_dir = req.lock
    left = _left_out(req.lock)
    doc: DoctorReport = {"schema": "envlock.doctor/v1", "lock": lock_dir}
    found: list[Finding] = []
    expected = lock.resolution if lock is not None else None
    log_only = req.log is not None and req.lock is None and req.venv is None
    if not log_only:
        try:
            chosen = interpreter.choose(
                req.venv, Path(req.lock) if req.lock else None, dict(os.environ)
            )
        except interpreter.InterpreterGone as gone:
            bare = Context(
                lock, lock_dir, expected, None, "", allow_cpu=req.allow_cpu, venv=gone.venv
            )
            from envlock.doctor.interpreter import interpreter_gone

            found.append(interpreter_gone(bare, gone.link, gone.points_to))
            return _report(doc, found, req.notebook)
        doc["interpreter"] = chosen.to_dict()
        if progress is not None:
            progress(f"inspecting {chosen.python}: {chosen.reason}")
        libraries: tuple[str, ...] = ()
        mode = "if-installed"  # TensorFlow's import (~4 s) only where the venv has it
        if expected is not None:
            libraries = tuple(sonames(expected.cuda, expected.cudnn))
            if expected.framework == "tensorflow":
                mode = "yes"
        probe = interpreter.run_probe(chosen, tensorflow=mode, deep=req.deep, libraries=libraries)
        tf_version = F.tensorflow_installed(probe)
        if expected is None and tf_version is not None:
            expected = _expected_for(tf_version)
        host, problem, rehearsed = _host(req)
        ctx = Context(
            lock=lock,
            lock_dir=lock_dir,
            expected=expected,
            host=host,
            host_problem=problem,
            allow_cpu=req.allow_cpu,
            notebook=req.notebook,
            fits=_fits(lock.resolution.python if lock else None, host, _asked(expected)),
            floor=_floor(expected, host, dict(os.environ)),
            paths=_paths(expected, host, probe, chosen.python),
            venv=interpreter.venv_of(chosen.python),
            python=chosen.python,
            python_fits=lambda minor: _python_fits(minor, _asked(expected)),
            rehearsed=rehearsed,
            left_out=left,
        )
        found += F.judge(probe, ctx)
        from envlock.doctor.roots import left_out

        found += left_out(ctx, probe)
        doc["python"] = probe.get("python")
        doc["host"] = (
            {
                "driver": host.driver,
                "source": host.source,
                "gpus": [
                    {"name": g.name, "compute_capability": g.compute_capability} for g in host.gpus
                ],
            }
            if host
            else None
        )
        tf = probe.get("tensorflow") or {}
        if tf.get("imported") is False:  # the import error is a log too
            error = tf.get("error")
            text = str(error.get("message", "")) if error else ""
            found += knownerrors.explain(
                knownerrors.match_log(text.splitlines(), knownerrors.load()),
                expected,
                lock_dir,
                allow_cpu=req.allow_cpu,
            )
    if req.log is not None:
        found += _explain_log(req.log, expected, lock_dir, req.allow_cpu)
        doc["log"] = req.log
    return _report(doc, found, req.notebook)


def _report(doc: DoctorReport, found: list[Finding], notebook: bool = False) -> DoctorReport:
    from envlock.doctor import findings as F
    from envlock.doctor.advice import in_notebook

    if notebook:
        found = [in_notebook(f) for f in found]
    doc["status"] = F.overall(found)
    doc["findings"] = [f.to_dict() for f in found]
    return doc


def _read_lock(folder: str) -> Any:
    from envlock.lock import read_lock

    path = Path(folder)
    if not (path / "pylock.toml").is_file():
        raise UsageError(
            f"--lock {folder}: no pylock.toml there",
            hint="give the folder envlock lock -o wrote",
        )
    return read_lock(path)


def _left_out(folder: str | None) -> tuple[Any, ...]:
    """The lines DIR/left-out.json says the capture left out (() when none)."""
    if not folder:
        return ()
    from envlock.bundle import left_out

    found = left_out.read(Path(folder))
    return found.left_out if found is not None else ()


def _expected_for(version: str) -> Any:
    """The resolution of an installed TensorFlow (no lock): its CUDA, driver floor..."""
    from envlock.resolve import Constraints, resolve

    try:
        return resolve(Constraints(spec=f"tensorflow=={version}"))
    except EnvlockError:
        return None


def _asked(expected: Any) -> str:
    """The SPEC another release of the expected framework is resolved by: torch, any
    JAX CUDA build, else tensorflow."""
    framework = getattr(expected, "framework", "tensorflow")
    return {"torch": "torch", "jax": "jax[cuda]"}.get(framework, "tensorflow")


def _fits(python: str | None, host: Any, spec: str = "tensorflow") -> Any:
    """driver -> the newest release of ``spec`` that runs on it for this host's GPUs
    (resolve's answer, PTX JIT floors included)."""

    def fits(driver: str) -> Any:
        from envlock.resolve import Constraints, resolve
        from envlock.resolve.floors import host_gpus

        gpus = host_gpus(host) if host is not None else ()
        for py in (python, None) if python else (None,):
            try:
                r = resolve(Constraints(spec=spec, driver=driver, python=py, gpus=gpus))
            except EnvlockError:
                continue
            return r
        return None

    return fits


def _floor(expected: Any, host: Any, environ: dict[str, str]) -> Any:
    """The driver floor of the expected release for this host's GPUs: the function
    resolve's why lines come from (envlock.resolve.floors.host_floor), or inside a
    container of an NVIDIA CUDA image (its NVIDIA_REQUIRE_CUDA in the environment)
    the one resolve's container verdicts use (container_floor: forward-compatibility
    libraries serve the PTX JIT on excepted driver branches)."""
    if expected is None or expected.framework != "tensorflow":
        return None
    from envlock.resolve import load_matrix
    from envlock.resolve.floors import container_floor, host_floor, host_gpus

    matrix = load_matrix()
    release = matrix.tensorflow.get(expected.version)
    if release is None:
        return None
    gpus = host_gpus(host) if host is not None else ()
    require = environ.get("NVIDIA_REQUIRE_CUDA", "").strip()
    driver = _driver_version(host)
    if require and driver is not None:
        from envlock.matrix.require import RequireError, parse_require

        try:
            return container_floor(release, matrix.cuda, gpus, parse_require(require), driver)
        except RequireError:
            pass  # not a value the runtime reads either: judged as a host venv
    return host_floor(release, matrix.cuda, gpus)


def _paths(expected: Any, host: Any, probe: ProbeDoc, python: str) -> tuple[Any, ...]:
    """The verdict per execution path for each host GPU, for the expected release
    with what the inspected environment has: the ptxas of its nvidia-cuda-nvcc-cu12
    wheel and the cuDNN of its nvidia-cudnn-cu12 wheel, when installed (resolve's
    function, envlock.resolve.paths)."""
    if expected is None or host is None or expected.framework != "tensorflow":
        return ()
    import shlex

    from envlock.doctor.advice import installed
    from envlock.matrix import libraries
    from envlock.matrix import paths as paths_mod
    from envlock.resolve import load_matrix
    from envlock.resolve.floors import host_gpus
    from envlock.resolve.paths import CUDNN, NVCC, execution_paths
    from envlock.resolve.pathtypes import Build, Tools

    dists = installed(probe)
    nvcc_dist, cudnn_dist = dists.get(NVCC), dists.get(CUDNN)
    nvcc = nvcc_dist.get("version") if nvcc_dist else None
    cudnn = cudnn_dist.get("version") if cudnn_dist else None
    tools = Tools(
        cuda_source=expected.cuda_source,
        ptxas=str(nvcc) if nvcc else None,
        ptxas_where=f"{NVCC}=={nvcc}" if nvcc else "",
        no_ptxas=expected.cuda_source == "pip" and not nvcc,
        cudnn=str(cudnn) if cudnn else _loaded_cudnn(probe),
        driver=host.driver,
        install=f"{shlex.quote(python)} -m pip install",
    )
    build = Build(
        "tensorflow", expected.version, expected.cuda, tuple(expected.compute_capabilities)
    )
    matrix = load_matrix()
    table, libs = paths_mod.load(), libraries.load()
    return tuple(
        execution_paths(build, gpu, tools, matrix.cuda, table, libs)
        for gpu in host_gpus(host)
        if gpu.compute_capability
    )


def _loaded_cudnn(probe: ProbeDoc) -> str | None:
    """The version of the libcudnn the probe loaded from the system path, if any."""
    for lib in probe.get("libraries") or []:
        if str(lib.get("soname", "")).startswith("libcudnn.so") and lib.get("version"):
            return str(lib["version"])
    return None


def _driver_version(host: Any) -> Any:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(host.driver) if host is not None else None
    except InvalidVersion:
        return None


def _log_lines(name: str) -> AbstractContextManager[Any]:
    """The log as a readable stream (bytes; stdin may be text in a test)."""
    if name == "-":
        return nullcontext(getattr(sys.stdin, "buffer", sys.stdin))
    try:
        return open(name, "rb")
    except OSError as e:
        raise UsageError(
            f"--log {name}: cannot read it ({e.strerror or e})",
            hint="give a log file, or - for stdin",
        ) from None


def _explain_log(
    name: str, expected: Any, lock_dir: str | None, allow_cpu: bool = False
) -> list[Any]:
    """The findings of the log ``name``, read within knownerrors' bounds; one WARN
    finding more when reading stopped at a bound."""
    from envlock.doctor import knownerrors
    from envlock.doctor.advice import Finding

    known = knownerrors.load()
    with _log_lines(name) as stream:
        log = knownerrors.BoundedLog(stream.readline)
        try:
            found = knownerrors.explain(
                knownerrors.match_log(log, known), expected, lock_dir, allow_cpu=allow_cpu
            )
        except OSError as e:
            raise UsageError(
                f"--log {name}: cannot read it ({e.strerror or e})",
                hint="give a log file, or - for stdin",
            ) from None
    if log.cut:
        import shlex

        source = "FILE" if name == "-" else shlex.quote(name)
        found.append(
            Finding(
                "log",
                "WARN",
                f"only the start of the log was searched: {log.cut} "
                f"(lines are cut at {knownerrors.MAX_LINE_BYTES // 1024} KiB)",
                f"give the part that matters, e.g. tail -n 100000 {source} | "
                "envlock doctor --log -",
                manual=True,
            )
        )
    return found


def _python_fits(minor: str, spec: str = "tensorflow") -> Any:
    """The newest release of ``spec`` (the lock's framework) with wheels for Python
    ``minor`` (resolve's answer)."""
    from envlock.resolve import Constraints, resolve

    try:
        return resolve(Constraints(spec=spec, python=minor))
    except EnvlockError:
        return None


def _detect() -> tuple[HostInfo | None, str]:
    from envlock import driver

    try:
        return driver.detect(), ""
    except EnvlockError as e:
        return None, e.message.removeprefix("--driver auto: ")


def _host(req: DoctorRequest) -> tuple[HostInfo | None, str, tuple[str, ...]]:
    """The host the findings are judged against: this machine's (NVML, else
    nvidia-smi), or with --driver VERSION / --gpu NAME the one they describe, as
    resolve takes them (a rehearsal of a driver change). The third item is the
    rehearsal as flags (what a printed lock command repeats instead of --driver auto);
    empty when nothing is rehearsed."""
    from envlock.driver import HostGpu, HostInfo
    from envlock.readers import quoted
    from envlock.resolve import load_matrix
    from envlock.resolve.constraints import DRIVER, named_gpus

    driver = req.driver.strip() if req.driver is not None else None
    if driver is not None and driver.lower() == "auto":
        driver = None
    if driver is None and not req.gpus:
        return (*_detect(), ())
    if driver is not None and not DRIVER.fullmatch(driver):
        raise UsageError(
            f"--driver {quoted(driver)} is not a driver version (NNN[.NN[.NN]]) or auto",
            hint="e.g. --driver 535.104.05",
        )
    real: HostInfo | None = None
    problem = ""
    if driver is None or req.gpu_auto or not req.gpus:
        real, problem = _detect()
    if real is None and (driver is None or req.gpu_auto):
        flag = "--gpu auto" if req.gpu_auto else "--gpu"
        raise UsageError(
            f"{flag}: no NVIDIA driver on this machine to pair the GPUs with ({problem})",
            hint="rehearse the driver too: --driver VERSION (e.g. --driver 535.104.05)",
        )
    gpus: list[HostGpu] = []
    if req.gpus:
        for gpu in named_gpus(tuple(req.gpus), load_matrix().gpus):
            gpus.append(HostGpu(gpu.name or f"sm_{gpu.compute_capability}", gpu.compute_capability))
    if real is not None and (req.gpu_auto or not req.gpus):
        gpus = [*real.gpus, *gpus]
    flags: list[str] = []
    if driver is not None:
        flags += ["--driver", driver]
    flags += [arg for gpu in req.gpus for arg in ("--gpu", gpu.name or str(gpu.compute_capability))]
    if req.gpu_auto:
        flags += ["--gpu", "auto"]
    source = "--driver" if driver is not None else real.source if real is not None else "--gpu"
    host = HostInfo(
        driver=driver if driver is not None else real.driver if real is not None else "",
        cuda_driver=None if driver is not None else real.cuda_driver if real else None,
        gpus=tuple(gpus),
        source=source,
    )
    return host, "", tuple(flags)
