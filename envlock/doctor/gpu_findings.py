"""The host's GPU side of the doctor: driver, CUDA-carrying packages, GPUs, paths, libraries.

Pure, as ``envlock.doctor.findings`` (whose ``judge`` calls these): the probe
document and the context (the host's driver and GPUs, the lock's floors, the
execution-path verdicts resolve gives) in; findings out. ``check_driver`` holds
the driver to the lock's floor, ``check_cuda_packages`` to every installed
CUDA-carrying distribution's; ``check_gpus`` judges each GPU against the compute
capabilities the release compiles for, ``check_paths`` each execution path, and
``check_libraries`` whether the CUDA/cuDNN libraries load.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from packaging.version import Version

if TYPE_CHECKING:
    from envlock.model import PackageCuda
    from envlock.venv.probe import ProbeDoc

from envlock.doctor.advice import (
    STATUSES,
    Context,
    Finding,
    Way,
    _repair,
    _version,
    choice,
    do,
    driver_fix,
    installed,
    run,
)


def check_driver(ctx: Context) -> list[Finding]:
    host = ctx.host
    if host is None:
        return [
            Finding(
                "driver",
                "WARN" if ctx.allow_cpu else "FAIL",
                f"no NVIDIA driver visible: {ctx.host_problem}",
                "run on a GPU machine, or a container started with GPUs (--gpus all); "
                "--allow-cpu if the CPU is meant",
                manual=True,
            )
        ]
    exp = ctx.expected
    needed = ctx.floor.driver if ctx.floor else exp.driver_min if exp else None
    why = ctx.floor.why if ctx.floor else f"the floor of CUDA {exp.cuda}" if exp else ""
    # the lock's whole closure may need more than its framework (torch's CUDA 13 wheels)
    gpu = ctx.lock.gpu if ctx.lock is not None else None
    lock_floor = _version(gpu.driver_min) if gpu is not None else None
    own_floor = _version(needed)
    others = lock_floor is not None and (own_floor is None or lock_floor > own_floor)
    if others and gpu is not None:
        needed, why = gpu.driver_min, f"the lock's packages need it: {gpu.set_by}"
    floor = _version(needed)
    have = _version(host.driver)
    if floor is None or have is None or exp is None:
        return [Finding("driver", "PASS", f"driver {host.driver} ({host.source})")]
    if have >= floor:
        return [
            Finding("driver", "PASS", f"driver {host.driver} ({host.source}) >= {needed}, {why}")
        ]
    fix = f"upgrade the NVIDIA driver to {needed} or newer (the host's, outside this environment)"
    if others:
        cause = f"driver {host.driver} ({host.source}) is older than {needed}: {why}"
        return [Finding("driver", "FAIL", cause, fix, manual=True)]
    fits = ctx.fits(host.driver) if ctx.fits else None
    cause = (
        f"driver {host.driver} ({host.source}) is older than {needed}, which {exp.framework} "
        f"{exp.version} (CUDA {exp.cuda}) needs here: {why}"
    )
    if fits is not None:
        cause += (
            f"; {fits.framework} {fits.version} (CUDA {fits.cuda}, cuDNN {fits.cudnn}, driver >= "
            f"{fits.driver_min}) runs on this driver: the other fix locks it, keeping your pins"
        )
    else:
        cause += f"; no {exp.framework} release in the matrix runs on this driver"
    if fits is None:
        return [Finding("driver", "FAIL", cause, fix, manual=True)]
    ways = (
        Way(f"a newer driver for {exp.framework} {exp.version}", (do(fix),)),
        Way(
            f"lock {exp.framework} {fits.version}, which runs on this driver (a new bundle)",
            (run(driver_fix(ctx, fits)),),
        ),
    )
    return [choice("driver", "FAIL", cause, ways)]


def check_cuda_packages(probe: ProbeDoc, ctx: Context) -> list[Finding]:
    """Every CUDA-carrying distribution installed (matrices/cuda-wheels.toml names the
    families; the framework is check_tensorflow's and check_driver's) against the
    host's driver: one finding per CUDA major whose floor the driver is below, naming
    its packages; else one PASS with the highest floor and who sets it."""
    host = ctx.host
    have = _version(host.driver) if host is not None else None
    if host is None or have is None:
        return []
    from envlock.lock.gpufacts import installed_facts
    from envlock.matrix import cudawheels, load_cuda

    dists = [
        (str(d.get("name", "")), str(d.get("version", "")), _stated(d.get("cuda")))
        for d in installed(probe).values()
    ]
    facts = [f for f in installed_facts(dists, cudawheels.load(), load_cuda()) if f.driver_min]
    if not facts:
        return []
    by_floor: dict[str, list[str]] = {}
    for f in facts:
        by_floor.setdefault(f.driver_min or "", []).append(f"{f.name} {f.version}")
    out = []
    for floor, names in sorted(by_floor.items(), key=lambda kv: Version(kv[0])):
        if have >= Version(floor):
            continue
        shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        out.append(
            Finding(
                f"cuda packages >= {floor}",
                "FAIL",
                f"driver {host.driver} ({host.source}) is older than {floor}, which {shown} "
                f"need (the CUDA they bring: {_cudas(facts, floor)})",
                f"upgrade the NVIDIA driver to {floor} or newer (the host's, outside this "
                "environment)",
                manual=True,
            )
        )
    if out:
        return out
    top = max(by_floor, key=Version)
    return [
        Finding(
            "cuda packages",
            "PASS",
            f"{len(facts)} CUDA-carrying packages installed; the highest floor, >= {top} "
            f"({by_floor[top][0]}{', ...' if len(by_floor[top]) > 1 else ''}), is met by driver "
            f"{host.driver}",
        )
    ]


def _stated(value: object) -> str | None:
    """The probe's ``cuda`` of a distribution, when it has the shape of one ("13.2")."""
    text = str(value) if isinstance(value, str) else ""
    parts = text.split(".")
    return (
        text if 1 <= len(parts) <= 2 and all(p.isdigit() and len(p) <= 3 for p in parts) else None
    )


def _cudas(facts: Sequence[PackageCuda], floor: str) -> str:
    return ", ".join(sorted({f"CUDA {f.cuda}" for f in facts if f.driver_min == floor and f.cuda}))


def check_gpus(probe: ProbeDoc, ctx: Context) -> list[Finding]:
    from envlock.smoke.harness import capability_verdict

    host = ctx.host
    if host is None:
        return []
    out: list[Finding] = []
    if not host.gpus:
        out.append(
            Finding(
                "gpus",
                "WARN" if ctx.allow_cpu else "FAIL",
                "the driver lists no GPU",
                "check CUDA_VISIBLE_DEVICES and that the machine has a GPU",
                manual=True,
            )
        )
    compiled = ctx.expected.compute_capabilities if ctx.expected else ()
    for i, gpu in enumerate(host.gpus):
        if not compiled or not gpu.compute_capability:
            out.append(Finding(f"gpu {i}", "PASS", f"{gpu.name} ({gpu.compute_capability})"))
            continue
        verdict, reason = capability_verdict(gpu.compute_capability, compiled)
        fix = (
            "expect a slow first start (raise CUDA_CACHE_MAXSIZE), or lock a release "
            "that compiles for this GPU"
            if verdict != "PASS"
            else ""
        )
        if verdict == "FAIL":
            fix = "lock a release that compiles for this GPU (envlock lock tensorflow --gpu ...)"
        out.append(
            Finding(
                f"gpu {i}",
                verdict if verdict in STATUSES else "WARN",
                f"{gpu.name}, compute capability {gpu.compute_capability}: {reason}",
                fix,
                manual=True,
            )
        )
    tf = probe.get("tensorflow") or {}
    env = probe.get("environment") or {}
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if host.gpus and visible is not None and visible.strip() in ("", "-1", "NoDevFiles"):
        out.append(
            Finding(
                "CUDA_VISIBLE_DEVICES",
                "WARN" if ctx.allow_cpu else "FAIL",
                f"CUDA_VISIBLE_DEVICES={visible!r} hides every GPU from the process",
                "unset CUDA_VISIBLE_DEVICES or set it to the GPU indices (e.g. 0) where the "
                "program starts",
                manual=True,
            )
        )
    elif visible is not None:
        out.append(Finding("CUDA_VISIBLE_DEVICES", "PASS", f"CUDA_VISIBLE_DEVICES={visible}"))
    if tf.get("imported") and host.gpus and not tf.get("gpus") and not ctx.rehearsed:
        out.append(
            Finding(
                "tensorflow gpus",
                "WARN" if ctx.allow_cpu else "FAIL",
                "the driver sees GPUs but TensorFlow lists none: it runs on the CPU "
                "(the silent fallback; see the library findings)",
                "make the locked CUDA/cuDNN libraries loadable (the library findings say "
                "which), and check tf.sysconfig.get_build_info()",
                manual=True,
            )
        )
    return out


def check_libraries(probe: ProbeDoc, ctx: Context) -> list[Finding]:
    libs = probe.get("libraries") or []
    if not libs:
        return []
    out: list[Finding] = []
    env = probe.get("environment") or {}
    ld = env.get("LD_LIBRARY_PATH")
    exp = ctx.expected
    missing_status = "FAIL" if ctx.host is not None and not ctx.allow_cpu else "WARN"
    missing: list[str] = []
    for lib in libs:
        name = str(lib.get("soname"))
        if lib.get("loaded"):
            version = f" {lib['version']}" if lib.get("version") else ""
            where = "an nvidia-* wheel" if lib.get("from") == "wheel" else "the system path"
            out.append(
                Finding(f"library {name}", "PASS", f"loads{version} from {where}: {lib['path']}")
            )
            continue
        tried = lib.get("tried") or []
        error = str(tried[0].get("error")) if tried else "not found"
        missing.append(name if name in error else f"{name} ({error})")
    if missing:
        if exp is not None and exp.cuda_source == "pip":
            fix = f"install the locked nvidia-* wheels ({_repair(ctx)})"
        elif exp is not None:
            fix = (
                f"use the base image {exp.base_image}, or install CUDA {exp.cuda} / "
                f"cuDNN {exp.cudnn} on the host or as nvidia-* wheels"
            )
        else:
            fix = "install the CUDA/cuDNN libraries TensorFlow was built with"
        out.append(
            Finding(
                "libraries",
                missing_status,
                f"{len(missing)} CUDA/cuDNN libraries do not load from the system path or "
                f"the nvidia-* wheels: {', '.join(missing)}; LD_LIBRARY_PATH={ld or '(unset)'}",
                fix + "; check LD_LIBRARY_PATH",
                manual=True,
            )
        )
    return out


def check_paths(ctx: Context) -> list[Finding]:
    """One finding per execution path and host GPU, from the verdicts resolve gives
    (envlock.resolve.paths): a path that serves no GPU here is INFO; XLA, which a
    program can leave off, WARNs; a path the GPU needs and cannot use FAILs."""
    out: list[Finding] = []
    for i, gpu in enumerate(ctx.paths):
        statuses = {p.path: p.status for p in gpu.paths}
        served = statuses.get("kernels") in ("works", "needs") or statuses.get("ptx-jit") in (
            "works",
            "needs",
        )
        for p in gpu.paths:
            if p.status == "works":
                status = "PASS"
            elif p.status in ("unused", "unknown") or (p.path == "kernels" and served):
                status = "INFO"
            elif p.path == "xla":
                status = "WARN"
            else:
                status = "FAIL"
            out.append(
                Finding(
                    f"path {p.path} (gpu {i})",
                    status,
                    f"{gpu.gpu} ({gpu.compute_capability}): {p.status}: {p.why}",
                    p.fix,
                    manual=p.manual,
                )
            )
    return out
