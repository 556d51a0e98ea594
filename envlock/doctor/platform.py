"""``envlock doctor --lock DIR --freeze FILE``: a platform's package list against a lock.

The list is read as input (``envlock.doctor.freeze``) into the probe document the
live-venv doctor judges, with the same checks (``envlock.doctor.findings.judge``)
and the same context: the lock, its left-out lines, and the host the platform
has when ``--driver`` (and ``--gpu``) say it; never this machine's, which is not
the platform. The framework changes are made the root findings and the rest
folded under them (``envlock.doctor.roots.fold``), and the restore that brings
the lock back is named (``roots.restore_verdict``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envlock.errors import UsageError

if TYPE_CHECKING:
    from envlock.doctor.advice import DoctorReport, Finding
    from envlock.doctor.runner import DoctorRequest
    from envlock.driver import HostInfo


def _refuse(req: DoctorRequest) -> None:
    pairs = [
        (req.freeze is None, "--python", "a live venv (its interpreter says its Python)"),
        (req.lock is None, "--freeze", "no --lock DIR (the list is compared with a lock)"),
        (req.venv is not None, "--freeze", "--venv (the list is the environment)"),
        (req.deep, "--freeze", "--deep (a list has no files to hash)"),
        (req.log is not None, "--freeze", "--log (explain a log alone: envlock doctor --log FILE)"),
        (req.gpu_auto, "--freeze", "--gpu auto (this machine is not the platform)"),
        (bool(req.gpus) and not req.driver, "--gpu", "--freeze without --driver"),
    ]
    for bad, one, other in pairs:
        if bad:
            raise UsageError(
                f"{one} does not go with {other}",
                hint="envlock doctor --lock DIR --freeze FILE [--python X.Y] [--driver X.Y.Z]",
            )


def _host(req: DoctorRequest) -> tuple[HostInfo | None, tuple[str, ...]]:
    """The platform's driver and GPUs as --driver and --gpu name them; None without
    --driver ('auto' is this machine: refused)."""
    from envlock.driver import HostGpu, HostInfo
    from envlock.readers import quoted
    from envlock.resolve import load_matrix
    from envlock.resolve.constraints import DRIVER, named_gpus

    driver = req.driver.strip() if req.driver is not None else None
    if driver is None:
        return None, ()
    if not DRIVER.fullmatch(driver):
        raise UsageError(
            f"--driver {quoted(driver)} is not a driver version (NNN[.NN[.NN]])"
            + (": with --freeze the platform's, not this machine's" if driver == "auto" else ""),
            hint="the driver nvidia-smi prints on the platform, e.g. --driver 550.54.15",
        )
    gpus = [
        HostGpu(g.name or f"sm_{g.compute_capability}", g.compute_capability)
        for g in named_gpus(tuple(req.gpus), load_matrix().gpus)
    ]
    flags = ["--driver", driver]
    flags += [arg for g in req.gpus for arg in ("--gpu", g.name or str(g.compute_capability))]
    host = HostInfo(driver=driver, cuda_driver=None, gpus=tuple(gpus), source="--driver")
    return host, tuple(flags)


def diagnose_freeze(req: DoctorRequest) -> DoctorReport:
    """The doctor's report on the package list ``req.freeze`` against ``req.lock``."""
    from envlock.doctor import findings as F
    from envlock.doctor import roots
    from envlock.doctor.advice import Context
    from envlock.doctor.freeze import check_python, probe_of, read_freeze
    from envlock.doctor.runner import _fits, _floor, _left_out, _python_fits, _read_lock

    _refuse(req)
    assert req.freeze is not None and req.lock is not None
    python = check_python(req.python)
    lock = _read_lock(req.lock)
    rows = read_freeze(req.freeze)
    probe = probe_of(rows, python, req.freeze)
    host, flags = _host(req)
    ctx = Context(
        lock=lock,
        lock_dir=req.lock,
        expected=lock.resolution,
        host=host,
        host_problem="",
        allow_cpu=req.allow_cpu,
        fits=_fits(lock.resolution.python, host),
        floor=_floor(lock.resolution, host, {}),
        python_fits=_python_fits,
        rehearsed=flags,
        left_out=_left_out(req.lock),
    )
    where = f"--freeze {req.freeze}"
    verdict = roots.restore_verdict(ctx, python)
    fix = verdict.fix if verdict is not None else ""
    found: list[Finding] = roots.fold(F.judge(probe, ctx), probe, ctx, where, fix)
    found += roots.left_out(ctx, probe)
    restored = {"python", "packages", *(f"{name} version" for name in roots.FRAMEWORKS)}
    if verdict is not None and any(f.status == "FAIL" and f.check in restored for f in found):
        found.append(verdict)
    if req.notebook:  # %envlock doctor --freeze: the fixes as the cell's lines
        from envlock.doctor.advice import in_notebook

        found = [in_notebook(f) for f in found]
    doc: DoctorReport = {
        "schema": "envlock.doctor/v1",
        "lock": req.lock,
        "freeze": req.freeze,
        "python": probe.get("python") if python else None,
        "host": _host_dict(host),
        "status": F.overall(found),
        "findings": [f.to_dict() for f in found],
    }
    return doc


def _host_dict(host: HostInfo | None) -> Any:
    if host is None:
        return None
    return {
        "driver": host.driver,
        "source": host.source,
        "gpus": [{"name": g.name, "compute_capability": g.compute_capability} for g in host.gpus],
    }
