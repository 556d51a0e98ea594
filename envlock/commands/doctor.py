"""envlock doctor: what drifted in a live venv, and what a training log means."""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envlock.errors import EnvlockError, UsageError

if TYPE_CHECKING:
    from envlock.doctor.advice import DoctorReport, Finding, FindingDict
    from envlock.venv.probe import ProbeDoc


def register(sub: Any) -> None:
    p = sub.add_parser(
        "doctor",
        help="inspect a live venv against its lock; explain the messages of a training log",
        description="Run a small probe in the venv's interpreter and compare it with the lock: "
        "Python, every installed distribution, TensorFlow's version and build, the driver "
        "against the lock's floor, the GPUs' compute capability, CUDA/cuDNN libraries, "
        "LD_LIBRARY_PATH and CUDA_VISIBLE_DEVICES. Without --lock, the venv is checked "
        "against itself (every Requires-Dist met). Exit 0 no failure, 1 a FAIL, "
        "2 bad input, 3 the probe could not run.",
    )
    p.add_argument("--lock", metavar="DIR", help="the bundle (pylock.toml) to compare against")
    p.add_argument(
        "--venv",
        metavar="PATH",
        help="the venv (or interpreter) to inspect; default: the one DIR was captured from "
        "(on that machine), else DIR/.venv made by bootstrap.sh, else $VIRTUAL_ENV, else "
        "envlock's own interpreter",
    )
    p.add_argument(
        "--log",
        metavar="FILE",
        help="a training log to explain ('-' reads stdin); with only --log, no venv is probed",
    )
    p.add_argument("--allow-cpu", action="store_true", help="no GPU is a warning, not a failure")
    p.add_argument(
        "--deep", action="store_true", help="also hash every installed file against its RECORD"
    )
    p.add_argument("--json", action="store_true", help="print the result document")
    p.set_defaults(func=run)


def _read_lock(folder: str) -> Any:
    from envlock.lock import read_lock

    path = Path(folder)
    if not (path / "pylock.toml").is_file():
        raise UsageError(
            f"--lock {folder}: no pylock.toml there",
            hint="give the folder envlock lock -o wrote",
        )
    return read_lock(path)


def _expected_for(version: str) -> Any:
    """The resolution of an installed TensorFlow (no lock): its CUDA, driver floor..."""
    from envlock.resolve import Constraints, resolve

    try:
        return resolve(Constraints(spec=f"tensorflow=={version}"))
    except EnvlockError:
        return None


def _fits(python: str | None, host: Any) -> Any:
    """driver -> the newest release that runs on it for this host's GPUs (resolve's
    answer, PTX JIT floors included)."""

    def fits(driver: str) -> Any:
        from envlock.resolve import Constraints, resolve
        from envlock.resolve.floors import host_gpus

        gpus = host_gpus(host) if host is not None else ()
        for py in (python, None) if python else (None,):
            try:
                r = resolve(Constraints(spec="tensorflow", driver=driver, python=py, gpus=gpus))
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

    from envlock.doctor.findings import installed
    from envlock.matrix import libraries
    from envlock.matrix import paths as paths_mod
    from envlock.resolve import load_matrix
    from envlock.resolve.floors import host_gpus
    from envlock.resolve.paths import CUDNN, NVCC, Build, Tools, execution_paths

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


def _explain_log(name: str, expected: Any, lock_dir: str | None) -> list[Any]:
    """The findings of the log ``name``, read within knownerrors' bounds; one WARN
    finding more when reading stopped at a bound."""
    from envlock.doctor import knownerrors
    from envlock.doctor.advice import Finding

    known = knownerrors.load()
    with _log_lines(name) as stream:
        log = knownerrors.BoundedLog(stream.readline)
        try:
            found = knownerrors.explain(knownerrors.match_log(log, known), expected, lock_dir)
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
            )
        )
    return found


def run(args: argparse.Namespace) -> int:
    from envlock.doctor import findings as F
    from envlock.doctor import knownerrors
    from envlock.doctor.advice import Context
    from envlock.venv import interpreter
    from envlock.venv.probe import sonames

    lock = _read_lock(args.lock) if args.lock else None
    lock_dir = args.lock
    doc: DoctorReport = {"schema": "envlock.doctor/v1", "lock": lock_dir}
    found: list[Finding] = []
    expected = lock.resolution if lock is not None else None
    log_only = args.log is not None and args.lock is None and args.venv is None
    if not log_only:
        try:
            chosen = interpreter.choose(
                args.venv, Path(args.lock) if args.lock else None, dict(os.environ)
            )
        except interpreter.InterpreterGone as gone:
            bare = Context(
                lock, lock_dir, expected, None, "", allow_cpu=args.allow_cpu, venv=gone.venv
            )
            found.append(F.interpreter_gone(bare, gone.link, gone.points_to))
            return _finish(args, doc, found)
        doc["interpreter"] = chosen.to_dict()
        sys.stderr.write(f"envlock doctor: inspecting {chosen.python}: {chosen.reason}\n")
        libraries: tuple[str, ...] = ()
        mode = "if-installed"  # TensorFlow's import (~4 s) only where the venv has it
        if expected is not None:
            libraries = tuple(sonames(expected.cuda, expected.cudnn))
            if expected.framework == "tensorflow":
                mode = "yes"
        probe = interpreter.run_probe(chosen, tensorflow=mode, deep=args.deep, libraries=libraries)
        tf_version = F.tensorflow_installed(probe)
        if expected is None and tf_version is not None:
            expected = _expected_for(tf_version)
        host, problem = _host()
        ctx = Context(
            lock=lock,
            lock_dir=lock_dir,
            expected=expected,
            host=host,
            host_problem=problem,
            allow_cpu=args.allow_cpu,
            fits=_fits(lock.resolution.python if lock else None, host),
            floor=_floor(expected, host, dict(os.environ)),
            paths=_paths(expected, host, probe, chosen.python),
            venv=interpreter.venv_of(chosen.python),
            python=chosen.python,
            python_fits=_python_fits,
        )
        found += F.judge(probe, ctx)
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
                knownerrors.match_log(text.splitlines(), knownerrors.load()), expected, lock_dir
            )
    if args.log is not None:
        found += _explain_log(args.log, expected, lock_dir)
        doc["log"] = args.log
    return _finish(args, doc, found)


def _finish(args: argparse.Namespace, doc: DoctorReport, found: list[Finding]) -> int:
    from envlock.doctor import findings as F

    doc["status"] = F.overall(found)
    doc["findings"] = [f.to_dict() for f in found]
    if args.json:
        from envlock.output import emit_json

        emit_json(doc)
    else:
        sys.stdout.write(describe(doc))
    return 1 if doc["status"] == "FAILED" else 0


def _python_fits(minor: str) -> Any:
    """The newest TensorFlow release with wheels for Python ``minor`` (resolve's answer)."""
    from envlock.resolve import Constraints, resolve

    try:
        return resolve(Constraints(spec="tensorflow", python=minor))
    except EnvlockError:
        return None


def _host() -> tuple[Any, str]:
    from envlock import driver

    try:
        return driver.detect(), ""
    except EnvlockError as e:
        return None, e.message.removeprefix("--driver auto: ")


def describe(doc: DoctorReport) -> str:
    from envlock.output import table

    lines = [
        f"{doc['status']}" + (f": against the lock in {doc['lock']}" if doc.get("lock") else "")
    ]
    interp = doc.get("interpreter")
    if interp:
        python = doc.get("python")
        py = python.get("version", "?") if python else "?"
        lines.append(f"interpreter: {interp['python']} (Python {py}; {interp['reason']})")
    host = doc.get("host")
    if host:
        gpus = ", ".join(f"{g['name']} ({g['compute_capability']})" for g in host["gpus"]) or "none"
        lines.append(f"driver: {host['driver']} ({host['source']}); GPUs: {gpus}")
    if doc.get("log"):
        lines.append(f"log: {doc['log']}")
    lines.append("")
    rows = []
    for f in doc["findings"]:
        rows.append([f["status"], f["check"], f["cause"]])
        rows += [["", f"  {g['check']}", g["cause"]] for g in f.get("folded", [])]
    if rows:
        lines.append(table(["status", "check", "cause"], rows).rstrip())
    else:
        lines.append("no findings")
    fixes = _fixes(doc["findings"])
    if fixes:
        lines += ["", "to fix (each command as it stands; 'do:' lines are steps to take by hand):"]
        lines += fixes
    return "\n".join(lines) + "\n"


def _fixes(findings: list[FindingDict]) -> list[str]:
    """Each distinct fix once, under the checks it fixes, the failures first."""
    order = {"FAIL": 0, "WARN": 1, "INFO": 2, "PASS": 3}
    seen: dict[str, list[str]] = {}
    kinds: dict[str, str] = {}
    for f in sorted(findings, key=lambda f: order.get(f["status"], 9)):
        if f["status"] == "PASS" or not f.get("fix"):
            continue
        for i, fix in enumerate([f["fix"], *f.get("alternatives", [])]):
            seen.setdefault(fix, []).append(f["check"])
            kinds.setdefault(fix, "do" if i == 0 and f.get("manual") else "run")
    return [f"  {kinds[fix]}: {fix}    # {', '.join(checks)}" for fix, checks in seen.items()]
