"""Doctor's findings on the CUDA build of torch and JAX against the lock (issue 43).

TensorFlow's build is judged from its import (``check_tensorflow``: build_info);
torch and JAX are judged without importing them, from what their installed files
state, as ``envlock.lock.gpufacts.installed_facts`` reads them: torch's
``torch/version.py`` (``cuda = '13.0'``, read by the probe) or its ``+cuXXX`` label,
and the ``jax-cudaNN-plugin`` distribution JAX's CUDA comes with. One finding per
framework the lock holds: ``torch build`` / ``jax plugin``, PASS when the installed
build is the locked one, FAIL naming both builds and the restore that brings the
lock's back (a torch of the same release but another CUDA build is a root cause:
the nvidia-* wheels of the other CUDA follow from it). A framework that is not
installed at all is ``check_packages``'s finding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from envlock.doctor.advice import Context, Finding, _repair, installed

if TYPE_CHECKING:
    from envlock.model import PackageCuda
    from envlock.venv.probe import ProbeDoc


def _stated(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _installed_facts(probe: ProbeDoc) -> dict[str, PackageCuda]:
    from envlock.lock.gpufacts import installed_facts
    from envlock.matrix import cudawheels, load_cuda

    dists = [
        (str(d.get("name", "")), str(d.get("version", "")), _stated(d.get("cuda")))
        for d in installed(probe).values()
    ]
    return {f.name: f for f in installed_facts(dists, cudawheels.load(), load_cuda())}


def _locked_facts(ctx: Context) -> dict[str, PackageCuda]:
    from envlock.lock.gpufacts import installed_facts
    from envlock.matrix import cudawheels, load_cuda

    lock = ctx.lock
    if lock is None:
        return {}
    out = {
        f.name: f
        for f in installed_facts(
            [(p.name, p.version, None) for p in lock.packages], cudawheels.load(), load_cuda()
        )
    }
    if lock.gpu is not None:  # read from the wheels when locked: the better source
        out.update({f.name: f for f in lock.gpu.packages})
    return out


def _torch_cuda(ctx: Context, locked: dict[str, PackageCuda]) -> str | None:
    """The CUDA of the locked torch build: the resolution's when torch is the lock's
    framework (matrices/torch.toml, from the wheel), else the lock's package facts."""
    lock = ctx.lock
    if lock is not None:
        for res in (lock.resolution, *lock.resolution.together):
            if res.framework == "torch":
                return res.cuda
    fact = locked.get("torch")
    return fact.cuda if fact is not None else None


def same_torch_build(ctx: Context, name: str, installed_version: str, locked: str) -> bool:
    """Whether an installed torch ``2.11.0+cu130`` (PyTorch's own index labels its builds)
    is the locked ``2.11.0`` whose build is the CUDA 13.0 one (the configured index's,
    unlabelled): the same release and CUDA build, so not a package difference; the
    ``torch build`` finding says which build it is."""
    from packaging.version import InvalidVersion, Version

    if name != "torch":
        return False
    try:
        have, want = Version(installed_version), Version(locked)
    except InvalidVersion:
        return False
    cuda = _torch_cuda(ctx, _locked_facts(ctx)) if ctx.lock is not None else None
    if want.local or not have.local or have.public != want.public or not cuda:
        return False
    return have.local == "cu" + "".join(cuda.split(".")[:2])


def check_framework_builds(probe: ProbeDoc, ctx: Context) -> list[Finding]:
    """``torch build`` and ``jax plugin`` findings for the frameworks the lock holds."""
    lock = ctx.lock
    if lock is None:
        return []
    names = {p.name: p.version for p in lock.packages}
    have = installed(probe)
    out: list[Finding] = []
    if "torch" in names and "torch" in have:
        out += _torch(probe, ctx, names["torch"], str(have["torch"].get("version")))
    if "jax" in names and "jax" in have:
        out += _jax(probe, ctx, names)
    return out


def _torch(probe: ProbeDoc, ctx: Context, locked_version: str, version: str) -> list[Finding]:
    locked = _locked_facts(ctx)
    want = _torch_cuda(ctx, locked)
    fact = _installed_facts(probe).get("torch")
    got = fact.cuda if fact is not None else None
    how = f", read from {fact.cuda_from}" if fact is not None and fact.cuda_from else ""
    said = "listed" if probe.get("freeze") else "installed"
    if want is None:
        return []
    if got is None:
        return [
            Finding(
                "torch build",
                "FAIL",
                f"torch {version} is {said} and names no CUDA (a CPU build, or its "
                f"torch/version.py unreadable); the lock has torch {locked_version}, the CUDA "
                f"{want} build",
                _repair(ctx),
            )
        ]
    if got.split(".")[:2] == want.split(".")[:2]:
        return [
            Finding(
                "torch build",
                "PASS",
                f"torch {version}: the CUDA {got} build{how}, as locked",
            )
        ]
    return [
        Finding(
            "torch build",
            "FAIL",
            f"torch {version} is {said}: the CUDA {got} build{how}; the lock has torch "
            f"{locked_version}, the CUDA {want} build (its nvidia-* wheels differ with it)",
            _repair(ctx),
        )
    ]


def _jax(probe: ProbeDoc, ctx: Context, names: dict[str, str]) -> list[Finding]:
    have = installed(probe)
    said = "listed" if probe.get("freeze") else "installed"
    want = sorted(n for n in names if n.startswith("jax-cuda") and n.endswith("-plugin"))
    got = sorted(n for n in have if n.startswith("jax-cuda") and n.endswith("-plugin"))
    if not want:
        return []
    shown_want = ", ".join(f"{n} {names[n]}" for n in want)
    shown_got = ", ".join(f"{n} {have[n].get('version')}" for n in got) or "no CUDA plugin"
    same = got == want and all(str(have[n].get("version")) == names[n] for n in want)
    if same:
        return [Finding("jax plugin", "PASS", f"{shown_got} {said}, as locked")]
    return [
        Finding(
            "jax plugin",
            "FAIL",
            f"jax's CUDA comes with its plugin: {shown_got} {said}; the lock has {shown_want}",
            _repair(ctx),
        )
    ]
