"""Start the smoke harness on this host, and what both runners share: the
harness's arguments, the GPU peaks, and reading what the harness printed
(``envlock.smoke.container`` starts it inside an image).

Both runners return the harness's JSON document (schema ``envlock.smoke/v1``).
When the harness dies before it can answer (a segfault, an image without
Python, a killed container), the runner writes the FAILED document itself,
naming what happened and the last lines the harness printed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from envlock.errors import UsageError
from envlock.smoke import HARNESS_PATH

if TYPE_CHECKING:
    from envlock.smoke.harness import CheckEntry, Peak
    from envlock.smoke.result import SmokeRun

SCHEMA = "envlock.smoke/v1"
IMAGE_PYTHON = "/opt/venv/bin/python"
IMAGE_HARNESS = "/opt/envlock/envlock_smoke.py"
IMAGE_EXPECT = "/opt/envlock/expect.json"
INJECT_DIR = "/.envlock-smoke"  # where the runner puts its own files in a container
FRAMEWORKS = ("tensorflow", "torch", "jax")
TOOLKIT_HINT = (
    "the NVIDIA container toolkit is missing on this Docker Engine (install "
    "nvidia-container-toolkit, run `nvidia-ctk runtime configure --runtime=docker`, "
    "restart dockerd)"
)

EXIT_NO_PYTHON = 127
EXIT_NO_SHELL = -127  # not a process status: the container could not start /bin/sh


def failed_result(
    reason: str,
    *,
    check: str = "harness",
    framework: str | None = None,
    checks: list[CheckEntry] | None = None,
    stderr_tail: str = "",
    exit_code: int | None = None,
) -> SmokeRun:
    """A FAILED smoke result for a harness that could not answer itself."""
    entry: CheckEntry = {"name": check, "status": "FAIL", "reason": reason}
    if stderr_tail:
        entry["stderr_tail"] = stderr_tail
    if exit_code is not None:
        entry["exit_code"] = exit_code
    return {
        "schema": SCHEMA,
        "status": "FAILED",
        "framework": framework,
        "version": None,
        "expected": {},
        "build_info": {},
        "gpus": [],
        "checks": [*(checks or []), entry],
        "benchmark": {},
        "settings": {},
        "host": {},
        "duration_s": None,
    }


def log_tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _exit_text(code: int) -> str:
    if code < 0:
        code = -code
    elif code > 128:
        code -= 128
    else:
        return f"exit status {code}"
    try:
        return f"killed by {signal.Signals(code).name}"
    except ValueError:
        return f"killed by signal {code}"


def interpret(stdout: str, stderr: str, exit_code: int, framework: str | None) -> SmokeRun:
    """The harness's document, or a FAILED one saying why there is none."""
    text = stdout.strip()
    if text:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError:
            doc = None
        if isinstance(doc, dict) and doc.get("schema") == SCHEMA:
            # the harness's document, read here once: SmokeResult.from_dict takes
            # what later stages decide on, result_check.check_result validates before signing
            return cast("SmokeRun", doc)
    if exit_code == EXIT_NO_SHELL:
        return failed_result(
            "the image has no /bin/sh to start the harness with: it cannot be smoke-tested "
            "(an envlock bundle image has a shell and Python)",
            check="shell",
            framework=framework,
            stderr_tail=log_tail(stderr),
        )
    if exit_code == EXIT_NO_PYTHON and "no Python interpreter" in stderr:
        return failed_result(
            "no Python interpreter in the image (/opt/venv/bin/python, python3, python): "
            "it cannot run the framework",
            check="python",
            framework=framework,
            exit_code=exit_code,
        )
    from envlock.smoke.harness import died_in, logged_checks

    check, path = died_in(stderr)
    where = f" in the check {check}" if check else ""
    broke = f": {path} broke" if path else ""
    result = failed_result(
        f"the harness died before reporting ({_exit_text(exit_code)}){where}{broke}; last lines: "
        + (log_tail(stderr, 3).replace("\n", " | ") or "(none)"),
        framework=framework,
        checks=logged_checks(stderr),  # what it found before it died
        stderr_tail=log_tail(stderr),
        exit_code=exit_code,
    )
    if check:
        result["checks"][-1]["died_in"] = check
    if path:
        result["checks"][-1]["broken_path"] = path
    return result


def recompute_status(result: SmokeRun) -> None:
    statuses = {c.get("status") for c in result.get("checks", [])}
    result["status"] = (
        "FAILED" if "FAIL" in statuses else "WARNED" if "WARN" in statuses else "PASSED"
    )


def exit_code_for(result: SmokeRun) -> int:
    return 0 if result.get("status") in ("PASSED", "WARNED") else 1


# ---------------------------------------------------------------- peaks


def gpu_peaks() -> list[Peak] | None:
    """Datasheet peaks from the gpus matrix, in the harness's ``gpu_peaks`` shape."""
    try:
        from envlock.matrix import load

        models = load().gpus.gpus
    except Exception:  # noqa: BLE001 - peaks only add a fraction; never fatal
        return None
    peaks: list[Peak] = []
    for gpu in models:
        tflops = {
            "fp32": gpu.fp32_tflops,
            "tf32": gpu.tf32_tflops,
            "fp16": gpu.fp16_tflops,
            "bf16": gpu.bf16_tflops,
        }
        peaks.append(
            {
                "name": gpu.name,
                "form_factor": gpu.form_factor,
                "compute_capability": gpu.compute_capability,
                "tflops": {k: v for k, v in tflops.items() if v is not None},
                "memory_bandwidth_tbs": gpu.memory_bandwidth_tbs,
                "source": gpu.source,
            }
        )
    return peaks or None


def harness_args(
    *,
    framework: str | None,
    allow_cpu: bool,
    size: int | None,
    extra: list[str] | None,
) -> list[str]:
    args: list[str] = []
    if framework:
        args += ["--framework", framework]
    if allow_cpu:
        args.append("--allow-cpu")
    if size:
        args += ["--size", str(size)]
    return args + list(extra or [])


# ---------------------------------------------------------------- host


def run_on_host(
    framework: str | None,
    expect_dir: Path | None,
    allow_cpu: bool,
    *,
    size: int | None = None,
    peaks_file: Path | None = None,
    python: str | None = None,
    extra: list[str] | None = None,
    timeout: float = 3600,
    log: Any = None,
) -> SmokeRun:
    """Run the harness with this interpreter (or ``python``) in a subprocess.

    The harness's own log (its check lines and the framework's noise on stderr)
    goes to ``log`` (anything with ``write`` and ``flush``) as it comes; None is
    envlock's stderr.
    """
    if framework is not None and framework not in FRAMEWORKS:
        raise UsageError(
            f"unknown framework {framework!r}", hint="use one of: " + ", ".join(FRAMEWORKS)
        )
    cmd = [python or sys.executable, str(HARNESS_PATH)]
    cmd += harness_args(framework=framework, allow_cpu=allow_cpu, size=size, extra=extra)
    if expect_dir is not None:
        expect = expect_dir / "expect.json" if expect_dir.is_dir() else expect_dir
        if not expect.is_file():
            raise UsageError(
                f"{expect_dir}: no expect.json there",
                hint="point --expect at a bundle folder written by `envlock lock`",
            )
        cmd += ["--expect", str(expect)]
    tmp_peaks: Path | None = None
    if peaks_file is not None:
        if not peaks_file.is_file():
            raise UsageError(
                f"{peaks_file}: no such peaks file", hint="pass a JSON list of GPU peaks"
            )
        cmd += ["--peaks", str(peaks_file)]
    else:
        peaks = gpu_peaks()
        if peaks:
            import tempfile

            fd, name = tempfile.mkstemp(prefix="envlock-peaks-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(peaks, f)
            tmp_peaks = Path(name)
            cmd += ["--peaks", name]
    try:
        stdout, stderr, returncode = _run_teeing_stderr(cmd, timeout, log)
    except FileNotFoundError as e:
        raise UsageError(f"cannot start {cmd[0]}: {e.strerror}", hint="check --python") from e
    finally:
        if tmp_peaks is not None:
            tmp_peaks.unlink(missing_ok=True)
    if returncode is None:
        return failed_result(
            f"the harness did not finish within {timeout:.0f} s",
            framework=framework,
            stderr_tail=log_tail(stderr),
        )
    return interpret(stdout, stderr, returncode, framework)


def _run_teeing_stderr(
    cmd: list[str], timeout: float, log: Any = None
) -> tuple[str, str, int | None]:
    """Run ``cmd``: its stdout collected, its stderr (the harness's progress
    log) written to ``log`` (default: ours) line by line as it comes, and collected too.
    (stdout, stderr, exit status); the status is None when the command ran
    past ``timeout`` seconds and was killed."""
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
    )
    assert proc.stdout is not None and proc.stderr is not None
    out: list[str] = []
    err: list[str] = []

    def read_stdout(stream: Any) -> None:
        # closed below after a reader outlived its wait: what it read is kept
        with contextlib.suppress(OSError, ValueError):
            out.append(stream.read())

    def tee_stderr(stream: Any) -> None:
        try:
            for line in stream:
                err.append(line)
                try:
                    sink = log or sys.stderr
                    sink.write(line)
                    sink.flush()
                except (OSError, ValueError):  # the log is gone: keep collecting
                    pass
        except (OSError, ValueError):  # closed below after a reader outlived its wait
            pass

    readers = [
        threading.Thread(target=read_stdout, args=(proc.stdout,), daemon=True),
        threading.Thread(target=tee_stderr, args=(proc.stderr,), daemon=True),
    ]
    for reader in readers:
        reader.start()
    try:
        returncode: int | None = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        returncode = None
    for reader in readers:
        reader.join(timeout=10)
    proc.stdout.close()  # the pipes are ours to close (a child still holding one: its end)
    proc.stderr.close()
    return "".join(out), "".join(err), returncode
